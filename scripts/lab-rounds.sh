#!/usr/bin/env bash
# Forwarder lab rounds for issue 3's ratios (as root; see docs/benchmarks.md,
# "Forwarder lab" and "Live updates in the lab"): `scripts/lab-rounds.sh NAMES ROUNDS CONFIG...`, each
# CONFIG one of none (no updates), trivial (every frame to port 1), u100k,
# u10k (live changes per second), a100k (--alternate 1: phases of 1 s
# without and with 100k changes/s in one run, 12 s of traffic; prints the
# same-run ratios of the forwarded rate and of the rate per worker
# CPU-second). Runs every CONFIG once per round, in the
# order given, 5 s of traffic each, and prints one line per run: forwarder
# Mpps during the traffic, Mpps per worker CPU-second, cores of the update
# path, propagation median and p99, misforwarded frames, final-wave names
# on their final ports, read from the run's summary.json with jq (the
# a100k line: the phases' same-run ratios, median (min-max)). NEXTHOP names
# the binary (default ./target/release/nexthop); logs go to
# /tmp/lab-rounds-CONFIG.log.
set -euo pipefail
command -v jq >/dev/null || { echo "lab-rounds: needs jq (scripts/setup.sh installs it)" >&2; exit 2; }
bin=${NEXTHOP:-./target/release/nexthop}
names=$1
rounds=$2
shift 2
for r in $(seq 1 "$rounds"); do
  for cfg in "$@"; do
    case $cfg in
      none) args=(--update-rate 0) ;;
      trivial) args=(--update-rate 0 --trivial) ;;
      u100k) args=(--update-rate 100000) ;;
      u10k) args=(--update-rate 10000) ;;
      a100k) args=(--update-rate 100000 --alternate 1) ;;
      *) echo "unknown config $cfg (none, trivial, u100k, u10k, a100k)" >&2; exit 2 ;;
    esac
    log=/tmp/lab-rounds-$cfg.log
    secs=5
    [ "$cfg" = a100k ] && secs=12
    rm -f /tmp/lab-rounds/summary.json
    "$bin" lab --names "$names" --duration "$secs" --workers 1 "${args[@]}" \
      --final-names 5000 --out /tmp/lab-rounds >"$log" 2>&1
    # The figures come from the run's summary.json (see crates/cli/src/lab/summary.rs).
    j=/tmp/lab-rounds/summary.json
    if [ "$cfg" = a100k ]; then
      jq -r --arg names "$names" --arg r "$r" --arg cfg "$cfg" '
        def f: if . == null then "?" else (. * 1000 | round / 1000 | tostring) end;
        "names=\($names) round=\($r) \($cfg)"
        + " rate_ratio=[\(.phases.rate_ratio.median | f) (\(.phases.rate_ratio.min | f)-\(.phases.rate_ratio.max | f))]"
        + " per_cpu_ratio=[\(.phases.per_worker_cpu_ratio.median | f) (\(.phases.per_worker_cpu_ratio.min | f)-\(.phases.per_worker_cpu_ratio.max | f))]"
        + " update_path=\(.cpu.update_path | f) misforwarded=\(.misforwarded)"' "$j"
      continue
    fi
    jq -r --arg names "$names" --arg r "$r" --arg cfg "$cfg" '
      def f: if . == null then "?" else (. * 1000 | round / 1000 | tostring) end;
      def us: if . == null then "?" else "\(. | round) us" end;
      "names=\($names) round=\($r) \($cfg)"
      + " mpps=\(.forwarder.traffic_mpps | f) percpu=\(.forwarder.traffic_mpps_per_worker_cpu | f)"
      + " update_path=\(.cpu.update_path | f)"
      + " prop=[\(.propagation.median_us | us) \(.propagation.p99_us | us)]"
      + " misforwarded=\(.misforwarded) final=\(.final_wave.exact)"' "$j"
  done
done
