//! The offline driver: frames from pcap files (one file per input port,
//! merged in timestamp order) through an [`SdfStage`], one pcap file per
//! output port.

use std::io::Read;
use std::time::{Duration, Instant};

use pcap_file::TsResolution;

use super::{SdfCounters, SdfStage, Sink, Stamp};
use crate::counters::Counters;
use crate::pcap::{OutputFile, PcapFrame, PcapIn, PcapInError, PcapOutError, PcapPorts};
use nexthop_sdf::BATCH;

/// One input: a pcap file whose frames arrive on `port`.
#[derive(Debug)]
pub struct PcapInput<R: Read> {
    /// The input port.
    pub port: u16,
    /// The file.
    pub input: PcapIn<R>,
}

/// What [`forward_pcap_sdf`] did.
#[derive(Debug)]
pub struct SdfPcapRun {
    /// The stage's frame counters for this run.
    pub counters: Counters,
    /// The stage's SDF counters for this run.
    pub sdf: SdfCounters,
    /// Each slice's SDF counters for this run.
    pub slices: Vec<SdfCounters>,
    /// Wall time of the run (reading, deciding, waiting for the app,
    /// writing).
    pub elapsed: Duration,
    /// Record errors that ended an input early, by input port.
    pub stopped_by: Vec<(u16, PcapInError)>,
    /// Flows still unanswered when the flush timed out (their frames are
    /// counted as app timeouts).
    pub unanswered: usize,
    /// The files written.
    pub outputs: Vec<OutputFile>,
}

struct PcapSink<'a> {
    out: &'a mut PcapPorts,
    frame: PcapFrame,
    error: Option<PcapOutError>,
}

impl Sink for PcapSink<'_> {
    fn emit(&mut self, ports: &[u16], controller: bool, frame: &[u8], stamp: Stamp) {
        if self.error.is_some() {
            return;
        }
        self.frame.ts_sec = stamp.ts_sec;
        self.frame.ts_frac = stamp.ts_frac;
        self.frame.orig_len = stamp.orig_len.max(frame.len() as u32);
        self.frame.data.clear();
        self.frame.data.extend_from_slice(frame);
        for &p in ports {
            if let Err(e) = self.out.emit(p, &self.frame) {
                self.error = Some(e);
                return;
            }
        }
        if controller {
            if let Err(e) = self.out.punt(&self.frame) {
                self.error = Some(e);
            }
        }
    }
}

fn nanos(f: &PcapFrame, res: TsResolution) -> u128 {
    let frac = match res {
        TsResolution::MicroSecond => u128::from(f.ts_frac) * 1000,
        TsResolution::NanoSecond => u128::from(f.ts_frac),
    };
    u128::from(f.ts_sec) * 1_000_000_000 + frac
}

/// Forward every frame of `inputs` through `stage`, merged by timestamp
/// (ties: the earlier input), in groups of up to [`BATCH`] consecutive
/// frames of one input port; write what is sent to `out`.
///
/// Each group's decisions are waited for (at most `flush_timeout`) before
/// the next group is read, so an offline run is deterministic: the same
/// files give the same outputs whatever the timing of the app's thread.
/// Misses of one flow within a group still wait for one decision.
///
/// # Errors
/// Only output errors; input record errors end that input and are
/// reported in [`SdfPcapRun::stopped_by`].
pub fn forward_pcap_sdf<R: Read>(
    stage: &mut SdfStage,
    inputs: &mut [PcapInput<R>],
    mut out: PcapPorts,
    flush_timeout: Duration,
) -> Result<SdfPcapRun, PcapOutError> {
    let start = Instant::now();
    let before = stage.take_counters();
    let sdf_before = *stage.sdf_counters();
    let slices_before = stage.slice_counters().to_vec();
    let mut heads: Vec<Option<PcapFrame>> = Vec::with_capacity(inputs.len());
    let mut stopped_by = Vec::new();
    let read = |i: usize, inputs: &mut [PcapInput<R>], stopped: &mut Vec<(u16, PcapInError)>| {
        let mut f = PcapFrame::default();
        match inputs[i].input.read_frame(&mut f) {
            Ok(true) => Some(f),
            Ok(false) => None,
            Err(e) => {
                stopped.push((inputs[i].port, e));
                None
            }
        }
    };
    for i in 0..inputs.len() {
        let h = read(i, inputs, &mut stopped_by);
        heads.push(h);
    }
    let res: Vec<TsResolution> = inputs
        .iter()
        .map(|i| i.input.header().ts_resolution)
        .collect();
    let mut group: Vec<PcapFrame> = Vec::with_capacity(BATCH);
    let mut unanswered = 0;
    let mut sink = PcapSink {
        out: &mut out,
        frame: PcapFrame::default(),
        error: None,
    };
    loop {
        // The input whose head frame is earliest.
        let next = heads
            .iter()
            .enumerate()
            .filter_map(|(i, h)| h.as_ref().map(|f| (nanos(f, res[i]), i)))
            .min();
        let Some((_, i)) = next else { break };
        let port = inputs[i].port;
        group.clear();
        while group.len() < BATCH {
            let Some(f) = heads[i].take() else { break };
            group.push(f);
            heads[i] = read(i, inputs, &mut stopped_by);
            // Keep going on this input while it stays the earliest.
            let earliest = heads
                .iter()
                .enumerate()
                .filter_map(|(j, h)| h.as_ref().map(|f| (nanos(f, res[j]), j)))
                .min()
                .map(|(_, j)| j);
            if earliest != Some(i) {
                break;
            }
        }
        let frames: Vec<&[u8]> = group.iter().map(|f| &f.data[..]).collect();
        let stamps: Vec<Stamp> = group
            .iter()
            .map(|f| Stamp {
                ts_sec: f.ts_sec,
                ts_frac: f.ts_frac,
                orig_len: f.orig_len,
            })
            .collect();
        stage.process(port, &frames, &stamps, &mut sink);
        if !stage.flush(&mut sink, flush_timeout) {
            unanswered += stage.pending_flows();
        }
        if let Some(e) = sink.error.take() {
            return Err(e);
        }
    }
    if let Some(e) = sink.error.take() {
        return Err(e);
    }
    let counters = stage.take_counters();
    let mut carried = before;
    carried.merge(&counters);
    stage.set_counters(carried);
    let sdf = diff(stage.sdf_counters(), &sdf_before);
    let slices = stage
        .slice_counters()
        .iter()
        .zip(&slices_before)
        .map(|(a, b)| diff(a, b))
        .collect();
    Ok(SdfPcapRun {
        counters,
        sdf,
        slices,
        elapsed: start.elapsed(),
        stopped_by,
        unanswered,
        outputs: out.finish()?,
    })
}

/// `a - b`, field by field.
fn diff(a: &SdfCounters, b: &SdfCounters) -> SdfCounters {
    let d = |x: u64, y: u64| x.saturating_sub(y);
    SdfCounters {
        hits: d(a.hits, b.hits),
        misses: d(a.misses, b.misses),
        app_requests: d(a.app_requests, b.app_requests),
        control_requests: d(a.control_requests, b.control_requests),
        pending_waits: d(a.pending_waits, b.pending_waits),
        pending_resolved: d(a.pending_resolved, b.pending_resolved),
        resubmitted: d(a.resubmitted, b.resubmitted),
        late_replies: d(a.late_replies, b.late_replies),
        drops: super::SdfDrops {
            queue_full: d(a.drops.queue_full, b.drops.queue_full),
            control_queue_full: d(a.drops.control_queue_full, b.drops.control_queue_full),
            no_slice: d(a.drops.no_slice, b.drops.no_slice),
            pending_full: d(a.drops.pending_full, b.drops.pending_full),
            waiting_full: d(a.drops.waiting_full, b.drops.waiting_full),
            app_timeout: d(a.drops.app_timeout, b.drops.app_timeout),
            app_gone: d(a.drops.app_gone, b.drops.app_gone),
            app_fault: d(a.drops.app_fault, b.drops.app_fault),
            ttl_expired: d(a.drops.ttl_expired, b.drops.ttl_expired),
        },
    }
}
