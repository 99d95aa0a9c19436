//! End-to-end tests of `nexthop forward`: FIBs made by `nexthop fib build`,
//! pcap files written and read back by hand (not with the crate the
//! forwarder uses), checked frame by frame.

mod fixture;

use std::collections::{BTreeMap, BTreeSet};
use std::fs;
use std::path::{Path, PathBuf};

use fixture::{nexthop, Fixture};
use nexthop_wire::MacAddr;

// ---------------------------------------------------------------------------
// pcap files, by hand

/// How a test pcap file is written.
#[derive(Clone, Copy)]
struct Format {
    big_endian: bool,
    nanos: bool,
    linktype: u32,
}

const CLASSIC: Format = Format {
    big_endian: false,
    nanos: false,
    linktype: 1,
};

impl Format {
    fn u32(&self, x: u32) -> [u8; 4] {
        if self.big_endian {
            x.to_be_bytes()
        } else {
            x.to_le_bytes()
        }
    }

    fn header(&self) -> Vec<u8> {
        let mut v = Vec::new();
        v.extend_from_slice(&self.u32(if self.nanos { 0xa1b2_3c4d } else { 0xa1b2_c3d4 }));
        let (maj, min) = if self.big_endian {
            (2u16.to_be_bytes(), 4u16.to_be_bytes())
        } else {
            (2u16.to_le_bytes(), 4u16.to_le_bytes())
        };
        v.extend_from_slice(&maj);
        v.extend_from_slice(&min);
        v.extend_from_slice(&self.u32(0));
        v.extend_from_slice(&self.u32(0));
        v.extend_from_slice(&self.u32(65535));
        v.extend_from_slice(&self.u32(self.linktype));
        v
    }

    /// Record `i` holding `data`: distinct timestamps, original length 4
    /// more than captured (as if a trailing FCS had not been captured).
    fn record(&self, i: usize, data: &[u8]) -> Vec<u8> {
        let mut v = Vec::new();
        v.extend_from_slice(&self.u32(1_700_000_000 + i as u32));
        v.extend_from_slice(&self.u32(if self.nanos { 123_456_789 } else { 123_456 }));
        v.extend_from_slice(&self.u32(data.len() as u32));
        v.extend_from_slice(&self.u32(data.len() as u32 + 4));
        v.extend_from_slice(data);
        v
    }
}

/// A pcap file: its header and raw records (record header + data).
struct Pcap {
    header: Vec<u8>,
    records: Vec<Vec<u8>>,
}

impl Pcap {
    fn new(fmt: Format, frames: &[Vec<u8>]) -> Pcap {
        Pcap {
            header: fmt.header(),
            records: frames
                .iter()
                .enumerate()
                .map(|(i, f)| fmt.record(i, f))
                .collect(),
        }
    }

    fn bytes(&self) -> Vec<u8> {
        let mut v = self.header.clone();
        for r in &self.records {
            v.extend_from_slice(r);
        }
        v
    }

    /// The file holding the header and the records `idx` picks, in order.
    fn with_records(&self, idx: &[usize]) -> Vec<u8> {
        let mut v = self.header.clone();
        for &i in idx {
            v.extend_from_slice(&self.records[i]);
        }
        v
    }

    /// Parse a file written by the forwarder (either byte order).
    fn parse(bytes: &[u8]) -> Pcap {
        assert!(bytes.len() >= 24, "pcap output shorter than a header");
        let big = bytes[..4] == [0xa1, 0xb2, 0xc3, 0xd4] || bytes[..4] == [0xa1, 0xb2, 0x3c, 0x4d];
        let rd = |b: &[u8]| {
            let a: [u8; 4] = b.try_into().unwrap();
            if big {
                u32::from_be_bytes(a)
            } else {
                u32::from_le_bytes(a)
            }
        };
        let mut records = Vec::new();
        let mut at = 24;
        while at < bytes.len() {
            let len = rd(&bytes[at + 8..at + 12]) as usize;
            records.push(bytes[at..at + 16 + len].to_vec());
            at += 16 + len;
        }
        Pcap {
            header: bytes[..24].to_vec(),
            records,
        }
    }
}

// ---------------------------------------------------------------------------
// frames

fn mac(s: &str) -> [u8; 6] {
    s.parse::<MacAddr>().expect("test MAC").octets()
}

/// A 64-byte frame to `dst` whose payload carries `seq` (frames differ).
fn frame(dst: &str, seq: u32) -> Vec<u8> {
    let mut f = mac(dst).to_vec();
    f.extend_from_slice(&[0x02, 0, 0, 0, 0, 0xfe, 0x88, 0xb5]);
    f.extend_from_slice(&seq.to_be_bytes());
    f.resize(64, (seq % 251) as u8);
    f
}

/// The same, with an 802.1Q tag (VLAN `vid`) before the ethertype.
fn tagged(dst: &str, seq: u32, vid: u16) -> Vec<u8> {
    let mut f = frame(dst, seq);
    f.splice(12..12, [0x81, 0x00, (vid >> 8) as u8, vid as u8]);
    f
}

// ---------------------------------------------------------------------------
// fixture

/// The forward command on files in the fixture.
impl Fixture {
    /// `nexthop fib build` of `routes` into `fib-KEYTYPE`, with alien
    /// detection (16 check bits).
    fn fib(&self, key_type: &str, routes: &[u8]) -> PathBuf {
        let r = self.file(&format!("routes-{key_type}.txt"), routes);
        let dir = self.path(&format!("fib-{key_type}"));
        nexthop()
            .args([
                "fib",
                "build",
                "--key-type",
                key_type,
                "--check-bits",
                "16",
                "--routes",
            ])
            .arg(&r)
            .arg("--out")
            .arg(&dir)
            .assert()
            .success();
        dir
    }

    fn forward(
        &self,
        fib: &Path,
        input: &Path,
        out: &str,
        extra: &[&str],
    ) -> assert_cmd::assert::Assert {
        nexthop()
            .args(["forward", "--fib"])
            .arg(fib)
            .arg("--in-pcap")
            .arg(input)
            .arg("--out-dir")
            .arg(self.path(out))
            .args(extra)
            .assert()
    }

    /// Forward with `--json`, expecting success; the parsed summary.
    fn forward_json(
        &self,
        fib: &Path,
        input: &Path,
        out: &str,
        extra: &[&str],
    ) -> serde_json::Value {
        let a = self
            .forward(fib, input, out, &[extra, &["--json"]].concat())
            .success();
        serde_json::from_slice(&a.get_output().stdout).unwrap()
    }

    /// Output file name → bytes.
    fn outputs(&self, out: &str) -> BTreeMap<String, Vec<u8>> {
        fs::read_dir(self.path(out))
            .unwrap()
            .map(|e| {
                let e = e.unwrap();
                (
                    e.file_name().into_string().unwrap(),
                    fs::read(e.path()).unwrap(),
                )
            })
            .collect()
    }
}

const MAC_ROUTES: &str = "\
02:00:00:00:00:01 1
02:00:00:00:00:02 2
02:00:00:00:00:03 1+3
02:00:00:00:00:04 drop
02:00:00:00:00:05 controller
02:00:00:00:00:06 2+3+4
";

/// Where each name of MAC_ROUTES goes: output files, or none.
fn mac_oracle(last: u8) -> &'static [&'static str] {
    match last {
        1 => &["port-1.pcap"],
        2 => &["port-2.pcap"],
        3 => &["port-1.pcap", "port-3.pcap"],
        4 => &[],
        5 => &["controller.pcap"],
        6 => &["port-2.pcap", "port-3.pcap", "port-4.pcap"],
        _ => unreachable!(),
    }
}

/// Check that every output file holds exactly the input records `want`
/// lists for it, byte for byte and in input order, and that no other file
/// was written.
fn assert_outputs(f: &Fixture, out: &str, input: &Pcap, want: &BTreeMap<&str, Vec<usize>>) {
    let got = f.outputs(out);
    let names: BTreeSet<&str> = got.keys().map(String::as_str).collect();
    let expected: BTreeSet<&str> = want
        .iter()
        .filter(|(_, v)| !v.is_empty())
        .map(|(k, _)| *k)
        .collect();
    assert_eq!(names, expected, "files in {out}");
    for (file, idx) in want.iter().filter(|(_, v)| !v.is_empty()) {
        let bytes = &got[*file];
        if *bytes != input.with_records(idx) {
            let parsed = Pcap::parse(bytes);
            let got_idx: Vec<Option<usize>> = parsed
                .records
                .iter()
                .map(|r| input.records.iter().position(|x| x == r))
                .collect();
            panic!("{out}/{file}: records {got_idx:?}, expected input records {idx:?}");
        }
    }
}

// ---------------------------------------------------------------------------
// tests

#[test]
fn each_known_name_reaches_exactly_the_ports_its_action_names() {
    let f = Fixture::new();
    let fib = f.fib("mac", MAC_ROUTES.as_bytes());
    // 150 frames over the six names, every seventh one VLAN-tagged.
    let lasts: Vec<u8> = (0..150u32).map(|i| (i * 7 % 6) as u8 + 1).collect();
    let frames: Vec<Vec<u8>> = lasts
        .iter()
        .enumerate()
        .map(|(i, &l)| {
            let dst = format!("02:00:00:00:00:{l:02x}");
            if i % 7 == 0 {
                tagged(&dst, i as u32, 100 + l as u16)
            } else {
                frame(&dst, i as u32)
            }
        })
        .collect();
    let input = Pcap::new(CLASSIC, &frames);
    let path = f.file("in.pcap", input.bytes());
    let s = f.forward_json(&fib, &path, "out", &[]);

    let mut want: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
    for (i, &l) in lasts.iter().enumerate() {
        for file in mac_oracle(l) {
            want.entry(file).or_default().push(i);
        }
    }
    assert_outputs(&f, "out", &input, &want);

    let count = |l: u8| lasts.iter().filter(|&&x| x == l).count() as u64;
    assert_eq!(s["frames_in"], 150);
    assert_eq!(s["forwarded"], count(1) + count(2) + count(3) + count(6));
    assert_eq!(s["dropped"], count(4));
    assert_eq!(s["punted"], count(5));
    assert_eq!(s["malformed"], 0);
    assert_eq!(s["misses"], 0);
    assert_eq!(s["hits"]["port_set"], count(3) + count(6));
    let out: Vec<(u64, u64)> = s["out"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| (p["port"].as_u64().unwrap(), p["frames"].as_u64().unwrap()))
        .collect();
    assert_eq!(
        out,
        [
            (1, count(1) + count(3)),
            (2, count(2) + count(6)),
            (3, count(3) + count(6)),
            (4, count(6)),
        ]
    );
    assert!(s["mpps"].as_f64().unwrap() > 0.0);
}

#[test]
fn one_line_summary_names_every_counter() {
    let f = Fixture::new();
    let fib = f.fib("mac", MAC_ROUTES.as_bytes());
    let frames = vec![
        frame("02:00:00:00:00:01", 0),
        frame("02:00:00:00:00:03", 1),
        frame("02:00:00:00:00:04", 2),
        frame("02:00:00:00:00:05", 3),
        frame("02:00:00:00:77:01", 4),
        vec![0x02; 9],
    ];
    let path = f.file("in.pcap", Pcap::new(CLASSIC, &frames).bytes());
    let a = f.forward(&fib, &path, "out", &[]).success();
    let line = String::from_utf8(a.get_output().stdout.clone()).unwrap();
    assert_eq!(line.lines().count(), 1, "{line}");
    let fields: BTreeMap<&str, &str> = line
        .split_whitespace()
        .map(|kv| kv.split_once('=').unwrap())
        .collect();
    assert_eq!(fields["frames_in"], "6");
    assert_eq!(fields["forwarded"], "2");
    assert_eq!(fields["out"], "1:2,3:1");
    assert_eq!(fields["dropped"], "3", "drop action, miss, runt");
    assert_eq!(fields["punted"], "1");
    assert_eq!(fields["malformed"], "1");
    assert_eq!(fields["misses"], "1");
    assert!(fields["mpps"].parse::<f64>().is_ok(), "{line}");
}

#[test]
fn unknown_names_follow_the_miss_policy() {
    let f = Fixture::new();
    let fib = f.fib("mac", MAC_ROUTES.as_bytes());
    let frames: Vec<Vec<u8>> = (0..40u32)
        .map(|i| match i % 4 {
            0 => frame("02:00:00:00:00:01", i),
            1 => frame("02:00:00:00:00:05", i),
            _ => frame(&format!("02:00:00:00:99:{:02x}", i), i),
        })
        .collect();
    let known1: Vec<usize> = (0..40).filter(|i| i % 4 == 0).collect();
    let punted: Vec<usize> = (0..40).filter(|i| i % 4 == 1).collect();
    let unknown: Vec<usize> = (0..40).filter(|i| i % 4 >= 2).collect();
    let input = Pcap::new(CLASSIC, &frames);
    let path = f.file("in.pcap", input.bytes());

    for policy in ["drop", "controller", "flood"] {
        let out = format!("out-{policy}");
        let s = f.forward_json(&fib, &path, &out, &["--miss", policy]);
        assert_eq!(s["misses"], unknown.len(), "{policy}");
        assert_eq!(s["miss"], policy);
        let mut want: BTreeMap<&str, Vec<usize>> = BTreeMap::new();
        want.insert("port-1.pcap", known1.clone());
        want.insert("controller.pcap", punted.clone());
        match policy {
            "drop" => assert_eq!(s["dropped"], unknown.len()),
            "controller" => {
                let mut all: Vec<usize> = punted.iter().chain(&unknown).copied().collect();
                all.sort();
                want.insert("controller.pcap", all);
            }
            _ => {
                // Flood: every port of the action table, 1 to 4.
                let mut p1: Vec<usize> = known1.iter().chain(&unknown).copied().collect();
                p1.sort();
                want.insert("port-1.pcap", p1);
                for p in ["port-2.pcap", "port-3.pcap", "port-4.pcap"] {
                    want.insert(p, unknown.clone());
                }
            }
        }
        assert_outputs(&f, &out, &input, &want);
    }
}

#[test]
fn runts_and_truncated_frames_are_counted_malformed_and_not_forwarded() {
    let f = Fixture::new();
    let fib = f.fib("mac", MAC_ROUTES.as_bytes());
    let good = |i| frame("02:00:00:00:00:01", i);
    let mut cut_tag = good(90)[..16].to_vec();
    cut_tag[12..14].copy_from_slice(&[0x81, 0x00]);
    let mut cut_qinq = tagged("02:00:00:00:00:01", 91, 5);
    cut_qinq[12..14].copy_from_slice(&[0x88, 0xa8]);
    cut_qinq[16..18].copy_from_slice(&[0x81, 0x00]);
    cut_qinq.truncate(20);
    let frames = vec![
        good(0),
        Vec::new(),
        good(1),
        good(2)[..13].to_vec(),
        cut_tag,
        good(3),
        cut_qinq,
        good(4)[..14].to_vec(), // a bare header is a frame: forwarded
    ];
    let input = Pcap::new(CLASSIC, &frames);
    let path = f.file("in.pcap", input.bytes());
    let s = f.forward_json(&fib, &path, "out", &["--miss", "flood"]);
    assert_eq!(s["frames_in"], 8);
    assert_eq!(s["malformed"], 4);
    assert_eq!(s["malformed_by_reason"]["runt"], 2);
    assert_eq!(s["malformed_by_reason"]["truncated"], 2);
    assert_eq!(s["dropped"], 4);
    assert_eq!(s["forwarded"], 4);
    assert_eq!(s["misses"], 0);
    let want = BTreeMap::from([("port-1.pcap", vec![0, 2, 5, 7])]);
    assert_outputs(&f, "out", &input, &want);
}

#[test]
fn custom_name_header_bytes_are_the_name_and_short_frames_are_malformed() {
    let f = Fixture::new();
    // A flat-name header after the Ethernet header: an 8-byte id, little
    // endian, as a u64 FIB hashes its names.
    let fib = f.fib("u64", b"1000 1\n2000 2+3\n0x0102030405060708 drop\n");
    let named = |id: u64, seq: u32| {
        let mut fr = frame("ff:ff:ff:ff:ff:ff", seq);
        fr[14..22].copy_from_slice(&id.to_le_bytes());
        fr
    };
    let frames = vec![
        named(1000, 0),
        named(2000, 1),
        named(0x0102_0304_0506_0708, 2),
        named(1000, 3)[..21].to_vec(), // one byte short of the name
        named(3000, 4),
        named(1000, 5),
    ];
    let input = Pcap::new(CLASSIC, &frames);
    let path = f.file("in.pcap", input.bytes());
    let s = f.forward_json(&fib, &path, "out", &["--name", "bytes:14:8"]);
    assert_eq!(s["name"], "bytes:14:8");
    assert_eq!(s["malformed_by_reason"]["short_for_name"], 1);
    assert_eq!(s["misses"], 1);
    let want = BTreeMap::from([
        ("port-1.pcap", vec![0, 5]),
        ("port-2.pcap", vec![1]),
        ("port-3.pcap", vec![1]),
    ]);
    assert_outputs(&f, "out", &input, &want);
}

#[test]
fn ipv4_destination_bytes_look_up_in_an_ipv4_fib() {
    let f = Fixture::new();
    let fib = f.fib("ipv4", b"192.0.2.1 5\n192.0.2.2 6\n");
    let ip = |dst: [u8; 4], seq: u32| {
        let mut fr = frame("02:00:00:00:00:01", seq);
        fr[12..14].copy_from_slice(&[0x08, 0x00]);
        fr[14..34].copy_from_slice(&[
            0x45, 0, 0, 50, 0, 0, 0, 0, 64, 17, 0, 0, 10, 0, 0, 1, 0, 0, 0, 0,
        ]);
        fr[30..34].copy_from_slice(&dst);
        fr
    };
    let frames = vec![
        ip([192, 0, 2, 2], 0),
        ip([192, 0, 2, 1], 1),
        ip([192, 0, 2, 2], 2),
    ];
    let input = Pcap::new(CLASSIC, &frames);
    let path = f.file("in.pcap", input.bytes());
    f.forward(&fib, &path, "out", &["--name", "bytes:30:4"])
        .success();
    let want = BTreeMap::from([("port-5.pcap", vec![1]), ("port-6.pcap", vec![0, 2])]);
    assert_outputs(&f, "out", &input, &want);
}

/// An IPv4/UDP frame with this 5-tuple.
fn udp_frame(src: [u8; 4], dst: [u8; 4], sport: u16, dport: u16, seq: u32) -> Vec<u8> {
    let mut fr = frame("02:00:00:00:00:01", seq)[..12].to_vec();
    fr.extend_from_slice(&[0x08, 0x00, 0x45, 0, 0, 32, 0, 0, 0, 0, 64, 17, 0, 0]);
    fr.extend_from_slice(&src);
    fr.extend_from_slice(&dst);
    fr.extend_from_slice(&sport.to_be_bytes());
    fr.extend_from_slice(&dport.to_be_bytes());
    fr.extend_from_slice(&[0, 12, 0, 0]);
    fr.extend_from_slice(&seq.to_be_bytes());
    fr.resize(60, 0);
    fr
}

#[test]
fn five_tuple_names_look_up_in_a_str_fib() {
    let f = Fixture::new();
    // A str FIB names are a routes-file token's bytes, so this flow is one
    // whose 13 bytes are printable: 65.66.67.68 -> 97.98.99.100, UDP
    // 0x3031 -> 0x3233, protocol 17 (a control byte, not whitespace).
    let mut routes = b"ABCDabcd0123\x11 4\n".to_vec();
    routes.extend_from_slice(b"ABCDabcd0124\x11 drop\n");
    let fib = f.fib("str", &routes);
    let frames = vec![
        udp_frame([65, 66, 67, 68], [97, 98, 99, 100], 0x3031, 0x3233, 0),
        udp_frame([65, 66, 67, 68], [97, 98, 99, 100], 0x3031, 0x3234, 1),
        udp_frame([65, 66, 67, 68], [97, 98, 99, 101], 0x3031, 0x3233, 2),
        frame("02:00:00:00:00:01", 3), // not IPv4: no 5-tuple
        udp_frame([65, 66, 67, 68], [97, 98, 99, 100], 0x3031, 0x3233, 4)[..40].to_vec(),
    ];
    let input = Pcap::new(CLASSIC, &frames);
    let path = f.file("in.pcap", input.bytes());
    let s = f.forward_json(
        &fib,
        &path,
        "out",
        &["--name", "5tuple", "--miss", "controller"],
    );
    assert_eq!(s["key_type"], "str");
    assert_eq!(s["hits"]["drop"], 1);
    assert_eq!(s["misses"], 1);
    assert_eq!(s["malformed_by_reason"]["no_name"], 1);
    assert_eq!(s["malformed_by_reason"]["truncated"], 1);
    let want = BTreeMap::from([("port-4.pcap", vec![0]), ("controller.pcap", vec![2])]);
    assert_outputs(&f, "out", &input, &want);
}

#[test]
fn name_length_that_does_not_fit_the_fib_key_type_is_refused() {
    let f = Fixture::new();
    let fib = f.fib("mac", MAC_ROUTES.as_bytes());
    let path = f.file(
        "in.pcap",
        Pcap::new(CLASSIC, &[frame("02:00:00:00:00:01", 0)]).bytes(),
    );
    for (name, len) in [("5tuple", "13"), ("bytes:14:8", "8")] {
        let a = f.forward(&fib, &path, "out", &["--name", name]).failure();
        let err = String::from_utf8_lossy(&a.get_output().stderr).into_owned();
        assert!(err.contains(&format!("gives {len}-byte names")), "{err}");
        assert!(err.contains("key type mac holds 6-byte names"), "{err}");
    }
    assert!(!f.path("out").exists(), "nothing written");
    let a = nexthop()
        .args(["forward", "--fib"])
        .arg(&fib)
        .arg("--in-pcap")
        .arg(&path)
        .args(["--out-dir", "x", "--name", "bytes:1"])
        .assert()
        .failure();
    let err = String::from_utf8_lossy(&a.get_output().stderr).into_owned();
    assert!(err.contains("OFFSET:LEN"), "{err}");
}

#[test]
fn truncated_last_record_is_reported_and_earlier_frames_forwarded() {
    let f = Fixture::new();
    let fib = f.fib("mac", MAC_ROUTES.as_bytes());
    let frames: Vec<Vec<u8>> = (0..5).map(|i| frame("02:00:00:00:00:01", i)).collect();
    let input = Pcap::new(CLASSIC, &frames);
    let mut bytes = input.bytes();
    bytes.truncate(bytes.len() - 10); // cut inside the fifth record's data
    let path = f.file("cut.pcap", &bytes);
    let a = f.forward(&fib, &path, "out", &["--json"]).success();
    let err = String::from_utf8_lossy(&a.get_output().stderr).into_owned();
    assert!(err.contains("cut.pcap: record 5"), "{err}");
    assert!(err.contains("truncated"), "{err}");
    assert!(err.contains("4 frames before it forwarded"), "{err}");
    let s: serde_json::Value = serde_json::from_slice(&a.get_output().stdout).unwrap();
    assert_eq!(s["frames_in"], 4);
    assert!(s["stopped_by"].as_str().unwrap().contains("truncated"));
    let want = BTreeMap::from([("port-1.pcap", vec![0, 1, 2, 3])]);
    assert_outputs(&f, "out", &input, &want);

    // A file cut inside a record header is reported the same way.
    let mut bytes = input.bytes();
    bytes.truncate(24 + 2 * (16 + 64) + 5);
    let path = f.file("cut2.pcap", &bytes);
    let a = f.forward(&fib, &path, "out2", &[]).success();
    let err = String::from_utf8_lossy(&a.get_output().stderr).into_owned();
    assert!(
        err.contains("record 3 (at byte offset 184) is truncated"),
        "{err}"
    );
    let want = BTreeMap::from([("port-1.pcap", vec![0, 1])]);
    assert_outputs(&f, "out2", &input, &want);
}

#[test]
fn non_pcap_input_is_a_clear_error_and_writes_nothing() {
    let f = Fixture::new();
    let fib = f.fib("mac", MAC_ROUTES.as_bytes());
    let raw_ip = Format {
        linktype: 101,
        ..CLASSIC
    };
    let cases: Vec<(&str, Vec<u8>, &str)> = vec![
        (
            "text.pcap",
            b"02:00:00:00:00:01 1\n".to_vec(),
            "not a pcap file",
        ),
        ("empty.pcap", Vec::new(), "empty file"),
        (
            "short.pcap",
            CLASSIC.header()[..12].to_vec(),
            "shorter than the 24-byte pcap file header",
        ),
        (
            "ng.pcapng",
            vec![
                0x0a, 0x0d, 0x0d, 0x0a, 0x1c, 0, 0, 0, 0x4d, 0x3c, 0x2b, 0x1a,
            ],
            "pcapng",
        ),
        (
            "rawip.pcap",
            Pcap::new(raw_ip, &[vec![0x45; 20]]).bytes(),
            "link type 101 is not Ethernet",
        ),
    ];
    for (name, bytes, want) in cases {
        let path = f.file(name, &bytes);
        let a = f.forward(&fib, &path, "out", &[]).failure();
        let err = String::from_utf8_lossy(&a.get_output().stderr).into_owned();
        assert!(err.starts_with("error: "), "{name}: {err}");
        assert!(err.contains(name), "{name}: the file is named: {err}");
        assert!(err.contains(want), "{name}: {err}");
        assert!(a.get_output().stdout.is_empty(), "{name}: no summary");
        assert!(!f.path("out").exists(), "{name}: nothing written");
    }
    let a = f
        .forward(&fib, &f.path("absent.pcap"), "out", &[])
        .failure();
    let err = String::from_utf8_lossy(&a.get_output().stderr).into_owned();
    assert!(err.contains("absent.pcap: cannot read"), "{err}");
}

#[test]
fn nanosecond_big_endian_capture_keeps_its_record_format() {
    let f = Fixture::new();
    let fib = f.fib("mac", MAC_ROUTES.as_bytes());
    let fmt = Format {
        big_endian: true,
        nanos: true,
        linktype: 1,
    };
    let frames: Vec<Vec<u8>> = (0..6u32)
        .map(|i| frame(&format!("02:00:00:00:00:{:02x}", i % 3 + 1), i))
        .collect();
    let input = Pcap::new(fmt, &frames);
    let path = f.file("ns.pcap", input.bytes());
    f.forward(&fib, &path, "out", &[]).success();
    let want = BTreeMap::from([
        ("port-1.pcap", vec![0, 2, 3, 5]),
        ("port-2.pcap", vec![1, 4]),
        ("port-3.pcap", vec![2, 5]),
    ]);
    assert_outputs(&f, "out", &input, &want);
}

#[test]
fn rerun_replaces_the_outputs_of_the_previous_run() {
    let f = Fixture::new();
    let fib = f.fib("mac", MAC_ROUTES.as_bytes());
    let a = Pcap::new(
        CLASSIC,
        &[frame("02:00:00:00:00:06", 0), frame("02:00:00:00:00:05", 1)],
    );
    let b = Pcap::new(CLASSIC, &[frame("02:00:00:00:00:01", 2)]);
    let pa = f.file("a.pcap", a.bytes());
    let pb = f.file("b.pcap", b.bytes());
    f.forward(&fib, &pa, "out", &[]).success();
    assert_eq!(f.outputs("out").len(), 4);
    f.file("out/notes.txt", b"kept");
    f.forward(&fib, &pb, "out", &[]).success();
    let got = f.outputs("out");
    assert_eq!(
        got.keys().map(String::as_str).collect::<Vec<_>>(),
        ["notes.txt", "port-1.pcap"]
    );
    assert_eq!(got["port-1.pcap"], b.with_records(&[0]));
}

#[test]
fn corrupt_record_length_fails_after_forwarding_the_frames_before_it() {
    let f = Fixture::new();
    let fib = f.fib("mac", MAC_ROUTES.as_bytes());
    let frames: Vec<Vec<u8>> = (0..3).map(|i| frame("02:00:00:00:00:02", i)).collect();
    let input = Pcap::new(CLASSIC, &frames);
    let mut bytes = input.bytes();
    // A fourth record claiming 300,000 captured bytes (snapshot length 65535).
    bytes.extend_from_slice(&CLASSIC.record(3, &vec![0u8; 300_000]));
    let path = f.file("corrupt.pcap", &bytes);
    let a = f.forward(&fib, &path, "out", &[]).failure();
    let err = String::from_utf8_lossy(&a.get_output().stderr).into_owned();
    assert!(
        err.contains("corrupt.pcap: record 4 (at byte offset 264) is corrupt"),
        "{err}"
    );
    assert!(err.contains("3 frames before it forwarded"), "{err}");
    let out = String::from_utf8_lossy(&a.get_output().stdout).into_owned();
    assert!(
        out.starts_with("frames_in=3 "),
        "summary still printed: {out}"
    );
    let want = BTreeMap::from([("port-2.pcap", vec![0, 1, 2])]);
    assert_outputs(&f, "out", &input, &want);
}
