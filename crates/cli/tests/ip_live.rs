//! End to end: `nexthop run --lpm TABLE --neighbors FILE` routing IPv4 and
//! IPv6 frames between veth pairs in network namespaces (the topology of
//! `tests/live.rs`: a source namespace, the forwarder, three sink ports).
//! Every routed frame must arrive exactly once, on its next hop's port,
//! rewritten exactly as the test rewrites it by hand (MACs, TTL − 1,
//! checksum recomputed from scratch); TTL-expired, unrouted and malformed
//! frames arrive nowhere and are counted. Namespaces are always removed
//! (the `Lab` guard); without root or `ip` the test says why and passes.
//! Only documentation prefixes.

mod common;

use std::collections::BTreeMap;
use std::fs;
use std::io::Write;
use std::time::Duration;

use common::*;
use nexthop_wire::checksum::ipv4_header_checksum;

/// Not a test of its own: the send and capture helper (see
/// `tests/live.rs`).
#[test]
#[ignore = "helper process of the namespace tests"]
fn live_helper() {
    if let Some((mode, _)) = helper_main() {
        panic!("unknown helper mode {mode}");
    }
}

const ROUTES: &str = "\
198.51.100.0/24 1
198.51.100.128/25 2
203.0.113.0/24 3
192.0.2.0/25 2
2001:db8::/32 3
2001:db8:1::/48 1
";

/// Next hop → port (the sinks' names are s1..s3), neighbour MAC.
fn neighbor(nh: u32) -> (u16, [u8; 6]) {
    (nh as u16, [0x02, 0x6e, 0x68, 0xaa, 0x00, nh as u8])
}

fn mac(m: [u8; 6]) -> String {
    mac_text(&m)
}

/// What the forwarder should do with a frame.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
enum Want {
    /// Out of this port with this next hop.
    Routed(u32),
    NoRoute,
    TtlExpired,
    BadChecksum,
}

/// Frame `seq`: IPv4 or IPv6 UDP from `SRC_MAC`, with the sequence number
/// in the payload, and what should happen to it.
fn frame(seq: u32) -> (Vec<u8>, Want) {
    let r = seq.wrapping_mul(2_654_435_761).rotate_left(5);
    let ttl = match r % 16 {
        0 => 1,
        1 => 0,
        2 => 2,
        _ => 64,
    };
    let mut f = vec![0x02, 0x6e, 0x68, 0x00, 0x00, 0xfe];
    f.extend_from_slice(&SRC_MAC);
    let (nh, family_v4) = match (r >> 8) % 7 {
        0 => ((Some(1), [198, 51, 100, 10]), true),
        1 => ((Some(2), [198, 51, 100, 200]), true),
        2 => ((Some(3), [203, 0, 113, 7]), true),
        3 => ((Some(2), [192, 0, 2, 5]), true),
        4 => ((None, [192, 0, 2, 130]), true),
        _ => ((None, [0; 4]), false),
    };
    let mut want = Want::NoRoute;
    if family_v4 {
        let (nh, dst) = nh;
        f.extend_from_slice(&[0x08, 0x00]);
        let mut h = [0u8; 20];
        h[0] = 0x45;
        h[2..4].copy_from_slice(&36u16.to_be_bytes());
        h[4..6].copy_from_slice(&(seq as u16).to_be_bytes());
        h[8] = ttl;
        h[9] = 17;
        h[12..16].copy_from_slice(&[192, 0, 2, 1]);
        h[16..20].copy_from_slice(&dst);
        let c = ipv4_header_checksum(&h);
        h[10..12].copy_from_slice(&c.to_be_bytes());
        if (r >> 12).is_multiple_of(40) {
            h[11] ^= 0x10;
            want = Want::BadChecksum;
        }
        f.extend_from_slice(&h);
        if want != Want::BadChecksum {
            want = match (ttl, nh) {
                (0 | 1, _) => Want::TtlExpired,
                (_, Some(nh)) => Want::Routed(nh),
                (_, None) => Want::NoRoute,
            };
        }
    } else {
        f.extend_from_slice(&[0x86, 0xdd]);
        let (nh, dst) = if (r >> 12).is_multiple_of(2) {
            (3, 0x2001_0db8_0002_u128 << 80 | u128::from(seq))
        } else {
            (1, 0x2001_0db8_0001_u128 << 80 | u128::from(seq))
        };
        let mut h = [0u8; 40];
        h[0] = 0x60;
        h[4..6].copy_from_slice(&16u16.to_be_bytes());
        h[6] = 17;
        h[7] = ttl;
        h[8..24].copy_from_slice(&(0x2001_0db8_u128 << 96 | 1).to_be_bytes());
        h[24..40].copy_from_slice(&dst.to_be_bytes());
        f.extend_from_slice(&h);
        want = if ttl <= 1 {
            Want::TtlExpired
        } else {
            Want::Routed(nh)
        };
    }
    f.extend_from_slice(&[0xc0, 0x00, 0x00, 0x09, 0x00, 0x10, 0x00, 0x00]);
    f.extend_from_slice(MAGIC);
    f.extend_from_slice(&seq.to_be_bytes());
    f.resize(f.len().max(60), 0);
    (f, want)
}

/// The frame as the forwarder must send it to next hop `nh`, rewritten by
/// hand.
fn rewritten(f: &[u8], nh: u32) -> Vec<u8> {
    let mut g = f.to_vec();
    g[0..6].copy_from_slice(&neighbor(nh).1);
    g[6..12].copy_from_slice(&SRC_MAC);
    if g[12..14] == [0x08, 0x00] {
        g[14 + 8] -= 1;
        g[24..26].copy_from_slice(&[0, 0]);
        let c = ipv4_header_checksum(&g[14..34]);
        g[24..26].copy_from_slice(&c.to_be_bytes());
    } else {
        g[14 + 7] -= 1;
    }
    g
}

#[test]
fn run_lpm_routes_rewrites_and_drops_over_veth() {
    let Some(io) = route_and_check("ip", &["--io", "afpacket"]) else {
        return;
    };
    assert_eq!(io, "0:afpacket,1:afpacket,2:afpacket,3:afpacket");
}

/// The same frames and checks over AF_XDP ports (native mode on veth):
/// the IP stage copies each frame out of the UMEM, rewrites and sends the
/// copy.
#[cfg(feature = "afxdp")]
#[test]
fn run_lpm_routes_rewrites_and_drops_over_afxdp() {
    let Some(io) = route_and_check("ipx", &["--io", "afxdp"]) else {
        return;
    };
    assert_eq!(io, "0:afxdp-native,1:afxdp-tx,2:afxdp-tx,3:afxdp-tx");
}

/// Run the topology with `nexthop run --lpm ... EXTRA`, check every frame
/// and the summary; the summary's `io` field, or `None` where namespaces
/// cannot be made.
fn route_and_check(test: &str, extra: &[&str]) -> Option<String> {
    const TOTAL: u32 = 2000;
    let mut lab = lab_or_skip(test, &["src", "fwd", "snk"])?;
    lab.veth("src", "src0", "fwd", "fin0");
    for p in 1..=3 {
        lab.veth("fwd", &format!("fo{p}"), "snk", &format!("s{p}"));
    }
    let frames: Vec<(Vec<u8>, Want)> = (0..TOTAL).map(frame).collect();
    let mut file = fs::File::create(lab.file("frames.txt")).expect("create frames.txt");
    for (f, _) in &frames {
        writeln!(file, "{}", hex(f)).expect("write frames.txt");
    }
    drop(file);
    fs::write(lab.file("routes.txt"), ROUTES).expect("routes");
    // Every port's source MAC is SRC_MAC: the capture keeps only frames
    // from it.
    let nb: String = (1..=3)
        .map(|nh| {
            let (p, m) = neighbor(nh);
            format!("{nh} {p} {} {}\n", mac(m), mac(SRC_MAC))
        })
        .collect();
    fs::write(lab.file("nb.txt"), nb).expect("neighbors");
    let table = lab.file("t.lpm");
    let built = std::process::Command::new(NEXTHOP)
        .args(["lpm", "build", "--routes"])
        .arg(lab.file("routes.txt"))
        .arg("--out")
        .arg(&table)
        .output()
        .expect("nexthop lpm build");
    assert!(built.status.success(), "{built:?}");

    let me = std::env::current_exe().expect("current exe");
    let env = helper_env(&lab, "capture", "s1,s2,s3");
    let capture = lab.spawn("snk", "capture", &me, &HELPER_ARGS, &env);
    lab.wait_for("capture.ready", "ready", Duration::from_secs(10));
    let (t, n) = (
        table.display().to_string(),
        lab.file("nb.txt").display().to_string(),
    );
    let total = TOTAL.to_string();
    let fwd = start_run(
        &mut lab,
        &[
            "run",
            "--lpm",
            &t,
            "--neighbors",
            &n,
            "--packets",
            &total,
            "--duration",
            "15",
        ]
        .into_iter()
        .chain(extra.iter().copied())
        .collect::<Vec<_>>(),
    );
    let env = helper_env(&lab, "send", "src0");
    let send = lab.spawn("src", "send", &me, &HELPER_ARGS, &env);
    let (ok, out, err) = lab.wait(send, "send", Duration::from_secs(15));
    assert!(ok, "sender failed:\n{out}\n{err}");
    let (ok, out, err) = lab.wait(fwd, "fwd", Duration::from_secs(16));
    assert!(ok, "nexthop run failed:\n{out}\n{err}");
    std::thread::sleep(Duration::from_millis(100));
    fs::write(lab.file("capture.stop"), "stop\n").expect("write stop");
    let (ok, cout, cerr) = lab.wait(capture, "capture", Duration::from_secs(10));
    assert!(ok, "capture failed:\n{cout}\n{cerr}");

    let line = out
        .lines()
        .find(|l| l.starts_with("frames_in="))
        .unwrap_or_default();
    eprintln!("nexthop run stdout: {line}");
    let s = fields(line);
    let count = |w: &dyn Fn(&Want) -> bool| frames.iter().filter(|(_, k)| w(k)).count();
    let ttl = count(&|w| *w == Want::TtlExpired);
    let no_route = count(&|w| *w == Want::NoRoute);
    let bad = count(&|w| *w == Want::BadChecksum);
    assert!(ttl > 0 && no_route > 0 && bad > 0);
    let mut want_out: BTreeMap<u16, usize> = BTreeMap::new();
    for (_, w) in &frames {
        if let Want::Routed(nh) = w {
            *want_out.entry(neighbor(*nh).0).or_default() += 1;
        }
    }
    let out_list: Vec<String> = want_out.iter().map(|(p, n)| format!("{p}:{n}")).collect();
    assert_eq!(field(&s, "frames_in"), total, "{line}");
    assert_eq!(field(&s, "out"), out_list.join(","), "{line}");
    assert_eq!(field(&s, "misses"), no_route.to_string(), "{line}");
    assert_eq!(
        field(&s, "drops"),
        format!("miss:{no_route},ttl_expired:{ttl},bad_checksum:{bad}"),
        "{line}"
    );
    for k in ["tx_failed", "ring_drops", "rx_truncated"] {
        assert_eq!(field(&s, k), "0", "{line}");
    }

    // Per frame, at the sinks: the exact rewritten bytes, once, on the
    // next hop's port only.
    let capture_text = lab.read("capture.txt");
    assert!(capture_text.contains("# ring_drops 0"), "capture dropped");
    let expected: BTreeMap<Vec<u8>, (usize, u16)> = frames
        .iter()
        .enumerate()
        .filter_map(|(i, (f, w))| match w {
            Want::Routed(nh) => Some((rewritten(f, *nh), (i, neighbor(*nh).0))),
            _ => None,
        })
        .collect();
    let mut seen = vec![0usize; frames.len()];
    for l in capture_text.lines().filter(|l| !l.starts_with('#')) {
        let (iface, h) = l.split_once(' ').expect("capture line");
        let port: u16 = iface
            .strip_prefix('s')
            .and_then(|p| p.parse().ok())
            .expect("sink");
        let bytes = unhex(h).expect("hex");
        let Some(&(i, want_port)) = expected.get(&bytes) else {
            panic!("{iface} got a frame that is no expected rewrite: {h}");
        };
        assert_eq!(port, want_port, "frame {i}");
        seen[i] += 1;
    }
    for (i, (_, w)) in frames.iter().enumerate() {
        let want = usize::from(matches!(w, Want::Routed(_)));
        assert_eq!(seen[i], want, "frame {i} ({w:?})");
    }
    Some(field(&s, "io").to_string())
}
