"""nexthop.NameFib against a name trie, the CLI, and bad input."""

import random

import pytest

import nexthop


class NameTrie:
    """Longest-name-prefix match by a trie of components (the plain oracle)."""

    def __init__(self):
        self.root = {}

    def insert(self, comps, faces):
        node = self.root
        for c in comps:
            node = node.setdefault(c, {})
        node[None] = faces

    def lookup(self, comps):
        node, best = self.root, None
        if None in node:
            best = (0, node[None])
        for i, c in enumerate(comps):
            node = node.get(c)
            if node is None:
                break
            if None in node:
                best = (i + 1, node[None])
        return best


def random_rules(rng, n):
    rules = {}
    alphabet = [f"c{i}" for i in range(40)]
    while len(rules) < n:
        comps = tuple(rng.choice(alphabet) for _ in range(rng.randrange(1, 6)))
        rules[comps] = sorted(rng.sample(range(1, 50), rng.randrange(1, 4)))
    return rules


def uri(comps):
    return "/" + "/".join(comps)


def test_random_rules_match_a_trie():
    rng = random.Random(1)
    rules = random_rules(rng, 3000)
    trie = NameTrie()
    for c, f in rules.items():
        trie.insert(c, f)
    fib = nexthop.NameFib.build([(uri(c), f) for c, f in rules.items()], max_components=8)
    assert len(fib) == len(rules)
    queries = [tuple(rng.choice([f"c{i}" for i in range(45)]) for _ in range(rng.randrange(0, 8))) for _ in range(5000)]
    got = fib.lookup_many([uri(q) for q in queries])
    for q, g in zip(queries, got):
        want = trie.lookup(q)
        if want is None:
            assert g is None, q
        else:
            assert g is not None, q
            assert g[0] == (uri(q[: want[0]]) if want[0] else "/")
            assert sorted(g[1]) == sorted(want[1])
    assert fib.lookup(uri(queries[0])) == got[0]
    # Updates follow the trie.
    fib.insert("/", [99])
    trie.insert((), [99])
    victims = list(rules)[:300]
    for c in victims:
        fib.remove(uri(c))
    trie2 = NameTrie()
    trie2.insert((), [99])
    for c, f in list(rules.items())[300:]:
        trie2.insert(c, f)
    for q, g in zip(queries, fib.lookup_many([uri(q) for q in queries])):
        want = trie2.lookup(q)
        assert g is not None and sorted(g[1]) == sorted(want[1])
    assert fib.stats()["rules"] == len(rules) - 300 + 1


def test_canonical_prefix_form():
    fib = nexthop.NameFib.build({"/a/b": [1, 2], "ndn:/x": [3]})
    assert fib.lookup("/a/b/c/d") == ("/a/b", [1, 2])
    assert fib.lookup("/x/%41") == ("/x", [3])
    assert fib.lookup("/b") is None


def test_cli_agrees(tmp_path, cli):
    rng = random.Random(2)
    rules = random_rules(rng, 500)
    f = tmp_path / "routes.txt"
    f.write_text("".join(f"{uri(c)} {','.join(map(str, fs))}\n" for c, fs in rules.items()))
    out = tmp_path / "n.fib"
    cli("ndn", "fib", "build", "--routes", f, "--out", out)
    fib = nexthop.NameFib.build([(uri(c), fs) for c, fs in rules.items()])
    queries = [uri(c) + "/tail" for c in list(rules)[:100]] + ["/nothing/here"]
    lines = cli("ndn", "fib", "lookup", "--fib", out, *queries).splitlines()
    for q, line in zip(queries, lines):
        g = fib.lookup(q)
        if g is None:
            assert line == "-"
        else:
            prefix, faces = line.split(" ", 1)
            assert prefix == g[0]
            assert sorted(int(x.split(":")[0]) for x in faces.split(",")) == sorted(g[1])


def test_bad_input():
    with pytest.raises(ValueError, match="pair 1: invalid name"):
        nexthop.NameFib.build([("/a", [1]), ("a/%zz", [2])])
    with pytest.raises(ValueError, match="pair 0"):
        nexthop.NameFib.build([("/a", [])])
    with pytest.raises(ValueError, match="pair 1"):
        nexthop.NameFib.build([("/a", [1]), ("/a", [2])])
    with pytest.raises(TypeError, match="pair 0"):
        nexthop.NameFib.build([("/a", 1)])
    with pytest.raises(TypeError):
        nexthop.NameFib.build([("/a", [-1])])
    with pytest.raises(ValueError, match="below the longest rule"):
        nexthop.NameFib.build([("/a/b/c", [1])], max_components=2)
    fib = nexthop.NameFib.build([("/a", [1])])
    with pytest.raises(ValueError, match="invalid name"):
        fib.lookup("/%")
    with pytest.raises(ValueError, match=r"names\[1\]"):
        fib.lookup_many(["/a", "/%"])
    with pytest.raises(nexthop.UpdateError):
        fib.insert("/a/b/c", [2])
    with pytest.raises(nexthop.UpdateError):
        fib.remove("/zzz")
    assert fib.lookup("/a/b/c") == ("/a", [1]) and len(fib) == 1
