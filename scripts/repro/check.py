#!/usr/bin/env python3
"""Checks a report written by scripts/repro.sh: every experiment has its
section and its summary row, every figure the report links exists, and
every raw JSON carries the command, the git commit, the machine and the
date of the run that wrote it. Some sections' rows are checked further:
the SDF miss-rate sweeps, DPDK's columns in the MIHT comparison (or the
reason they were skipped) and level pulling's probe counts.

    python3 scripts/repro/check.py DIR    # DIR/reproduction.md
"""

import json
import os
import re
import sys

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
import repro  # noqa: E402


def check_miss_curve(name, rows):
    """A miss-rate sweep: rows by growing cache size, every rate in [0, 1],
    and no curve ending above where it started (LRU gains with size)."""
    errors = []
    sizes = [r.get("size") for r in rows]
    if len(rows) < 2 or sizes != sorted(sizes):
        return ["%s: rows are not a sweep of growing cache sizes" % name]
    for col in rows[0]:
        if col == "size":
            continue
        vals = [r.get(col) for r in rows]
        if any(not isinstance(v, (int, float)) or not 0.0 <= v <= 1.0 for v in vals):
            errors.append("%s: %s holds a value that is not a miss rate" % (name, col))
        elif vals[-1] > vals[0] + 1e-9:
            errors.append("%s: %s ends above where it started" % (name, col))
    return errors


def check_dpdk(doc, section):
    """The MIHT / DIR-24-8 comparison: DPDK's rte_lpm / rte_lpm6 measured
    on every row (and shown in the report's table), or skipped with the
    reason said in the section."""
    state = doc.get("dpdk", "")
    if state == "measured":
        errors = []
        for r in doc["rows"]:
            for col in ("dpdk_mlps", "bloomfwd_over_dpdk"):
                v = r.get(col)
                if not isinstance(v, (int, float)) or not v > 0:
                    errors.append("bloomfwd_miht: row %s has no %s" % (r.get("label"), col))
        if "| dpdk_mlps |" not in section:
            errors.append("bloomfwd_miht: the report's table has no dpdk_mlps column")
        return errors
    if state.startswith("skipped: no DPDK"):
        if "skipped: no DPDK" not in section:
            return ["bloomfwd_miht: DPDK skipped but the section does not say so"]
        return []
    return ["bloomfwd_miht: raw JSON says neither that DPDK was measured nor why it was skipped"]


def check_pull(rows):
    """Level pulling: probes per lookup with and without on every scheme,
    the reduction matching them, lookup rates for both."""
    errors = []
    if not rows:
        return ["ndn_pull: no rows"]
    for r in rows:
        w, p, a = r.get("probes_without"), r.get("probes_with"), r.get("alpha_pct")
        if not all(isinstance(v, (int, float)) for v in (w, p, a)) or not w > 0 or not p > 0:
            errors.append("ndn_pull: %s lacks probe counts" % r.get("scheme"))
        elif abs(100 * (w - p) / w - a) > 0.6:
            errors.append("ndn_pull: %s alpha %.2f%% does not match %.2f -> %.2f probes" % (r.get("scheme"), a, w, p))
        for col in ("mlps_without", "mlps_with"):
            if not isinstance(r.get(col), (int, float)) or not r[col] > 0:
                errors.append("ndn_pull: %s has no %s" % (r.get("scheme"), col))
    return errors


def section_of(text, title):
    """The report's text from `### title` to the next heading."""
    i = text.find("### " + title + "\n")
    if i < 0:
        return ""
    m = re.compile(r"^##", re.M).search(text, i + 4)
    return text[i:m.start() if m else len(text)]


def check(out):
    errors = []
    report = os.path.join(out, "reproduction.md")
    with open(report) as f:
        text = f.read()
    if "## Summary" not in text:
        errors.append("no summary table")
    for name, title, group, _, _ in repro.EXPERIMENTS:
        if "## " + group not in text:
            errors.append("no section for %s" % group)
        if "### " + title not in text:
            errors.append("no subsection for %s" % name)
        if "| [%s](#" % title not in text:
            errors.append("no summary row for %s" % name)
        raw = os.path.join(out, "reproduction", "raw", name + ".json")
        if not os.path.exists(raw):
            errors.append("no raw JSON for %s" % name)
            continue
        with open(raw) as f:
            doc = json.load(f)
        for key in ("commands", "commit", "machine", "date", "rows", "claim"):
            if not doc.get(key):
                errors.append("%s: raw JSON lacks %s" % (name, key))
        if not os.path.exists(os.path.join(out, "reproduction", "raw", name + ".csv")):
            errors.append("no raw CSV for %s" % name)
        if name.startswith("sdf_") and name != "sdf_wildcard":
            errors += check_miss_curve(name, doc["rows"])
        if name == "bloomfwd_miht":
            errors += check_dpdk(doc, section_of(text, title))
        if name == "ndn_pull":
            errors += check_pull(doc["rows"])
    if len(re.findall(r"^\*\*Run:\*\* ", text, re.M)) != len(repro.EXPERIMENTS):
        errors.append("not every section names the run its numbers come from")
    links = re.findall(r"!\[[^\]]*\]\(([^)]+)\)", text)
    if len(links) < len(repro.EXPERIMENTS):
        errors.append("%d figures linked, %d experiments" % (len(links), len(repro.EXPERIMENTS)))
    for link in links:
        if not os.path.exists(os.path.join(out, link)):
            errors.append("linked figure missing: %s" % link)
    for verdict in re.findall(r"\| ([a-z ]+): [^|]*\|\s*$", text, re.M):
        if verdict not in ("reproduced", "beyond", "below", "not measured"):
            errors.append("unknown verdict %r" % verdict)
    return errors


def main():
    if len(sys.argv) != 2:
        sys.exit("usage: check.py DIR")
    errors = check(sys.argv[1])
    for e in errors:
        print("repro check: " + e, file=sys.stderr)
    if errors:
        sys.exit(1)
    print("repro check: %s complete (%d experiments)" % (sys.argv[1], len(repro.EXPERIMENTS)))


if __name__ == "__main__":
    main()
