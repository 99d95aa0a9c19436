#!/usr/bin/env bash
# Per-thread CPU of a `nexthop lab` run: starts the lab (1e6 names, one
# worker, UPDATE_RATE changes/s), samples /proc/*/task/*/stat of every
# nexthop process (the lab, its controller threads, the forwarder and its
# follower) once traffic runs and again 2 s later, and prints the cores
# each busy thread used, then the lab's forwarder, update and propagation
# lines. As root. Usage: scripts/lab-threads.sh [UPDATE_RATE] [BIN] [LAB ARGS...]
# (e.g. `scripts/lab-threads.sh 100000 target/release/nexthop --changes-per-delta 1`)
set -euo pipefail
rate=${1:-100000}
bin=${2:-target/release/nexthop}
shift $(($# < 2 ? $# : 2))
out=$(mktemp -d /tmp/nexthop-lab-threads.XXXXXX)
snap() {
    for p in /proc/[0-9]*; do
        case "$(readlink "$p/exe" 2>/dev/null)" in
        *nexthop*)
            for t in "$p"/task/*; do
                c=$(tr -d ' ' <"$t/comm" 2>/dev/null) || continue
                v=$(sed 's/.*) //' "$t/stat" 2>/dev/null | awk '{print $12+$13}') || continue
                echo "$(basename "$p")/$(basename "$t")/$c/$(tr '\0' ' ' <"$p/cmdline" | awk '{print $2}') $v"
            done
            ;;
        esac
    done
}
"$bin" lab --names 1000000 --duration 5 --workers 1 --update-rate "$rate" \
    --final-names 5000 --out "$out/lab" "$@" >"$out/lab.txt" 2>&1 &
lab=$!
until grep -q "traffic    sent" "$out/lab.txt" 2>/dev/null; do
    kill -0 "$lab" 2>/dev/null || { cat "$out/lab.txt"; exit 1; }
    sleep 0.2
done
t1=$(date +%s.%N)
snap | sort >"$out/s1"
sleep 2
t2=$(date +%s.%N)
snap | sort >"$out/s2"
wait "$lab"
hz=$(getconf CLK_TCK)
# Each snapshot takes a moment: divide by the time between their starts.
secs=$(awk -v a="$t1" -v b="$t2" 'BEGIN { print b - a }')
join "$out/s1" "$out/s2" | awk -v hz="$hz" -v secs="$secs" '{d = ($3 - $2) / hz / secs; if (d > 0.01) printf "%-50s %.2f cores\n", $1, d}'
grep -E "in during the traffic|updates  |propagation" "$out/lab.txt"
echo "lab output and samples in $out"
