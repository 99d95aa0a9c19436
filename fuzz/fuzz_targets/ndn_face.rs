//! Untrusted face input into the forwarder core: a byte stream cut into
//! packets (LpPackets with fragments, commands, Interests, Data), each
//! received on a face chosen by the input, local or not. Never panics;
//! reassembly stays within its cap.
#![no_main]
use libfuzzer_sys::fuzz_target;
use nexthop_ndnd::{Core, NdndConfig};

fuzz_target!(|data: &[u8]| {
    let cfg = NdndConfig {
        reasm_max_partial: 8,
        reasm_timeout_ms: 50,
        ..NdndConfig::default()
    };
    let Ok(mut core) = Core::new(&cfg) else {
        return;
    };
    let mut out = Vec::new();
    let mut rest = data;
    let mut now = 0u64;
    // Each packet: one header byte (face in the low 3 bits, local in bit
    // 3, time step in the high 4 bits), a length byte pair, the bytes.
    while let [h, l0, l1, tail @ ..] = rest {
        let len = (usize::from(*l0) << 8 | usize::from(*l1)).min(tail.len());
        let (pkt, next) = tail.split_at(len);
        now += u64::from(h >> 4) * 10;
        out.clear();
        core.receive(u32::from(h & 7), h & 8 != 0, pkt, now, &mut out);
        core.tick(now);
        rest = next;
    }
});
