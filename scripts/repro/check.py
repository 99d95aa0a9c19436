#!/usr/bin/env python3
"""Checks a report written by scripts/repro.sh: every experiment has its
section and its summary row, every figure the report links exists, and
every raw JSON carries the command, the git commit, the machine and the
date of the run that wrote it.

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
