//! Traffic source for forwarding-rate measurements on veth: sends 60-byte
//! frames (destination MAC `02:6e:68:00:00:NN`, NN cycling over 256
//! names) on one interface with batched `sendmmsg` as fast as it can for
//! a number of seconds, then prints `sent=N failed=N seconds=S mpps=R`.
//!
//! ```sh
//! ip netns exec SRC target/release/examples/veth_blast src0 5
//! ```
//! Used for the figures of `docs/benchmarks.md`, "AF_XDP and AF_PACKET on veth".

#[cfg(target_os = "linux")]
fn main() {
    use nexthop_dataplane::afpacket::TxPort;
    use std::time::{Duration, Instant};

    let args: Vec<String> = std::env::args().collect();
    let (Some(iface), Some(secs)) = (args.get(1), args.get(2)) else {
        eprintln!("usage: veth_blast IFACE SECONDS");
        std::process::exit(2);
    };
    let secs: f64 = match secs.parse() {
        Ok(s) if s > 0.0 && s < 1e6 => s,
        _ => {
            eprintln!("veth_blast: SECONDS must be a positive number, got {secs}");
            std::process::exit(2);
        }
    };
    let mut tx = match TxPort::open(iface) {
        Ok(t) => t,
        Err(e) => {
            eprintln!("veth_blast: {e}");
            std::process::exit(1);
        }
    };
    let frames: Vec<Vec<u8>> = (0..256u32)
        .map(|i| {
            let mut f = vec![0x02, 0x6e, 0x68, 0, 0, i as u8];
            f.extend_from_slice(&[0x02, 0x6e, 0x68, 0xff, 0xff, 0xfe, 0x88, 0xb5]);
            f.resize(60, i as u8);
            f
        })
        .collect();
    let (mut sent, mut failed) = (0u64, 0u64);
    let start = Instant::now();
    let end = start + Duration::from_secs_f64(secs);
    while Instant::now() < end {
        let o = tx.send_batch(&frames);
        sent += o.sent as u64;
        failed += o.failed as u64;
    }
    let s = start.elapsed().as_secs_f64();
    println!(
        "sent={sent} failed={failed} seconds={s:.3} mpps={:.3}",
        sent as f64 / s / 1e6
    );
}

#[cfg(not(target_os = "linux"))]
fn main() {
    eprintln!("veth_blast needs Linux (AF_PACKET)");
    std::process::exit(1);
}
