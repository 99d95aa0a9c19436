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
# on their final ports. NEXTHOP names the binary
# (default ./target/release/nexthop); logs go to /tmp/lab-rounds-CONFIG.log.
set -euo pipefail
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
    "$bin" lab --names "$names" --duration "$secs" --workers 1 "${args[@]}" \
      --final-names 5000 --out /tmp/lab-rounds >"$log" 2>&1
    if [ "$cfg" = a100k ]; then
      rate=$(grep -E '^  phases .* with / without' "$log" | sed 's/.*with \/ without \([0-9.]* ([0-9.-]*)\).*/\1/' || true)
      cpu=$(grep -E '^  phases +per worker CPU-second' "$log" | sed 's/.* with: \([0-9.]* ([0-9.-]*)\).*/\1/' || true)
      upd=$(grep -E '^  phases +per worker CPU-second' "$log" | sed 's/.*update path \([0-9.]*\) \/ \([0-9.]*\).*/\2/' || true)
      mis=$(grep -E '^  misforwarded' "$log" | awk '{print $2}' || true)
      echo "names=$names round=$r $cfg rate_ratio=[$rate] per_cpu_ratio=[$cpu] update_path=$upd misforwarded=$mis"
      continue
    fi
    fwd=$(grep -E 'forwarder +[0-9]+ frames in' "$log" || true)
    mpps=$(sed 's/.*during the traffic: \([0-9.]*\) Mpps.*/\1/' <<<"$fwd")
    percpu=$(sed 's/.*; \([0-9.]*\) Mpps per worker CPU-second.*/\1/' <<<"$fwd")
    upd=$(grep -E '^  cpu' "$log" | sed 's/.*update path \([0-9.-]*\).*/\1/' || true)
    prop=$(grep -E 'propagation' "$log" \
      | sed 's/.*applied): median \([0-9]* [mu]*s\), p99 \([0-9]* [mu]*s\).*/\1 \2/' || true)
    mis=$(grep -E '^  misforwarded' "$log" | awk '{print $2}' || true)
    final=$(grep -E 'final wave +[0-9]+ names' "$log" | sed 's/.*: \([0-9]*\) exactly.*/\1/' || true)
    echo "names=$names round=$r $cfg mpps=$mpps percpu=$percpu update_path=$upd prop=[$prop] misforwarded=$mis final=$final"
  done
done
