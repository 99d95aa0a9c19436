#!/usr/bin/env bash
# A FIB of N names (default 10^8) end to end, as issue "hold under attack"
# asks: build it, serve it with `nexthop controller` (the snapshot is far
# past one 256 MiB frame, so it travels in parts), follow it with a live
# `nexthop run` in a network namespace, then send frames to a sample of the
# names and require the forwarder's per-port transmit counters to equal what
# `nexthop forward` computes offline from the same FIB directory.
#
#   scripts/big-fib.sh [N] [OUT_DIR]        (root; not in CI: minutes, GBs)
#
# Prints each phase's wall time and peak RSS (from /usr/bin/time) and writes
# OUT_DIR/big-fib.json. Needs the release binary (`cargo build --release -p
# nexthop-cli`), python3 and iproute2. Cleans up its namespace and processes
# on every exit.
set -euo pipefail
cd "$(dirname "$0")/.."
n="${1:-100000000}"
out="${2:-/tmp/nexthop-big-fib}"
case "$n" in '' | *[!0-9]*) echo "big-fib: N must be a whole number, got '$n'" >&2; exit 2 ;; esac
bin="${NEXTHOP:-target/release/nexthop}"
[ -x "$bin" ] || { echo "big-fib: $bin not built (cargo build --release -p nexthop-cli)" >&2; exit 2; }
[ "$(id -u)" = 0 ] || { echo "big-fib: needs root (network namespace)" >&2; exit 2; }
sample=100000
ns="nhbig$$"
port=$((20000 + $$ % 20000))
metrics_port=$((port + 1))
mkdir -p "$out"
pids=()
cleanup() {
    # The namespace's processes (controller, forwarder) and the time wrappers.
    ip netns pids "$ns" 2>/dev/null | xargs -r kill 2>/dev/null || true
    for p in "${pids[@]}"; do kill "$p" 2>/dev/null || true; done
    wait 2>/dev/null || true
    ip netns del "$ns" 2>/dev/null || true
}
trap cleanup EXIT

now() { date +%s.%N; }
# phase NAME CMD...: run CMD under /usr/bin/time, report seconds and peak RSS.
phase() {
    local name="$1"; shift
    local t0; t0=$(now)
    /usr/bin/time -f '%M' -o "$out/$name.rss" "$@"
    local secs; secs=$(echo "$(now) - $t0" | bc | awk '{printf "%.3f", $1}')
    printf '%-10s %8.1f s  peak RSS %6d MB\n' "$name" "$secs" $(( $(tail -1 "$out/$name.rss") / 1024 ))  >&3
    echo "\"$name\": {\"seconds\": $secs, \"peak_rss_kb\": $(tail -1 "$out/$name.rss")}," >> "$out/phases.part"
}
exec 3>&1  # phase reports go to the original stdout
rm -f "$out/phases.part"

echo "big-fib: $n MAC names -> $out"
# Routes: name i is 02:xx:xx:xx:xx:xx with i in the low 40 bits; ports 1-4.
phase routes awk -v n="$n" 'BEGIN { for (i = 0; i < n; i++) {
    x = i; b5 = x % 256; x = int(x / 256); b4 = x % 256; x = int(x / 256);
    b3 = x % 256; x = int(x / 256); b2 = x % 256; x = int(x / 256); b1 = x % 256;
    printf "02:%02x:%02x:%02x:%02x:%02x %d\n", b1, b2, b3, b4, b5, (i * 7 + 3) % 4 + 1 } }' \
    > "$out/routes.txt"
# CHECK_BITS=56 makes 64-bit slots: a 10^7-name snapshot then passes the
# 256 MiB frame limit too.
phase build "$bin" fib build --key-type mac --routes "$out/routes.txt" --out "$out/fib" \
    --check-bits "${CHECK_BITS:-0}" > "$out/build.txt"
"$bin" fib stats --fib "$out/fib" | tee "$out/fib-stats.txt"
# The sample: frames to uniformly drawn names, and the offline answer.
"$bin" gen --routes "$out/routes.txt" --frames "$sample" --out "$out/sample.pcap" >/dev/null
rm -f "$out/routes.txt"
phase offline "$bin" forward --fib "$out/fib" --in-pcap "$out/sample.pcap" --out-dir "$out/offline" --json \
    > "$out/offline.json"

head -c 32 /dev/urandom | base64 > "$out/key"
chmod 600 "$out/key"
# Namespace: port 0 receives from src0; ports 1-4 send to sinks; the
# controller listens on the namespace's loopback.
ip netns add "$ns"
ip -n "$ns" link set lo up
ip -n "$ns" link add in0 type veth peer name src0
for p in 1 2 3 4; do ip -n "$ns" link add "out$p" type veth peer name "sink$p"; done
for l in in0 src0 out1 out2 out3 out4 sink1 sink2 sink3 sink4; do
    # No IPv6 autoconfiguration frames among the counted ones.
    ip netns exec "$ns" sysctl -qw "net.ipv6.conf.$l.disable_ipv6=1"
    ip -n "$ns" link set "$l" up
done
ip netns exec "$ns" \
    "$bin" controller --fib "$out/fib" --key-file "$out/key" --listen "127.0.0.1:$port" \
    > "$out/controller.out" 2> "$out/controller.err" &
pids+=($!)
until grep -q "listening" "$out/controller.err" "$out/controller.out" 2>/dev/null; do
    sleep 1
    kill -0 "${pids[-1]}" 2>/dev/null || { echo "big-fib: the controller stopped:" >&2; tail -5 "$out/controller.err" >&2; exit 1; }
done
t0=$(now)
ip netns exec "$ns" "$bin" run \
    --controller "127.0.0.1:$port" --key-file "$out/key" --snapshot-wait 1800 \
    --port 0=in0 --port 1=out1 --port 2=out2 --port 3=out3 --port 4=out4 \
    --metrics "127.0.0.1:$metrics_port" > "$out/forwarder.out" 2> "$out/forwarder.err" &
pids+=($!)
until grep -aq "installed snapshot" "$out/forwarder.err" 2>/dev/null; do
    sleep 1
    if ! kill -0 "${pids[-1]}" 2>/dev/null; then
        echo "big-fib: the forwarder stopped before its snapshot:" >&2
        tail -5 "$out/forwarder.err" >&2
        exit 1
    fi
done
secs=$(echo "$(now) - $t0" | bc | awk '{printf "%.3f", $1}')
grep -a "installed snapshot" "$out/forwarder.err" | tail -1
printf 'snapshot   %8.1f s  from the forwarder'"'"'s start to its installed snapshot\n' "$secs"
echo "\"snapshot\": {\"seconds\": $secs}," >> "$out/phases.part"
sleep 1
ip netns exec "$ns" python3 scripts/big-fib-send.py "$out/sample.pcap" src0
sleep 2
ip netns exec "$ns" "$bin" stats --timeout 30 --addr "127.0.0.1:$metrics_port" --json > "$out/live.json"
snap_line=$(grep "sent snapshot" "$out/controller.err" | tail -1)
python3 - "$out" "$n" "$sample" "$snap_line" "$ns" <<'PY'
import json, re, subprocess, sys
out, n, sample, snap_line, ns = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), sys.argv[4], sys.argv[5]
offline = json.load(open(f"{out}/offline.json"))
live = json.loads(open(f"{out}/live.json").read().splitlines()[0])
want = {f["port"]: f["frames"] for f in offline["files"]}
got = {t["port"]: t["frames"] for t in live["tx"]}
ok = (want == got and live["frames_in"] == sample and live["misses"] == 0
      and live["dropped"] == 0 and offline["forwarded"] == sample)
m = re.search(r"sent snapshot \((\d+) bytes", snap_line)
phases = json.loads("{" + open(f"{out}/phases.part").read().rstrip().rstrip(",") + "}")
# Peak RSS of the still running controller and forwarder (VmHWM).
for pid in subprocess.run(["ip", "netns", "pids", ns], capture_output=True, text=True).stdout.split():
    try:
        argv = open(f"/proc/{pid}/cmdline").read().split("\0")
        hwm = [l for l in open(f"/proc/{pid}/status") if l.startswith("VmHWM:")]
    except OSError:
        continue
    role = "controller" if "controller" in argv else "forwarder" if "run" in argv else None
    if role and hwm:
        phases[role] = {"peak_rss_kb": int(hwm[0].split()[1])}
        print(f"{role:<10} peak RSS {int(hwm[0].split()[1]) // 1024:6d} MB")
commit = subprocess.run(["git", "rev-parse", "--short", "HEAD"], capture_output=True, text=True).stdout.strip()
report = {"names": n, "snapshot_bytes": int(m.group(1)) if m else None, "frame_limit_bytes": 256 << 20,
          "sample_frames": sample, "offline_per_port": want, "live_per_port": got,
          "live_frames_in": live["frames_in"], "live_misses": live["misses"], "ok": ok,
          "phases": phases, "commit": commit}
json.dump(report, open(f"{out}/big-fib.json", "w"), indent=2)
print(f"snapshot   {report['snapshot_bytes']} bytes ({(report['snapshot_bytes'] or 0) / (256 << 20):.2f} frame limits)")
print(f"frames     offline {want}")
print(f"           live    {got} (frames in {live['frames_in']}, misses {live['misses']})")
print("big-fib: PASS" if ok else "big-fib: FAIL")
sys.exit(0 if ok else 1)
PY
