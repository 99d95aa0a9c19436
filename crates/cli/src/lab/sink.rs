//! The sinks' ring reader, shared by every live lab: a receive ring on one
//! interface of a namespace, read block by block until told to stop.

use std::sync::atomic::{AtomicBool, AtomicUsize, Ordering};

use anyhow::Result;
use nexthop_dataplane::afpacket::{RingConfig, RxRing};
use nexthop_dataplane::netns;
use nexthop_dataplane::FrameBuf;

/// Enter namespace `ns` (this thread only), open a receive ring of
/// `block_count` blocks of 1 MiB on `iface`, add one to `ready` (so a
/// caller can start its traffic once every sink listens), and hand every
/// ring block's frames to `on_block`. Once `stop` is raised, reads on until a wait of
/// 20 ms finds nothing more (frames still on the way are counted), then
/// returns the frames the ring dropped.
pub(crate) fn read_sink(
    ns: &str,
    iface: &str,
    block_count: usize,
    stop: &AtomicBool,
    ready: &AtomicUsize,
    mut on_block: impl FnMut(&[&[u8]]),
) -> Result<u64> {
    netns::enter(ns)?;
    let cfg = RingConfig {
        block_size: 1 << 20,
        block_count,
        ..RingConfig::default()
    };
    let mut ring = RxRing::open(iface, &cfg)?;
    ready.fetch_add(1, Ordering::AcqRel);
    let mut buf = FrameBuf::default();
    loop {
        let stopping = stop.load(Ordering::Acquire);
        ring.wait(20)?;
        let mut any = false;
        while let Some(mut block) = ring.next_block() {
            any = true;
            let mut frames = buf.take();
            block.frames_into(&mut frames);
            on_block(&frames);
            buf.put(frames);
        }
        if stopping && !any {
            break;
        }
    }
    Ok(ring.drops()?)
}

/// Wait until `ready` counts `want` sinks (or 10 s pass: a sink that
/// failed to open returns its error when joined).
pub(crate) fn wait_ready(ready: &AtomicUsize, want: usize) {
    let end = std::time::Instant::now() + std::time::Duration::from_secs(10);
    while ready.load(Ordering::Acquire) < want && std::time::Instant::now() < end {
        std::thread::sleep(std::time::Duration::from_millis(5));
    }
}
