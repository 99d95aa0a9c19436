#!/usr/bin/env bash
# The reproduction report's test: `scripts/repro.sh --quick` into a
# temporary directory produces every section, summary row, raw JSON/CSV
# and linked figure (scripts/repro/check.py); the check itself fails on a
# report with a section or a figure removed and on an SDF miss-rate sweep
# that is not one; `--only` into an existing report redoes its sections and
# keeps the others, labelled; an unknown --only is refused. DPDK's
# rte_lpm / rte_lpm6 columns are measured wherever pkg-config finds
# libdpdk, and a run without DPDK (NEXTHOP_REPRO_DPDK=off) says why in the
# section; the check fails on a row without DPDK's column and on level
# pulling's reduction disagreeing with its probe counts.
set -euo pipefail
cd "$(dirname "$0")/../.."
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
scripts/repro.sh --quick --out "$tmp/full"
py=target/repro-venv/bin/python
"$py" scripts/repro/check.py "$tmp/full"
# The check catches a missing figure and a missing section.
cp -r "$tmp/full" "$tmp/nofig"
rm "$tmp/nofig/reproduction/ndn_pit.svg"
if "$py" scripts/repro/check.py "$tmp/nofig" 2>/dev/null; then
    echo "repro test: check.py accepted a report with a figure missing" >&2
    exit 1
fi
cp -r "$tmp/full" "$tmp/nosec"
sed -i 's/^### NDN: Content Store hit rate$/### removed/' "$tmp/nosec/reproduction.md"
if "$py" scripts/repro/check.py "$tmp/nosec" 2>/dev/null; then
    echo "repro test: check.py accepted a report with a section missing" >&2
    exit 1
fi
# ... and a miss-rate sweep whose cache sizes are out of order.
cp -r "$tmp/full" "$tmp/nosweep"
"$py" - "$tmp/nosweep/reproduction/raw/sdf_lpm.json" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
doc["rows"].reverse()
json.dump(doc, open(sys.argv[1], "w"))
PY
if "$py" scripts/repro/check.py "$tmp/nosweep" 2>/dev/null; then
    echo "repro test: check.py accepted an SDF sweep out of order" >&2
    exit 1
fi
# DPDK's columns: measured where libdpdk is installed, and the check
# catches a row without them.
if [ "${NEXTHOP_REPRO_DPDK:-}" != off ] && pkg-config --exists libdpdk 2>/dev/null; then
    "$py" - "$tmp/full/reproduction/raw/bloomfwd_miht.json" <<'PY'
import json, sys
state = json.load(open(sys.argv[1])).get("dpdk")
if state != "measured":
    sys.exit("repro test: libdpdk is installed but DPDK was not measured: %s" % state)
PY
    cp -r "$tmp/full" "$tmp/dpdkrow"
    "$py" - "$tmp/dpdkrow/reproduction/raw/bloomfwd_miht.json" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
del doc["rows"][-1]["dpdk_mlps"]
json.dump(doc, open(sys.argv[1], "w"))
PY
    if "$py" scripts/repro/check.py "$tmp/dpdkrow" 2>/dev/null; then
        echo "repro test: check.py accepted a DPDK row without rte_lpm6's rate" >&2
        exit 1
    fi
fi
# ... and a level-pulling reduction that its probe counts contradict.
cp -r "$tmp/full" "$tmp/pull"
"$py" - "$tmp/pull/reproduction/raw/ndn_pull.json" <<'PY'
import json, sys
doc = json.load(open(sys.argv[1]))
doc["rows"][0]["alpha_pct"] += 5
json.dump(doc, open(sys.argv[1], "w"))
PY
if "$py" scripts/repro/check.py "$tmp/pull" 2>/dev/null; then
    echo "repro test: check.py accepted a level-pulling reduction off its probe counts" >&2
    exit 1
fi
# Without DPDK the MIHT section says so and why, and still checks.
cp -r "$tmp/full" "$tmp/nodpdk"
NEXTHOP_REPRO_DPDK=off scripts/repro.sh --quick --only bloomfwd_miht --out "$tmp/nodpdk"
"$py" scripts/repro/check.py "$tmp/nodpdk"
if ! grep -q 'skipped: no DPDK (NEXTHOP_REPRO_DPDK=off)' "$tmp/nodpdk/reproduction.md"; then
    echo "repro test: a run without DPDK does not say why" >&2
    exit 1
fi
# --only redoes one section and keeps the others from the earlier run.
cp -r "$tmp/full" "$tmp/only"
scripts/repro.sh --quick --only bloomfwd_lengths --out "$tmp/only"
"$py" scripts/repro/check.py "$tmp/only"
kept=$(grep -c '(kept from an earlier run)\.$' "$tmp/only/reproduction.md")
total=$(grep -c '^\*\*Run:\*\* ' "$tmp/only/reproduction.md")
if [ "$kept" -ne $((total - 1)) ]; then
    echo "repro test: --only kept $kept of $((total - 1)) other sections" >&2
    exit 1
fi
if scripts/repro.sh --only no_such_experiment --out "$tmp/bad" 2>/dev/null; then
    echo "repro test: an unknown --only was accepted" >&2
    exit 1
fi
echo "repro test: ok"
