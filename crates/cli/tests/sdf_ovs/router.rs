//! The IPv4 router on the OVS backend: routing, route changes revoking
//! their flows, revocation under a stream, the megaflow measurement, and
//! the same router on nexthop's own backend.

use super::*;

/// The router's MAC on port `p`.
fn router_mac(p: u8) -> [u8; 6] {
    [0x02, 0x00, 0x5e, 0x00, 0x53, 0xf0 | p]
}

/// Run `ip -n NS ARGS` for host `h` of `lab`; its stdout.
fn ip(lab: &Lab, h: u8, args: &[&str]) -> String {
    let out = Command::new("ip")
        .args(["-n", &lab.ns(&format!("h{h}"))])
        .args(args)
        .output()
        .expect("run ip");
    assert!(
        out.status.success(),
        "ip {args:?}: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// An IPv4/UDP frame from h1 (192.0.2.2) to the router's port-1 MAC and
/// `dst`, TTL 64, with the magic and `seq` in its payload.
fn udp_frame(dst: [u8; 4], seq: u16) -> Vec<u8> {
    let mut f = Vec::with_capacity(60);
    f.extend_from_slice(&router_mac(1));
    f.extend_from_slice(&host_mac(1));
    f.extend_from_slice(&[0x08, 0x00]);
    let mut ipv4 = [
        0x45, 0, 0, 34, 0, 0, 0x40, 0, 64, 17, 0, 0, 192, 0, 2, 2, dst[0], dst[1], dst[2], dst[3],
    ];
    let ck = nexthop_wire::checksum::ipv4_header_checksum(&ipv4);
    ipv4[10..12].copy_from_slice(&ck.to_be_bytes());
    f.extend_from_slice(&ipv4);
    f.extend_from_slice(&[0x27, 0x0f, 0x27, 0x0f, 0, 14, 0, 0]);
    f.extend_from_slice(MAGIC);
    f.extend_from_slice(&seq.to_be_bytes());
    f.resize(60, 0);
    f
}

/// `sent` as the router forwards it to `next_hop` out of port 2.
fn routed(sent: &[u8], next_hop: [u8; 6]) -> Vec<u8> {
    let mut f = sent.to_vec();
    f[..6].copy_from_slice(&next_hop);
    f[6..12].copy_from_slice(&router_mac(2));
    f[22] -= 1;
    f[24..26].fill(0);
    let ck = nexthop_wire::checksum::ipv4_header_checksum(&f[14..34]);
    f[24..26].copy_from_slice(&ck.to_be_bytes());
    f
}

/// The flow of dump-flows lines with all the space-separated parts of
/// `needle`.
fn ip_flow<'a>(flows: &'a [String], needle: &str) -> Option<&'a str> {
    flows
        .iter()
        .find(|f| needle.split(' ').all(|n| f.contains(n)))
        .map(String::as_str)
}

/// A router run: the lab (hosts h1 and h2 on 192.0.2.0/24 and
/// 198.51.100.0/24, their gateways the router's .1), OVS, the route file
/// (its text for a next hop of 198.51.100.0/24 from `table`), captures on
/// both hosts and the `nexthop sdf run --app router --backend ovs` child,
/// connected and flushed; `None` (with the reason printed) where it cannot
/// run.
struct RouterRun {
    lab: Lab,
    ovs: Ovs,
    routes: std::path::PathBuf,
    caps: hosts::Captures,
    sw: usize,
}

/// The route file with `h2_next_hop` as 198.51.100.0/24's next hop.
fn table(h2_next_hop: [u8; 6]) -> String {
    format!(
        "# the two subnets\n192.0.2.0/24 1 {}\n198.51.100.0/24 2 {}\n",
        mac_text(host_mac(1)),
        mac_text(h2_next_hop)
    )
}

/// The router's `--router-iface` flags.
fn router_ifaces() -> [String; 4] {
    [
        "--router-iface".into(),
        format!("1={},192.0.2.1", mac_text(router_mac(1))),
        "--router-iface".into(),
        format!("2={},198.51.100.1", mac_text(router_mac(2))),
    ]
}

fn start_router(test: &str) -> Option<RouterRun> {
    start_router_with(test, &[])
}

/// [`start_router`] with more `nexthop sdf run` flags.
fn start_router_with(test: &str, extra: &[&str]) -> Option<RouterRun> {
    let ports: [(u8, u16); 2] = [(1, 1), (2, 2)];
    let (mut lab, ovs) = ovs_lab(test, 2, &[(BRIDGE, &ports)])?;
    // h1 192.0.2.2/24 and h2 198.51.100.2/24, each with the router as
    // its gateway (.1).
    for (h, net) in [(1u8, "192.0.2"), (2, "198.51.100")] {
        let iface = format!("h{h}");
        ip(
            &lab,
            h,
            &["link", "set", &iface, "address", &mac_text(host_mac(h))],
        );
        ip(
            &lab,
            h,
            &["addr", "add", &format!("{net}.2/24"), "dev", &iface],
        );
        ip(
            &lab,
            h,
            &["route", "add", "default", "via", &format!("{net}.1")],
        );
    }
    let routes = lab.file("routes");
    fs::write(&routes, table(host_mac(2))).expect("write routes");
    let caps = hosts::capture(&mut lab, &[1, 2]);
    let ifaces = router_ifaces();
    let route_file = routes.display().to_string();
    let mut args: Vec<&str> = vec!["--app", "router"];
    args.extend(ifaces.iter().map(String::as_str));
    args.extend(["--router-routes", &route_file]);
    args.extend_from_slice(extra);
    let sw = start_backend(&mut lab, &ovs, &args, "1,2");
    Some(RouterRun {
        lab,
        ovs,
        routes,
        caps,
        sw,
    })
}

#[test]
fn router_on_open_vswitch_routes_two_subnets_and_a_route_change_revokes_its_flows() {
    let Some(RouterRun {
        mut lab,
        ovs,
        routes,
        caps,
        sw,
    }) = start_router("sdfovsrt")
    else {
        return;
    };
    // 1. Each host's kernel sends a UDP datagram to the other subnet
    // (bash's /dev/udp; to .3, which the receiving kernel drops without
    // an answer): first it resolves its gateway by ARP, answered by the
    // app through a packet-out; then the datagram becomes one flow per
    // direction, matching the destination bits that settle the route (up
    // to the bit that tells .3 from the router's .1) and doing the
    // router's rewrites in OVS.
    for (h, dst) in [(1u8, "198.51.100.3"), (2, "192.0.2.3")] {
        let payload = format!("{}k{h}", std::str::from_utf8(MAGIC).unwrap());
        let send = Command::new("ip")
            .args(["netns", "exec", &lab.ns(&format!("h{h}"))])
            .args(["bash", "-c"])
            .arg(format!("printf {payload} > /dev/udp/{dst}/9999"))
            .output()
            .expect("run bash");
        assert!(send.status.success(), "{send:?}");
        let gw = if h == 1 { "192.0.2.1" } else { "198.51.100.1" };
        let t = Instant::now();
        let mut neigh = String::new();
        while t.elapsed() < Duration::from_secs(10) {
            neigh = ip(&lab, h, &["neigh", "show", gw]);
            if neigh.contains("lladdr") {
                break;
            }
            sleep(Duration::from_millis(20));
        }
        assert!(
            neigh.contains(&format!("lladdr {}", mac_text(router_mac(h)))),
            "h{h}'s ARP for {gw}: {neigh}\n{}",
            lab.read("sw.err")
        );
    }
    // Outputs make the ingress port part of the match (an output back to
    // it would be OVS's IN_PORT).
    let to_h2 = "ip, in_port=1, nw_dst=198.51.100.2/31";
    let to_h1 = "ip, in_port=2, nw_dst=192.0.2.2/31";
    let f = flows_when(&ovs, |f| {
        ip_flow(f, to_h2).is_some() && ip_flow(f, to_h1).is_some()
    });
    let fwd = ip_flow(&f, to_h2).expect("flow to h2").to_owned();
    let back = ip_flow(&f, to_h1).expect("flow to h1").to_owned();
    assert_eq!(
        actions(&fwd),
        format!(
            "set_field:{}->eth_dst,set_field:{}->eth_src,dec_ttl,output:2",
            mac_text(host_mac(2)),
            mac_text(router_mac(2))
        ),
        "{fwd}"
    );
    assert!(actions(&back).ends_with("dec_ttl,output:1"), "{back}");
    assert_ne!(cookie(&fwd), cookie(&back), "one state id per route");
    assert_eq!(f.len(), 3, "table-miss and the two routes' flows: {f:?}");

    // 2. UDP frames from h1 to 198.51.100.3 (in the flow's /31, not h2's
    // address: h2 drops them without an ICMP answer): OVS forwards them
    // by itself, rewritten.
    let burst: Vec<Vec<u8>> = (0..5).map(|s| udp_frame([198, 51, 100, 3], s)).collect();
    let fwd_packets = |ovs: &Ovs| packets(ovs, &|l: &str| to_h2.split(' ').all(|n| l.contains(n)));
    let before = fwd_packets(&ovs);
    hosts::send(&mut lab, 1, &burst);
    let t = Instant::now();
    while fwd_packets(&ovs) < before + 5 && t.elapsed() < Duration::from_secs(10) {
        sleep(Duration::from_millis(20));
    }
    assert_eq!(
        fwd_packets(&ovs),
        before + 5,
        "the burst went through the flow"
    );

    // 3. A route change: 198.51.100.0/24 gets another next hop. Exactly
    // its flow goes (before any packet uses it again); h1's stays.
    let new_hop = [0x02, 0x00, 0x5e, 0x00, 0x53, 0x99];
    let changed = Instant::now();
    fs::write(&routes, table(new_hop)).expect("rewrite routes");
    let f = flows_when(&ovs, |f| ip_flow(f, to_h2).is_none());
    eprintln!(
        "route change seen in dump-flows after {} ms",
        changed.elapsed().as_millis()
    );
    assert!(ip_flow(&f, to_h2).is_none(), "{f:?}");
    assert_eq!(ip_flow(&f, to_h1), Some(back.as_str()), "{f:?}");
    assert_eq!(f.len(), 2, "{f:?}");
    let again = udp_frame([198, 51, 100, 3], 5);
    hosts::send(&mut lab, 1, std::slice::from_ref(&again));
    let f = flows_when(&ovs, |f| ip_flow(f, to_h2).is_some());
    let fwd2 = ip_flow(&f, to_h2).expect("the new flow to h2").to_owned();
    assert!(
        actions(&fwd2).starts_with(&format!("set_field:{}->eth_dst", mac_text(new_hop))),
        "{fwd2}"
    );

    // Stop nexthop (SIGTERM) and the captures.
    let (out, err) = stop_backend(&mut lab, sw);
    caps.finish(&mut lab);
    // The kernels' datagrams, routed: the next hop's MAC from the
    // router's, TTL 63 (Linux sends with 64), a valid header checksum.
    let (mut got1, mut got2) = (hosts::received(&lab, 1), hosts::received(&lab, 2));
    for (h, got) in [(1u8, &mut got1), (2, &mut got2)] {
        assert!(!got.is_empty(), "h{h} received nothing");
        let k = got.remove(0);
        assert_eq!(k[..6], host_mac(h), "h{h}: {}", hex(&k));
        assert_eq!(k[6..12], router_mac(h), "h{h}: {}", hex(&k));
        assert_eq!(k[22], 63, "h{h}: {}", hex(&k));
        let ck = nexthop_wire::checksum::ipv4_header_checksum(&k[14..34]);
        assert_eq!(ck.to_be_bytes(), k[24..26], "h{h}: {}", hex(&k));
    }
    let mut want: Vec<Vec<u8>> = burst.iter().map(|f| routed(f, host_mac(2))).collect();
    want.push(routed(&again, new_hop));
    assert_eq!(got2, want, "h2");
    assert!(got1.is_empty(), "h1: {got1:?}");

    let s: serde_json::Value = serde_json::from_str(out.trim()).expect("summary JSON");
    eprintln!("nexthop sdf run --app router --backend ovs: {s}");
    let n = |k: &str| s[k].as_u64().unwrap_or_else(|| panic!("no {k} in {s}"));
    assert_eq!(s["app"], "router");
    assert_eq!(n("errors"), 0, "{s}");
    assert_eq!(n("not_installed"), 0, "{s}");
    assert_eq!(n("dropped_waiting"), 0, "{s}");
    // The route change: one state id, one flow.
    assert_eq!(n("revoked_states"), 1, "{s}");
    assert_eq!(n("revoked_flows"), 1, "{s}");
    assert_eq!(n("flows_installed"), 3, "{s}");
    // A changed route counts as its old and its new version.
    assert!(
        err.contains("2 routes, 2 added, changed or withdrawn"),
        "{err}"
    );
}

/// One route change under a steady stream, as [`route_changes_under_a_stream`]
/// measured it: Unix nanoseconds (CLOCK_REALTIME) of the backend finding
/// the router's `removed()` and of the frames h2's kernel received.
#[derive(Debug)]
struct Change {
    /// When the backend found `removed()` (its revocation log line).
    removed_ns: u128,
    /// From then to the barrier reply confirming the deletes, µs.
    confirmed_us: u128,
    /// Frames forwarded with the old decision (the old next hop's MAC):
    /// all of them, and the receive time of the last.
    old_frames: usize,
    last_old_ns: Option<u128>,
    /// Frames forwarded with the new decision: the first one's time.
    first_new_ns: Option<u128>,
    /// Whether some old-decision frame arrived after a new-decision one.
    old_after_new: bool,
}

impl Change {
    /// Last old-decision frame minus `removed()`, µs (negative: it
    /// arrived before).
    fn last_old_us(&self) -> Option<f64> {
        self.last_old_ns
            .map(|t| (t as f64 - self.removed_ns as f64) / 1000.0)
    }

    /// First new-decision frame minus `removed()`, µs.
    fn first_new_us(&self) -> Option<f64> {
        self.first_new_ns
            .map(|t| (t as f64 - self.removed_ns as f64) / 1000.0)
    }
}

/// The revocation lines of the backend's stderr so far:
/// (removed_unix_ns, confirmed_us).
fn revocation_lines(lab: &Lab) -> Vec<(u128, u128)> {
    lab.read("sw.err")
        .lines()
        .filter_map(|l| l.strip_prefix("nexthop sdf: revocation "))
        .map(|l| {
            let f = common::fields(l);
            let n = |k: &str| -> u128 {
                common::field(&f, k)
                    .parse()
                    .unwrap_or_else(|_| panic!("{k} in {l}"))
            };
            (n("removed_unix_ns"), n("confirmed_us"))
        })
        .collect()
}

/// The router on OVS (`--ovs-log-revocations`) while h1 sends a steady
/// stream of one flow (UDP to 198.51.100.7, one frame every `pace`):
/// `changes` times, the route of 198.51.100.0/24 gets a new next hop
/// (the route file replaced by a rename; the router reads it every
/// 100 ms), each once the one before has been confirmed and its new flow
/// carried the stream for a while. h2 captures with kernel timestamps;
/// the next hop's MAC in a frame says which decision forwarded it.
fn route_changes_under_a_stream(test: &str, changes: u8, pace: Duration) -> Option<Vec<Change>> {
    let RouterRun {
        mut lab,
        ovs,
        routes,
        caps,
        sw,
    } = start_router_with(test, &["--ovs-log-revocations"])?;
    let hop = |k: u8| [0x02, 0x00, 0x5e, 0x00, 0x54, k];
    let spacing = Duration::from_millis(300);
    let total = spacing * u32::from(changes) + Duration::from_millis(1500);
    let repeat = (total.as_micros() / pace.as_micros().max(1)) as u64;
    let stream = hosts::stream(
        &mut lab,
        1,
        &[udp_frame([198, 51, 100, 7], 7)],
        repeat,
        pace,
    );
    // The stream's flow is in place (hop: h2).
    flows_when(&ovs, |f| {
        f.iter().any(|l| l.contains(&mac_text(host_mac(2))))
    });
    sleep(Duration::from_millis(200));
    let replace = |text: String| {
        let tmp = lab.file("routes.new");
        fs::write(&tmp, text).expect("write routes");
        fs::rename(&tmp, &routes).expect("replace routes");
    };
    for k in 0..changes {
        let seen = revocation_lines(&lab).len();
        replace(table(hop(k)));
        let t = Instant::now();
        while revocation_lines(&lab).len() == seen {
            assert!(
                t.elapsed() < Duration::from_secs(5),
                "change {k}: no revocation logged\n{}",
                lab.read("sw.err")
            );
            sleep(Duration::from_millis(5));
        }
        // The new decision carries the stream for a while.
        sleep(
            spacing
                .saturating_sub(t.elapsed())
                .max(Duration::from_millis(150)),
        );
    }
    let (sent, secs) = hosts::stream_end(&mut lab, 1, stream, Duration::from_secs(60));
    let (out, err) = stop_backend(&mut lab, sw);
    caps.finish(&mut lab);
    eprintln!(
        "stream: {sent} frames in {secs:.3} s ({:.0} µs apart on average); nexthop sdf run --backend ovs: {}",
        secs * 1e6 / sent.max(1) as f64,
        out.trim()
    );
    let revs = revocation_lines(&lab);
    assert_eq!(revs.len(), usize::from(changes), "{err}");
    let got = hosts::received_timed(&lab, 2);
    let mut out = Vec::new();
    for (k, &(removed_ns, confirmed_us)) in revs.iter().enumerate() {
        let k = k as u8;
        let old = if k == 0 { host_mac(2) } else { hop(k - 1) };
        let new = hop(k);
        let at = |m: [u8; 6]| {
            got.iter()
                .filter(move |(_, f)| f[..6] == m)
                .map(|(t, _)| *t)
        };
        let first_new_ns = at(new).min();
        let last_old_ns = at(old).max();
        out.push(Change {
            removed_ns,
            confirmed_us,
            old_frames: at(old).count(),
            last_old_ns,
            first_new_ns,
            old_after_new: matches!((last_old_ns, first_new_ns), (Some(o), Some(n)) if o > n),
        });
    }
    // Every frame h2 got was forwarded with one of the decisions.
    let known: Vec<[u8; 6]> = std::iter::once(host_mac(2))
        .chain((0..changes).map(hop))
        .collect();
    assert!(
        got.iter().all(|(_, f)| known.iter().any(|m| f[..6] == *m)),
        "a frame with an unknown next hop"
    );
    eprintln!("h2 received {} of the stream's {sent} frames", got.len());
    Some(out)
}

/// p-th percentile (nearest rank) of sorted `v`.
fn percentile(v: &[f64], p: f64) -> f64 {
    let i = ((p / 100.0) * v.len() as f64).ceil() as usize;
    v[i.clamp(1, v.len()) - 1]
}

#[test]
fn a_route_change_under_a_stream_stops_the_old_decision_before_the_new_one_starts() {
    let Some(changes) = route_changes_under_a_stream("sdfovsrv", 3, Duration::from_micros(500))
    else {
        return;
    };
    for (k, c) in changes.iter().enumerate() {
        eprintln!(
            "change {k}: last old frame {:?} µs, first new frame {:?} µs after removed(); confirmed after {} µs; {} old frames",
            c.last_old_us(),
            c.first_new_us(),
            c.confirmed_us,
            c.old_frames
        );
        // The stream ran through the decision before and after.
        assert!(c.old_frames > 0, "change {k}: {c:?}");
        assert!(c.first_new_ns.is_some(), "change {k}: {c:?}");
        // Order, not time: no frame of the old decision once the new one
        // forwarded, none after the confirmed deletes and a grace of 1 s
        // (OVS's revalidators remove its datapath flows; a loaded machine
        // may delay them, never by this much).
        assert!(!c.old_after_new, "change {k}: {c:?}");
        let confirmed = c.removed_ns + c.confirmed_us * 1000;
        assert!(
            c.last_old_ns.unwrap() <= confirmed + 1_000_000_000,
            "change {k}: {c:?}"
        );
    }
}

/// Not a test: the revocation latency of docs/benchmarks.md ("SDF on Open
/// vSwitch"): `cargo test -p nexthop-cli --release --test sdf_ovs --
/// --ignored --nocapture revocation_latency` (root). 20 route changes
/// under a stream of one frame every 200 µs.
#[test]
#[ignore = "measurement: docs/benchmarks.md, SDF on Open vSwitch"]
fn revocation_latency_to_the_last_old_decision_frame() {
    let Some(changes) = route_changes_under_a_stream("sdfovsrl", 20, Duration::from_micros(200))
    else {
        return;
    };
    let stats = |name: &str, mut v: Vec<f64>| {
        v.sort_by(f64::total_cmp);
        eprintln!(
            "{name}: n={} median={:.0} µs p99={:.0} µs max={:.0} µs min={:.0} µs",
            v.len(),
            percentile(&v, 50.0),
            percentile(&v, 99.0),
            v[v.len() - 1],
            v[0]
        );
    };
    for (k, c) in changes.iter().enumerate() {
        eprintln!(
            "change {k}: {c:?} last_old_us={:?} first_new_us={:?}",
            c.last_old_us(),
            c.first_new_us()
        );
    }
    stats(
        "removed() -> last old-decision frame",
        changes.iter().filter_map(Change::last_old_us).collect(),
    );
    stats(
        "removed() -> first new-decision frame",
        changes.iter().filter_map(Change::first_new_us).collect(),
    );
    stats(
        "removed() -> barrier reply",
        changes.iter().map(|c| c.confirmed_us as f64).collect(),
    );
    // Positive: an old-decision frame left OVS after the barrier reply
    // (its datapath flow outlived the OpenFlow flow).
    stats(
        "barrier reply -> last old-decision frame",
        changes
            .iter()
            .filter_map(|c| Some(c.last_old_us()? - c.confirmed_us as f64))
            .collect(),
    );
    assert!(changes.iter().all(|c| !c.old_after_new), "{changes:?}");
}

/// `ovs-appctl dpif-netdev/pmd-stats-show`, summed over the datapath's
/// threads: counter name (`packets received`, `emc hits`, `megaflow hits`,
/// `miss with success upcall`, ...) -> value.
fn dp_stats(ovs: &Ovs) -> std::collections::BTreeMap<String, u64> {
    let mut m = std::collections::BTreeMap::new();
    for l in appctl(ovs, &["dpif-netdev/pmd-stats-show"]).lines() {
        if let Some((k, v)) = l.split_once(':') {
            if let Ok(v) = v.trim().parse::<u64>() {
                *m.entry(k.trim().to_owned()).or_insert(0) += v;
            }
        }
    }
    m
}

/// Not a test: the figures of docs/benchmarks.md ("SDF on Open vSwitch",
/// megaflow hit rate and revocation): `cargo test -p nexthop-cli --release
/// --test sdf_ovs -- --ignored --nocapture megaflow`. The same frames (h1
/// to 198.51.100.0/24, destinations cycling over .2 to .254, source ports
/// varying) go through the router on OVS and through `nexthop sdf run
/// --app router` over a pcap file; then 20 route changes, each followed by
/// one frame, give the backend's revocation latencies.
#[test]
#[ignore = "measurement: docs/benchmarks.md, SDF on Open vSwitch"]
fn router_megaflow_hit_rate_against_the_nexthop_cache() {
    let Some(RouterRun {
        mut lab,
        ovs,
        routes,
        caps,
        sw,
    }) = start_router("sdfovsmf")
    else {
        return;
    };
    let n = 4000u16;
    let frames: Vec<Vec<u8>> = (0..n)
        .map(|i| {
            let mut f = udp_frame([198, 51, 100, 2 + (i % 253) as u8], i);
            f[34..36].copy_from_slice(&(1024 + i).to_be_bytes());
            f
        })
        .collect();
    appctl(&ovs, &["dpif-netdev/pmd-stats-clear"]);
    hosts::send(&mut lab, 1, &frames);
    let t = Instant::now();
    let got = |m: &std::collections::BTreeMap<String, u64>, k: &str| m.get(k).copied().unwrap_or(0);
    let mut st = dp_stats(&ovs);
    while got(&st, "packets received") < u64::from(n) && t.elapsed() < Duration::from_secs(5) {
        sleep(Duration::from_millis(20));
        st = dp_stats(&ovs);
    }
    let megaflows = appctl(&ovs, &["dpctl/dump-flows"]);
    let openflow = ovs.flows(BRIDGE).expect("dump-flows");
    eprintln!("datapath megaflows:\n{megaflows}");
    eprintln!("OpenFlow flows:\n{}", openflow.join("\n"));
    eprintln!("datapath counters: {st:?}");
    // Where frames are lost: the kernel's count of what reached op1 (the
    // veth end OVS reads with a packet socket) against OVS's own.
    let kernel = Command::new("ip")
        .args(["-n", &lab.ns("sw"), "-s", "link", "show", "op1"])
        .output()
        .expect("ip -s link");
    eprintln!(
        "kernel, op1:\n{}",
        String::from_utf8_lossy(&kernel.stdout).trim()
    );
    // The packet sockets of namespace sw (OVS's, one per netdev port):
    // `skmem:(...,d<N>)` is what a socket dropped for a full receive buffer.
    let socks = Command::new("ip")
        .args(["netns", "exec", &lab.ns("sw"), "ss", "-0", "-n", "-m", "-p"])
        .output()
        .expect("ss");
    eprintln!(
        "packet sockets, namespace sw:\n{}",
        String::from_utf8_lossy(&socks.stdout).trim()
    );
    eprintln!(
        "OVS, op1: {}",
        ovs.vsctl(&["get", "interface", "op1", "statistics"])
            .unwrap_or_else(|e| e.to_string())
    );
    let cached = got(&st, "emc hits") + got(&st, "smc hits") + got(&st, "megaflow hits");
    let upcalls = got(&st, "miss with success upcall") + got(&st, "miss with failed upcall");
    eprintln!(
        "OVS datapath: {n} frames sent, {} received, {cached} cache hits, {upcalls} upcalls, hit rate {:.4}, {} megaflows, {} OpenFlow flows (table-miss included)",
        got(&st, "packets received"),
        cached as f64 / (cached + upcalls).max(1) as f64,
        megaflows.lines().count(),
        openflow.len()
    );
    // Revocation: 20 next-hop changes, a frame after each (its flow back).
    for k in 0..20u8 {
        let hop = [0x02, 0x00, 0x5e, 0x00, 0x54, k];
        fs::write(&routes, table(hop)).expect("rewrite routes");
        flows_when(&ovs, |f| {
            !f.iter()
                .any(|l| l.contains("nw_dst=198.51.100") && !l.contains(&mac_text(hop)))
        });
        hosts::send(
            &mut lab,
            1,
            &[udp_frame([198, 51, 100, 7], 5000 + u16::from(k))],
        );
        flows_when(&ovs, |f| f.iter().any(|l| l.contains(&mac_text(hop))));
    }
    let (out, _) = stop_backend(&mut lab, sw);
    caps.finish(&mut lab);
    eprintln!("nexthop sdf run --backend ovs: {}", out.trim());

    // The same frames through nexthop's own cache.
    fs::write(&routes, table(host_mac(2))).expect("write routes");
    let file = lab.file("traffic.pcap");
    fs::write(&file, pcapio::pcap_seq(&frames)).expect("write pcap");
    let out_dir = lab.file("out");
    let ifaces = router_ifaces();
    let route_file = routes.display().to_string();
    let input = format!("1={}", file.display());
    let outd = out_dir.display().to_string();
    let mut args: Vec<&str> = vec!["sdf", "run", "--app", "router"];
    args.extend(ifaces.iter().map(String::as_str));
    args.extend([
        "--router-routes",
        &route_file,
        "--in-pcap",
        &input,
        "--out-dir",
        &outd,
        "--json",
    ]);
    let o = Command::new(NEXTHOP).args(&args).output().expect("nexthop");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    let s: serde_json::Value = serde_json::from_slice(&o.stdout).expect("summary JSON");
    eprintln!("nexthop sdf run (pcap): {s}");
    assert!(cached > upcalls, "OVS's caches answered most frames");
}

#[test]
fn the_router_runs_unchanged_on_the_nexthop_backend() {
    let dir = tempfile::tempdir().expect("temp dir");
    let routes = dir.path().join("routes");
    fs::write(&routes, table(host_mac(2))).expect("write routes");
    let mut ttl1 = udp_frame([198, 51, 100, 9], 3);
    ttl1[22] = 1;
    ttl1[24..26].fill(0);
    let ck = nexthop_wire::checksum::ipv4_header_checksum(&ttl1[14..34]);
    ttl1[24..26].copy_from_slice(&ck.to_be_bytes());
    let frames = vec![
        udp_frame([198, 51, 100, 3], 0),
        udp_frame([198, 51, 100, 200], 1),
        udp_frame([203, 0, 113, 1], 2),
        ttl1,
        udp_frame([198, 51, 100, 2], 4),
    ];
    let input = dir.path().join("in.pcap");
    fs::write(&input, pcapio::pcap_seq(&frames)).expect("write pcap");
    let out_dir = dir.path().join("out");
    let mut c = Command::new(NEXTHOP);
    c.args(["sdf", "run", "--app", "router"])
        .args(router_ifaces())
        .arg("--router-routes")
        .arg(&routes)
        .arg("--in-pcap")
        .arg(format!("1={}", input.display()))
        .arg("--out-dir")
        .arg(&out_dir)
        .arg("--json");
    let o = c.output().expect("run nexthop");
    assert!(o.status.success(), "{}", String::from_utf8_lossy(&o.stderr));
    // Routed with the next hop's MAC and TTL 63; no route and TTL 1:
    // dropped.
    let got = pcapio::frames_in(&fs::read(out_dir.join("port-2.pcap")).expect("port-2.pcap"));
    let want: Vec<Vec<u8>> = [0, 1, 4]
        .iter()
        .map(|&i| routed(&frames[i], host_mac(2)))
        .collect();
    assert_eq!(got, want);
    let s: serde_json::Value = serde_json::from_slice(&o.stdout).expect("summary JSON");
    assert_eq!(s["forwarded"], 3, "{s}");
    assert_eq!(s["dropped"], 2, "{s}");

    // Without an interface the router cannot start.
    let o = Command::new(NEXTHOP)
        .args(["sdf", "run", "--app", "router", "--in-pcap"])
        .arg(format!("1={}", input.display()))
        .arg("--out-dir")
        .arg(&out_dir)
        .output()
        .expect("run nexthop");
    assert!(!o.status.success());
    let err = String::from_utf8_lossy(&o.stderr);
    assert!(err.contains("--router-iface"), "{err}");
}
