//! End-to-end tests of the IP pipeline of `nexthop forward` (`--lpm
//! TABLE --neighbors FILE`): tables from `nexthop lpm build`, pcap files
//! written and read back by hand, every output frame checked against the
//! binary-trie oracle of `nexthop-lpm` and a checksum recomputed from
//! scratch. Only documentation prefixes (192.0.2.0/24, 198.51.100.0/24,
//! 203.0.113.0/24, 2001:db8::/32).

mod fixture;

use std::collections::BTreeMap;
use std::fs;
use std::path::Path;

use fixture::{nexthop, stdout, Fixture};
use nexthop_dataplane::pcap::{PcapFrame, PcapIn, PcapOut};
use nexthop_lpm::parse::{parse_routes, NextHopMode};
use nexthop_lpm::BinaryTrie;
use nexthop_wire::checksum::ipv4_header_checksum;
use nexthop_wire::MacAddr;

/// Write a classic little-endian microsecond pcap file of `frames` to
/// `path` (record i at second i, original length 4 more than captured)
/// with the dataplane's pcap writer.
fn write_pcap(path: &Path, frames: &[Vec<u8>]) {
    let mut w = PcapOut::create(path, PcapOut::ethernet_header())
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    for (i, f) in frames.iter().enumerate() {
        w.write_frame(&PcapFrame {
            ts_sec: i as u32,
            ts_frac: 7,
            orig_len: f.len() as u32 + 4,
            data: f.clone(),
        })
        .unwrap();
    }
    w.finish().unwrap();
}

/// The records of a pcap file written by the forwarder, read with the
/// dataplane's pcap reader: `(ts_sec, ts_usec, orig_len, data)`.
fn records(path: &Path) -> Vec<(u32, u32, u32, Vec<u8>)> {
    let b = fs::read(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    // The output keeps the input's byte order (little-endian, microseconds).
    assert_eq!(&b[0..4], &0xa1b2_c3d4u32.to_le_bytes());
    let mut r = PcapIn::new(&b[..]).unwrap_or_else(|e| panic!("{}: {e}", path.display()));
    let mut f = PcapFrame::default();
    let mut out = Vec::new();
    while r
        .read_frame(&mut f)
        .unwrap_or_else(|e| panic!("{}: {e}", path.display()))
    {
        out.push((f.ts_sec, f.ts_frac, f.orig_len, f.data.clone()));
    }
    out
}

const ROUTER: [u8; 6] = [0x02, 0, 0x5e, 0, 0x53, 0xfe];
const HOST: [u8; 6] = [0x02, 0, 0x5e, 0, 0x53, 0x01];

fn eth(vlan: bool, ethertype: u16) -> Vec<u8> {
    let mut f = ROUTER.to_vec();
    f.extend_from_slice(&HOST);
    if vlan {
        f.extend_from_slice(&[0x81, 0x00, 0x00, 0x2a]);
    }
    f.extend_from_slice(&ethertype.to_be_bytes());
    f
}

/// IPv4/UDP to `dst` with TTL `ttl`, frame id `id` in the payload, a 4-byte
/// option when `options` (IHL 6).
fn v4(id: u32, dst: [u8; 4], ttl: u8, vlan: bool, options: bool) -> Vec<u8> {
    let mut f = eth(vlan, 0x0800);
    let ihl = if options { 6 } else { 5 };
    let mut h = vec![0u8; ihl * 4];
    h[0] = 0x40 | ihl as u8;
    h[2..4].copy_from_slice(&((ihl * 4 + 12) as u16).to_be_bytes());
    h[4..6].copy_from_slice(&(id as u16).to_be_bytes());
    h[8] = ttl;
    h[9] = 17;
    h[12..16].copy_from_slice(&[192, 0, 2, 1]);
    h[16..20].copy_from_slice(&dst);
    if options {
        h[20..24].copy_from_slice(&[1, 1, 1, 0]); // NOPs, end of options
    }
    let c = ipv4_header_checksum(&h);
    h[10..12].copy_from_slice(&c.to_be_bytes());
    f.extend_from_slice(&h);
    f.extend_from_slice(&[0xc0, 0x00, 0x00, 0x09, 0x00, 0x0c, 0, 0]);
    f.extend_from_slice(&id.to_be_bytes());
    f.resize(f.len().max(60), 0);
    f
}

fn v6(id: u32, dst: u128, hop_limit: u8, vlan: bool) -> Vec<u8> {
    let mut f = eth(vlan, 0x86dd);
    let mut h = [0u8; 40];
    h[0] = 0x60;
    h[4..6].copy_from_slice(&12u16.to_be_bytes());
    h[6] = 17;
    h[7] = hop_limit;
    h[8..24].copy_from_slice(
        &0x2001_0db8_u128
            .wrapping_shl(96)
            .wrapping_add(1)
            .to_be_bytes(),
    );
    h[24..40].copy_from_slice(&dst.to_be_bytes());
    f.extend_from_slice(&h);
    f.extend_from_slice(&[0xc0, 0x00, 0x00, 0x09, 0x00, 0x0c, 0, 0]);
    f.extend_from_slice(&id.to_be_bytes());
    f
}

/// Port and MACs of next hop `nh` in the neighbour file the tests write.
fn neighbor(nh: u32) -> (u16, [u8; 6], [u8; 6]) {
    let port = (nh % 3 + 1) as u16;
    (
        port,
        [0x02, 0xaa, 0, 0, (nh >> 8) as u8, nh as u8],
        [0x02, 0xbb, 0, 0, 0, port as u8],
    )
}

fn mac(m: [u8; 6]) -> String {
    MacAddr(m).to_string()
}

fn neighbors_file(next_hops: impl IntoIterator<Item = u32>) -> String {
    let mut s = String::from("# next-hop port dst-mac src-mac\n");
    for nh in next_hops {
        let (p, d, src) = neighbor(nh);
        s.push_str(&format!("{nh}\t{p}\t{}\t{}\n", mac(d), mac(src)));
    }
    s
}

/// A small deterministic generator (no dependency on the test's order).
struct Lcg(u64);

impl Lcg {
    fn next(&mut self) -> u64 {
        self.0 = self
            .0
            .wrapping_mul(6_364_136_223_846_793_005)
            .wrapping_add(1_442_695_040_888_963_407);
        self.0 >> 11
    }
    fn below(&mut self, n: u64) -> u64 {
        self.next() % n
    }
}

/// Routes inside the documentation prefixes, nested so that longest match
/// matters.
fn routes_text(r: &mut Lcg) -> String {
    let mut s = String::from("198.51.100.0/24 1\n203.0.113.0/24 2\n2001:db8::/32 3\n");
    // `lpm build` refuses a prefix given twice: keep the first of each.
    let mut seen = std::collections::HashSet::new();
    for _ in 0..120 {
        let base = [[192, 0, 2], [198, 51, 100], [203, 0, 113]][r.below(3) as usize];
        let len = 25 + r.below(8);
        let p = format!(
            "{}.{}.{}.{}/{len}",
            base[0],
            base[1],
            base[2],
            r.below(256) & !((1u64 << (32 - len)) - 1)
        );
        let nh = 1 + r.below(20);
        if seen.insert(p.clone()) {
            s.push_str(&format!("{p} {nh}\n"));
        }
    }
    for _ in 0..80 {
        let len = 33 + r.below(32);
        let a = (0x2001_0db8_u128 << 96) | (u128::from(r.next() as u32) << 64);
        let masked = a & !(u128::MAX >> len);
        let p = format!("{}/{len}", std::net::Ipv6Addr::from(masked));
        let nh = 1 + r.below(20);
        if seen.insert(p.clone()) {
            s.push_str(&format!("{p} {nh}\n"));
        }
    }
    s
}

#[test]
fn ip_pipeline_routes_like_the_trie_rewrites_and_counts_every_frame() {
    let fx = Fixture::new();
    let mut r = Lcg(2026);
    let routes = routes_text(&mut r);
    let routes_path = fx.file("routes.txt", &routes);
    let list = parse_routes(routes.as_bytes(), NextHopMode::Raw).unwrap();
    let (mut t4, mut t6) = (BinaryTrie::<u32>::new(), BinaryTrie::<u128>::new());
    for (p, nh) in &list.v4 {
        t4.insert(*p, *nh);
    }
    for (p, nh) in &list.v6 {
        t6.insert(*p, *nh);
    }
    let table = fx.path("t.lpm");
    nexthop()
        .args(["lpm", "build", "--routes"])
        .arg(&routes_path)
        .arg("--out")
        .arg(&table)
        .assert()
        .success();
    // Next hops 1..=20 (more than the table uses: extra entries are fine).
    let nb = fx.file("nb.txt", neighbors_file(1..=20));

    // Frames: routed, TTL edge cases, no route, malformed, VLAN-tagged.
    let mut frames = Vec::new();
    let mut want_ttl_expired = 0;
    let mut want_no_route = 0;
    let mut malformed: BTreeMap<&str, u64> = BTreeMap::new();
    for id in 0..3000u32 {
        let vlan = id % 5 == 0;
        let ttl = [0, 1, 2, 64, 255][r.below(5) as usize];
        let f = match r.below(10) {
            0..=4 => {
                let base =
                    [[192, 0, 2], [198, 51, 100], [203, 0, 113], [100, 64, 0]][r.below(4) as usize];
                let dst = [base[0], base[1], base[2], r.below(256) as u8];
                let f = v4(id, dst, ttl, vlan, id % 7 == 0);
                if ttl <= 1 {
                    want_ttl_expired += 1;
                } else if t4.lookup(u32::from_be_bytes(dst)).is_none() {
                    want_no_route += 1;
                }
                f
            }
            5..=8 => {
                let dst = if r.below(10) == 0 {
                    0x2001_0db9_u128 << 96
                } else {
                    (0x2001_0db8_u128 << 96)
                        | (u128::from(r.next() as u32) << 64)
                        | u128::from(r.next())
                };
                if ttl <= 1 {
                    want_ttl_expired += 1;
                } else if t6.lookup(dst).is_none() {
                    want_no_route += 1;
                }
                v6(id, dst, ttl, vlan)
            }
            _ => {
                let mut f = v4(id, [198, 51, 100, 9], 64, vlan, false);
                let l3 = if vlan { 18 } else { 14 };
                let reason = match r.below(5) {
                    0 => {
                        f[l3 + 12] ^= 0x80; // source address: checksum now wrong
                        "bad_checksum"
                    }
                    1 => {
                        f[l3 - 2..l3].copy_from_slice(&[0x08, 0x06]);
                        "not_ip"
                    }
                    2 => {
                        f.truncate(l3 + 10);
                        "truncated"
                    }
                    3 => {
                        f[l3] = 0x65;
                        "bad_header"
                    }
                    _ => {
                        f.truncate(13);
                        "runt"
                    }
                };
                *malformed.entry(reason).or_default() += 1;
                f
            }
        };
        frames.push(f);
    }
    let input = fx.path("in.pcap");
    write_pcap(&input, &frames);
    let out = fx.path("out");
    let a = nexthop()
        .args(["forward", "--json", "--lpm"])
        .arg(&table)
        .arg("--neighbors")
        .arg(&nb)
        .arg("--in-pcap")
        .arg(&input)
        .arg("--out-dir")
        .arg(&out)
        .assert()
        .success();
    let s: serde_json::Value = serde_json::from_str(&stdout(&a)).unwrap();
    assert_eq!(s["pipeline"], "ip");
    assert_eq!(s["frames_in"], 3000);
    assert_eq!(s["ttl_expired"], want_ttl_expired);
    assert_eq!(s["no_route"], want_no_route);
    let n_malformed: u64 = malformed.values().sum();
    assert_eq!(s["malformed"], n_malformed);
    for (k, n) in &malformed {
        assert_eq!(s["malformed_by_reason"][k], *n, "{k}");
    }
    let forwarded = 3000 - want_ttl_expired - want_no_route - n_malformed;
    assert_eq!(s["forwarded"], forwarded);
    assert_eq!(s["dropped"], want_ttl_expired + want_no_route + n_malformed);

    // Every output frame: on the right port, MACs rewritten, TTL - 1,
    // checksum right, everything else as sent.
    let mut seen = 0u64;
    for port in 1..=3u16 {
        let path = out.join(format!("port-{port}.pcap"));
        if !path.exists() {
            continue;
        }
        let recs = records(&path);
        assert_eq!(
            s["out"]
                .as_array()
                .unwrap()
                .iter()
                .find(|o| o["port"] == port)
                .map(|o| o["frames"].as_u64().unwrap()),
            Some(recs.len() as u64)
        );
        let mut last_id = None;
        for (sec, usec, orig, f) in recs {
            seen += 1;
            let id = u32::from_be_bytes(f[f.len() - 4..].try_into().unwrap_or_default());
            let id = if f[12..14] == [0x08, 0x00] || f[16..18] == [0x08, 0x00] {
                // IPv4 frames are padded to 60 bytes: the id sits right
                // after the UDP header.
                let l3 = if f[12..14] == [0x81, 0x00] { 18 } else { 14 };
                let ihl = usize::from(f[l3] & 0x0f) * 4;
                u32::from_be_bytes(f[l3 + ihl + 8..l3 + ihl + 12].try_into().unwrap())
            } else {
                id
            };
            assert!(last_id < Some(id), "input order kept");
            last_id = Some(id);
            let sent = &frames[id as usize];
            assert_eq!((sec, usec, orig), (id, 7, sent.len() as u32 + 4));
            assert_eq!(f.len(), sent.len());
            let l3 = if sent[12..14] == [0x81, 0x00] { 18 } else { 14 };
            let is_v4 = sent[l3 - 2..l3] == [0x08, 0x00];
            let nh = if is_v4 {
                t4.lookup(u32::from_be_bytes(
                    sent[l3 + 16..l3 + 20].try_into().unwrap(),
                ))
            } else {
                t6.lookup(u128::from_be_bytes(
                    sent[l3 + 24..l3 + 40].try_into().unwrap(),
                ))
            }
            .expect("a forwarded frame has a route");
            let (p, dmac, smac) = neighbor(nh);
            assert_eq!(p, port, "frame {id}: next hop {nh}");
            assert_eq!(f[0..6], dmac, "frame {id}");
            assert_eq!(f[6..12], smac, "frame {id}");
            let ttl_at = l3 + if is_v4 { 8 } else { 7 };
            assert_eq!(f[ttl_at], sent[ttl_at] - 1, "frame {id}");
            let mut changed = vec![ttl_at];
            if is_v4 {
                let ihl = usize::from(f[l3] & 0x0f) * 4;
                let h = &f[l3..l3 + ihl];
                assert_eq!(
                    u16::from_be_bytes([h[10], h[11]]),
                    ipv4_header_checksum(h),
                    "frame {id}"
                );
                changed.extend([l3 + 10, l3 + 11]);
            }
            for (j, (x, y)) in f.iter().zip(sent).enumerate().skip(12) {
                assert!(changed.contains(&j) || x == y, "frame {id} byte {j}");
            }
        }
    }
    assert_eq!(seen, forwarded);
    assert!(!out.join("controller.pcap").exists());
}

#[test]
fn gen_ip_routes_frames_are_all_forwarded_and_unknowns_have_no_route() {
    let fx = Fixture::new();
    let routes = fx.file(
        "routes.txt",
        "192.0.2.0/24 1\n198.51.100.0/25 2\n203.0.113.128/25 3\n2001:db8:1::/48 1\n",
    );
    let table = fx.path("t.lpm");
    nexthop()
        .args(["lpm", "build", "--routes"])
        .arg(&routes)
        .arg("--out")
        .arg(&table)
        .assert()
        .success();
    let nb = fx.file("nb.txt", neighbors_file(1..=3));
    let input = fx.path("in.pcap");
    nexthop()
        .args(["gen", "--frames", "5000", "--unknown", "10", "--ip-routes"])
        .arg(&routes)
        .arg("--out")
        .arg(&input)
        .assert()
        .success();
    let a = nexthop()
        .args(["forward", "--lpm"])
        .arg(&table)
        .arg("--neighbors")
        .arg(&nb)
        .arg("--in-pcap")
        .arg(&input)
        .arg("--out-dir")
        .arg(fx.path("out"))
        .assert()
        .success();
    let line = stdout(&a);
    let f: BTreeMap<&str, &str> = line
        .split_whitespace()
        .filter_map(|kv| kv.split_once('='))
        .collect();
    let no_route: u64 = f["no_route"].parse().unwrap();
    let forwarded: u64 = f["forwarded"].parse().unwrap();
    assert_eq!(f["frames_in"], "5000");
    assert_eq!(forwarded + no_route, 5000, "{line}");
    assert!((350..650).contains(&no_route), "{line}");
    assert_eq!(f["ttl_expired"], "0");
    assert_eq!(f["malformed"], "0");
}

#[test]
fn neighbour_files_that_do_not_fit_are_refused_with_file_line_reason() {
    let fx = Fixture::new();
    let routes = fx.file("routes.txt", "198.51.100.0/24 1\n2001:db8::/32 2\n");
    let table = fx.path("t.lpm");
    nexthop()
        .args(["lpm", "build", "--routes"])
        .arg(&routes)
        .arg("--out")
        .arg(&table)
        .assert()
        .success();
    let input = fx.path("in.pcap");
    write_pcap(&input, &[v4(0, [198, 51, 100, 1], 64, false, false)]);
    let run = |nb: &Path| {
        let a = nexthop()
            .args(["forward", "--lpm"])
            .arg(&table)
            .arg("--neighbors")
            .arg(nb)
            .arg("--in-pcap")
            .arg(&input)
            .arg("--out-dir")
            .arg(fx.path("out"))
            .assert()
            .failure();
        String::from_utf8_lossy(&a.get_output().stderr).to_string()
    };
    let bad = fx.file(
        "bad.txt",
        "1 1 02:00:00:00:00:01 02:00:00:00:00:02\n2 70000 02:00:00:00:00:01 02:00:00:00:00:02\n",
    );
    let e = run(&bad);
    assert!(
        e.contains(&format!("{}:2: port '70000'", bad.display())),
        "{e}"
    );
    let short = fx.file("short.txt", neighbors_file([1]));
    let e = run(&short);
    assert!(
        e.contains("1 next hop(s) of the LPM table have no neighbour entry: 2"),
        "{e}"
    );
    // The flat-name flags do not mix with the IP pipeline.
    nexthop()
        .args(["forward", "--lpm"])
        .arg(&table)
        .args(["--name", "5tuple", "--neighbors"])
        .arg(&short)
        .arg("--in-pcap")
        .arg(&input)
        .arg("--out-dir")
        .arg(fx.path("out"))
        .assert()
        .failure();
    nexthop()
        .args(["forward", "--lpm"])
        .arg(&table)
        .arg("--in-pcap")
        .arg(&input)
        .arg("--out-dir")
        .arg(fx.path("out"))
        .assert()
        .failure();
}
