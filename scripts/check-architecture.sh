#!/usr/bin/env bash
# Check that docs/architecture.md's "Crate graph" block lists exactly the
# path dependencies between nexthop's crates (normal dependencies, as
# `cargo metadata` reports them; dev- and build-dependencies are left out),
# for the workspace and the Python package. Prints the difference and
# exits 1 when they disagree.
set -euo pipefail
cd "$(dirname "$0")/.."
export PATH="$HOME/.cargo/bin:$PATH"
actual=$(mktemp)
documented=$(mktemp)
trap 'rm -f "$actual" "$documented"' EXIT
for manifest in Cargo.toml python/Cargo.toml; do
    cargo metadata --no-deps --format-version 1 --manifest-path "$manifest"
done | python3 -c '
import json, sys
dec = json.JSONDecoder()
text = sys.stdin.read()
pos, packages = 0, {}
while pos < len(text):
    while pos < len(text) and text[pos].isspace():
        pos += 1
    if pos >= len(text):
        break
    meta, pos = dec.raw_decode(text, pos)
    for p in meta["packages"]:
        packages[p["name"]] = p
names = set(packages)
for name in sorted(packages):
    deps = sorted({d["name"] for d in packages[name]["dependencies"]
                   if d["name"] in names and d["kind"] is None})
    short = lambda n: n.removeprefix("nexthop-")
    print(short(name), "->", " ".join(short(d) for d in deps).strip())
' | sed 's/ *$//' >"$actual"
# The block: the lines between "<!-- crate-graph -->" and the closing fence.
awk '/<!-- crate-graph -->/ {on=1; next} on && /^```$/ && seen {exit} on && /^```/ {seen=1; next} on && seen {print}' \
    docs/architecture.md | sed 's/ *$//' | sort >"$documented"
sort -o "$actual" "$actual"
if ! diff -u "$documented" "$actual"; then
    echo "docs/architecture.md's crate graph (-) differs from cargo metadata (+): update the doc" >&2
    exit 1
fi
echo "crate graph in docs/architecture.md matches cargo metadata ($(wc -l <"$actual") crates)"
