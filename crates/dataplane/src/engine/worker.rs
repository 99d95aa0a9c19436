//! One worker's loop ([`run_worker`]).

use std::io;
use std::time::{Duration, Instant};

use super::stage::{Outputs, Stage};
use super::{GROUP, POLL_MS};
use crate::afpacket::poll_fds;
use crate::framebuf::{FrameBuf, FrameLists};
use crate::live::{LivePorts, LiveRun, PortStats, Progress, StopAfter, StopFlag, StopReason};

/// One worker's run-to-completion loop, on the calling thread: forward
/// frames from the inputs of `ports` to their outputs through `pipeline`
/// until `stop` is raised or `after` is met; call `progress` every
/// `report_every` (if given).
///
/// One pass takes a ready batch from each input in turn (a ring block,
/// up to `afxdp::RX_BATCH` AF_XDP frames, up to
/// [`MEMORY_BATCH`](crate::live::MEMORY_BATCH) queued frames), runs it
/// through [`Stage::forward_group`] in groups of [`GROUP`], and gives the
/// batch back. When no input has frames the loop `poll()`s every input
/// with a descriptor for at most [`POLL_MS`] (1 ms when an input is in
/// memory), so stop conditions and reports stay on time.
///
/// `refresh` may change the pipeline (swap its table); it runs before
/// every group and once per idle round, so every frame of a group is
/// decided with the table the group started with. It is on the
/// forwarding thread: it must be cheap when nothing changed (one atomic
/// load and a pointer compare, say).
///
/// Frames for an output port that has no transmit socket are counted as
/// refused on that port. Punted frames (controller actions, misses under
/// the controller policy) are counted by the pipeline and not sent.
///
/// # Errors
/// `poll()` failed.
pub fn run_worker<P: Stage>(
    pipeline: &mut P,
    ports: &mut LivePorts,
    after: StopAfter,
    stop: &StopFlag,
    report_every: Option<Duration>,
    mut progress: impl FnMut(&Progress<'_>),
    mut refresh: impl FnMut(&mut P),
) -> io::Result<LiveRun> {
    let before = pipeline.take_counters();
    let nout = ports.outputs.len();
    let mut stats = PortStats::default();
    let mut tx_failed = vec![0u64; nout];
    let fds: Vec<_> = ports
        .inputs
        .iter()
        .filter_map(|(_, r)| r.raw_fd())
        .collect();
    let idle_ms = if fds.len() < ports.inputs.len() {
        1
    } else {
        POLL_MS
    };
    let mut scratch = P::Scratch::default();
    // The frame lists of a block borrow the block, so they cannot live
    // across blocks; their allocations do (no allocation per block once
    // the largest block has been seen).
    let mut all_buf = FrameBuf::with_capacity(GROUP);
    let mut lists_buf = FrameLists::default();
    let start = Instant::now();
    let mut first_frame: Option<Instant> = None;
    let mut last_frame = start;
    let mut next_report = report_every.map(|d| start + d);
    let mut last_report = (start, 0u64);

    let stopped_by = loop {
        if stop.is_raised() {
            break StopReason::Signal;
        }
        if after
            .frames
            .is_some_and(|n| pipeline.counters().frames_in >= n)
        {
            break StopReason::Frames;
        }
        let now = Instant::now();
        if after.duration.is_some_and(|d| now - start >= d) {
            break StopReason::Duration;
        }
        if let (Some(at), Some(every)) = (next_report, report_every) {
            if now >= at {
                port_stats(ports, &tx_failed, &mut stats);
                let c = pipeline.counters();
                progress(&Progress {
                    elapsed: now - start,
                    counters: c,
                    ports: &stats,
                    interval_frames: c.frames_in - last_report.1,
                    interval: now - last_report.0,
                });
                last_report = (now, c.frames_in);
                next_report = Some(at + every);
            }
        }

        let mut any = false;
        for (in_port, rx) in ports.inputs.iter_mut() {
            let Some(mut block) = rx.next() else {
                continue;
            };
            any = true;
            let mut all = all_buf.take();
            all.reserve(block.len_hint());
            block.frames_into(&mut all);
            if !all.is_empty() && first_frame.is_none() {
                first_frame = Some(Instant::now());
            }
            let mut per_port = lists_buf.take(nout);
            for group in all.chunks(GROUP) {
                refresh(pipeline);
                let mut out = Outputs {
                    outputs: &mut ports.outputs,
                    tx_failed: &mut tx_failed,
                };
                pipeline.forward_group(&mut scratch, *in_port, group, &mut per_port, &mut out);
            }
            // Emptied and kept: nothing borrows the block after this.
            lists_buf.put(per_port);
            all_buf.put(all);
            drop(block);
            last_frame = Instant::now();
        }
        if !any {
            refresh(pipeline);
            let mut out = Outputs {
                outputs: &mut ports.outputs,
                tx_failed: &mut tx_failed,
            };
            pipeline.idle(&mut scratch, nout, &mut out);
            let mut wait = idle_ms;
            if let Some(d) = after.duration {
                let left = d.saturating_sub(start.elapsed()).as_millis();
                wait = wait.min(i32::try_from(left).unwrap_or(idle_ms)).max(1);
            }
            poll_fds(&fds, wait)?;
        }
    };

    let elapsed = start.elapsed();
    port_stats(ports, &tx_failed, &mut stats);
    let counters = pipeline.take_counters();
    let mut carried = before;
    carried.merge(&counters);
    pipeline.set_counters(carried);
    Ok(LiveRun {
        counters,
        ports: stats,
        stopped_by,
        elapsed,
        active: first_frame.map_or(Duration::ZERO, |t| last_frame.saturating_duration_since(t)),
    })
}

fn port_stats(ports: &mut LivePorts, tx_failed: &[u64], stats: &mut PortStats) {
    stats.tx_failed = tx_failed
        .iter()
        .enumerate()
        .filter(|(_, &n)| n > 0)
        .map(|(p, &n)| (p as u16, n))
        .collect();
    stats.ring_drops.clear();
    stats.rx_truncated.clear();
    for (port, rx) in ports.inputs.iter_mut() {
        let drops = rx.drops();
        if drops > 0 {
            stats.ring_drops.push((*port, drops));
        }
        if rx.truncated() > 0 {
            stats.rx_truncated.push((*port, rx.truncated()));
        }
    }
}
