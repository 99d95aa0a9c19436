//! Untrusted frames through the IP pipeline (and untrusted neighbour-file
//! text): no panic, every frame counted once, frames not forwarded left
//! unchanged, forwarded IPv4 frames with a correct header checksum.
//! Input: a neighbour file's text up to the first NUL (parsed, never
//! panics), then frames, each a length byte and that many bytes.
#![no_main]
use std::sync::OnceLock;

use libfuzzer_sys::fuzz_target;
use nexthop_dataplane::{IpConfig, IpDecision, IpPipeline, Neighbors};
use nexthop_lpm::parse::{parse_routes, NextHopMode};
use nexthop_lpm::persist::LpmTable;
use nexthop_wire::checksum::ipv4_header_checksum;

const ROUTES: &str = "198.51.100.0/24 1\n198.51.100.128/25 2\n203.0.113.0/24 3\n\
                      2001:db8::/32 1\n2001:db8:1::/48 2\n";
const NEIGHBORS: &str = "1 1 02:00:00:00:01:01 02:00:00:00:00:01\n\
                         2 2 02:00:00:00:02:01 02:00:00:00:00:02\n\
                         3 3 02:00:00:00:03:01 02:00:00:00:00:03\n";

fn setup() -> &'static (LpmTable, Neighbors) {
    static S: OnceLock<(LpmTable, Neighbors)> = OnceLock::new();
    S.get_or_init(|| {
        let routes = parse_routes(ROUTES.as_bytes(), NextHopMode::Raw).expect("routes");
        let table = LpmTable::build(&routes, 4).expect("table");
        (table, Neighbors::parse(NEIGHBORS, "nb").expect("neighbors"))
    })
}

fuzz_target!(|data: &[u8]| {
    let (text, mut rest) = match data.iter().position(|&b| b == 0) {
        Some(i) => (&data[..i], &data[i + 1..]),
        None => (data, &[][..]),
    };
    if let Ok(t) = std::str::from_utf8(text) {
        let _ = Neighbors::parse(t, "fuzz");
    }
    let mut frames: Vec<Vec<u8>> = Vec::new();
    while let Some((&len, tail)) = rest.split_first() {
        let n = usize::from(len).min(tail.len());
        frames.push(tail[..n].to_vec());
        rest = &tail[n..];
    }
    let (table, nb) = setup();
    let mut p = IpPipeline::new(table, nb, IpConfig::default()).expect("pipeline");
    let before = frames.clone();
    let mut d = Vec::new();
    p.process(0, &mut frames, &mut d);
    assert_eq!(d.len(), frames.len());
    assert!(p.counters().is_consistent());
    for ((f, old), d) in frames.iter().zip(&before).zip(&d) {
        match d {
            IpDecision::Forward(_) => {
                assert_eq!(f.len(), old.len());
                // IPv4 (untagged): the header checksum verifies.
                if f.get(12..14) == Some(&[0x08, 0x00]) {
                    let ihl = usize::from(f[14] & 0x0f) * 4;
                    let h = &f[14..14 + ihl];
                    assert_eq!(u16::from_be_bytes([h[10], h[11]]), ipv4_header_checksum(h));
                }
            }
            _ => assert_eq!(f, old),
        }
    }
});
