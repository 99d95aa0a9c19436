//! Pcap files for the tests that run `nexthop` offline: classic
//! little-endian microsecond files written here, and the forwarder's output
//! files read back with the dataplane's own pcap reader.
// Each test binary uses a different subset.
#![allow(dead_code)]

use std::io::Cursor;
use std::path::Path;

use nexthop_dataplane::pcap::{PcapFrame, PcapIn};

/// A classic little-endian microsecond pcap file (Ethernet) of `frames`,
/// each with its time in microseconds.
pub fn pcap_usec(frames: &[(u64, Vec<u8>)]) -> Vec<u8> {
    let mut v = Vec::new();
    for x in [0xa1b2_c3d4u32, 0x0004_0002, 0, 0, 65535, 1] {
        v.extend_from_slice(&x.to_le_bytes());
    }
    for (t, f) in frames {
        let len = f.len() as u32;
        for x in [(t / 1_000_000) as u32, (t % 1_000_000) as u32, len, len] {
            v.extend_from_slice(&x.to_le_bytes());
        }
        v.extend_from_slice(f);
    }
    v
}

/// [`pcap_usec`] with frame `i` at second `i`.
pub fn pcap_seq(frames: &[Vec<u8>]) -> Vec<u8> {
    let timed: Vec<(u64, Vec<u8>)> = frames
        .iter()
        .enumerate()
        .map(|(i, f)| (i as u64 * 1_000_000, f.clone()))
        .collect();
    pcap_usec(&timed)
}

/// The frames of pcap file bytes (a bad file is a test failure).
pub fn frames_in(bytes: &[u8]) -> Vec<Vec<u8>> {
    let mut r = PcapIn::new(Cursor::new(bytes)).expect("a pcap file");
    let mut f = PcapFrame::default();
    let mut out = Vec::new();
    while r.read_frame(&mut f).expect("a whole pcap record") {
        out.push(std::mem::take(&mut f.data));
    }
    out
}

/// The frames of the pcap file at `path`; none when there is no file (the
/// forwarder writes a port's file only when it sends there).
pub fn frames_of(path: &Path) -> Vec<Vec<u8>> {
    std::fs::read(path)
        .map(|b| frames_in(&b))
        .unwrap_or_default()
}
