//! The offline variant of `nexthop lab` (no namespaces: not root, or
//! `--pcap`): the same plan of names, actions and live changes, with an
//! embedded controller and a `FibFollower` over loopback TCP, and the
//! frames read from a pcap file and written to one pcap per port.
//!
//! The input is cut into chunks; before each chunk the next share of the
//! changes goes through the controller, and the chunk waits until the
//! follower has applied the delta. So every frame has one exact expected
//! set of ports (its name's action at its chunk), and every output file is
//! checked frame by frame, in both directions: each frame on a port its
//! action names, and each port holding exactly as many frames as the
//! actions sent there.

use crate::textio::say;
use std::fs;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use nexthop_control::{Controller, ControllerConfig, FibFollower, FollowerConfig};
use nexthop_dataplane::engine::swap_in;
use nexthop_dataplane::live::StopFlag;
use nexthop_dataplane::pcap::{PcapFrame, PcapIn, PcapOut, PcapPorts};
use nexthop_dataplane::{Decision, Egress, Pipeline, PipelineConfig, BATCH};
use nexthop_othello::fib::{KeyType, NameKey};

use super::frame::{parse_frame, ports_of, write_frame, FRAME_LEN, PHASE_TRAFFIC, PORTS, PUNT};
use super::plan::{prepare, save_final_fib, Prepared, Walk};
use super::summary::{FibPart, ForwarderPart, Summary, UpdatesPart};
use super::{step, LabOpts};
use crate::cmd_run::{Current, Followed};

/// Number of chunks the input is cut into (changes are applied between).
const CHUNKS: usize = 100;

/// Wait until `f` returns true (at most 10 s).
fn wait_until(mut f: impl FnMut() -> bool, what: &str) -> Result<()> {
    let end = Instant::now() + Duration::from_secs(10);
    while !f() {
        if Instant::now() > end {
            bail!("timed out waiting for {what}");
        }
        std::thread::sleep(Duration::from_micros(100));
    }
    Ok(())
}

/// The offline lab.
pub fn run(o: &LabOpts, stop: &StopFlag) -> Result<()> {
    let t = Instant::now();
    if o.alternate > 0.0 {
        say!(
            "nexthop lab (pcap): --alternate times phases of live traffic; the pcap variant has none and ignores it"
        );
    }
    let n_changes = (o.update_rate * o.duration).ceil() as usize;
    let frames = o.pcap_frames.max(1);
    let chunks = CHUNKS.min(frames);
    let chunk_len = frames.div_ceil(chunks);
    say!(
        "nexthop lab (pcap): {} MAC names over ports 1-4, {frames} frames in {chunks} chunks, {n_changes} changes through the embedded controller between chunks, seed {}",
        o.names, o.seed
    );
    let Prepared {
        plan,
        fib,
        fib_bytes,
        bits,
        key,
        generation: initial_generation,
        ..
    } = prepare(o, n_changes, t)?;
    let cfg = ControllerConfig {
        log: false,
        changes_per_delta: o.changes_per_delta,
        ..ControllerConfig::default()
    };
    let controller = Controller::start(fib, key.clone(), cfg)?;
    let follower = FibFollower::start(
        key,
        FollowerConfig::new(controller.local_addr(), "nexthop-lab-pcap"),
    )?;
    wait_until(
        || follower.table().is_some(),
        "the follower's first snapshot",
    )?;
    step(
        "controller",
        t,
        format_args!(
            "embedded controller on {}, follower has its snapshot ({fib_bytes} B of arrays, {bits:.2} bits/name)",
            controller.local_addr()
        ),
    );

    // The input pcap: chunk number as each frame's tag.
    let in_path = o.out.join("in.pcap");
    let mut w = PcapOut::create(&in_path, PcapOut::ethernet_header())?;
    let mut walk = Walk::new(plan.names.len(), o.seed);
    let mut buf = [0u8; FRAME_LEN];
    for i in 0..frames {
        let idx = walk.next_index();
        write_frame(
            &mut buf,
            &plan.names[idx as usize],
            PHASE_TRAFFIC,
            idx,
            (i / chunk_len) as u32,
        );
        w.write(Duration::from_micros(i as u64), &buf)?;
    }
    w.finish()?;
    step(
        "generate",
        t,
        format_args!("{frames} frames of {FRAME_LEN} B -> {}", in_path.display()),
    );

    // Forward chunk by chunk, changes between chunks.
    let out_dir = o.out.join("pcap-out");
    let mut input = PcapIn::open(&in_path).map_err(|e| anyhow!("{}: {e}", in_path.display()))?;
    let mut outs = PcapPorts::create(&out_dir, input.header())?;
    let first = follower.table().context("follower lost its table")?;
    let mut pipeline = Pipeline::new(
        Current::Followed(Followed(first.clone())),
        first.actions(),
        KeyType::Mac,
        PipelineConfig::default(),
    )?;
    let mut state = plan.initial_masks();
    let mut expected = [0u64; 8];
    let mut expected_punts = 0u64;
    let mut applied = 0usize;
    let mut apply_secs = 0.0f64;
    let mut pipeline_secs = 0.0f64;
    let mut chunk: Vec<PcapFrame> = Vec::with_capacity(chunk_len);
    let mut decisions: Vec<Decision> = Vec::with_capacity(BATCH);
    let mut frames_done = 0usize;
    for c in 0..chunks {
        if stop.is_raised() {
            bail!("interrupted");
        }
        let upto = (n_changes * (c + 1)) / chunks;
        if upto > applied {
            let ta = Instant::now();
            controller
                .apply_changes(&plan.changes[applied..upto])
                .map_err(|e| anyhow!("applying changes {}..{upto}: {e}", applied + 1))?;
            // The one follower acknowledged every change (a merged delta
            // carries many; an Ack covers every frame before it).
            let version = controller.version();
            wait_until(
                || {
                    let s = controller.stats();
                    s.changes_sent >= version && s.acked >= s.snapshots_sent + s.deltas_sent
                },
                "the follower to apply the changes",
            )?;
            apply_secs += ta.elapsed().as_secs_f64();
            plan.apply_touches(&mut state, applied..upto);
            applied = upto;
        }
        if let Some(tbl) = follower.table() {
            swap_in(&mut pipeline, Followed(tbl));
        }
        chunk.clear();
        while chunk.len() < chunk_len {
            let mut f = PcapFrame::default();
            if !input
                .read_frame(&mut f)
                .map_err(|e| anyhow!("{}: {e}", in_path.display()))?
            {
                break;
            }
            chunk.push(f);
        }
        for g in chunk.chunks(BATCH) {
            let tp = Instant::now();
            // `PcapFrame: AsRef<[u8]>`: no list of slices per batch.
            pipeline.process(0, g, &mut decisions);
            pipeline_secs += tp.elapsed().as_secs_f64();
            for (f, d) in g.iter().zip(&decisions) {
                match pipeline.egress(d) {
                    Egress::Ports(ps) => {
                        for &p in ps {
                            outs.emit(p, f)?;
                        }
                    }
                    Egress::Controller => outs.punt(f)?,
                    Egress::Discard => {}
                }
                if let Some(lf) = parse_frame(&f.data) {
                    let m = state[lf.idx as usize];
                    for (p, e) in expected.iter_mut().enumerate().take(7) {
                        *e += u64::from(m >> p & 1);
                    }
                    expected_punts += u64::from(m & PUNT != 0);
                }
            }
        }
        frames_done += chunk.len();
    }
    let files = outs.finish()?;
    step(
        "forward",
        t,
        format_args!(
            "{frames_done} frames through the pipeline in {pipeline_secs:.3} s of pipeline time ({:.2} Mpps); {applied} changes applied and propagated in {apply_secs:.2} s",
            frames_done as f64 / pipeline_secs.max(1e-9) / 1e6
        ),
    );

    // Check every output frame against the plan's state at its chunk.
    let mut mis = 0u64;
    let mut examples: Vec<String> = Vec::new();
    let mut ports = std::collections::BTreeMap::new();
    let mut count_mismatch = Vec::new();
    for f in &files {
        let Some(port) = f.port else { continue };
        let mut s = plan.initial_masks();
        let mut replayed = 0usize;
        let mut rd = PcapIn::open(&f.path).map_err(|e| anyhow!("{}: {e}", f.path.display()))?;
        let mut fr = PcapFrame::default();
        let mut n = 0u64;
        while rd
            .read_frame(&mut fr)
            .map_err(|e| anyhow!("{}: {e}", f.path.display()))?
        {
            n += 1;
            let Some(lf) = parse_frame(&fr.data) else {
                mis += 1;
                continue;
            };
            let upto = ((n_changes * (lf.tag as usize + 1)) / chunks).min(plan.touches.len());
            if upto > replayed {
                plan.apply_touches(&mut s, replayed..upto);
                replayed = upto;
            }
            let i = lf.idx as usize;
            let ok = plan.names.get(i) == Some(&lf.dst) && s[i] >> port & 1 == 1;
            if !ok {
                mis += 1;
                if examples.len() < 5 {
                    examples.push(format!(
                        "{} (name #{i}) in port-{port}.pcap; at chunk {} its action sends to {}",
                        lf.dst.fmt_name(),
                        lf.tag,
                        ports_of(s.get(i).copied().unwrap_or(0))
                    ));
                }
            }
        }
        let want = expected.get(usize::from(port)).copied().unwrap_or(0);
        if n != want {
            count_mismatch.push(format!("port {port}: {n} frames, expected {want}"));
        }
        ports.insert(port, n);
    }
    for p in PORTS {
        let have = files.iter().any(|f| f.port == Some(p));
        if !have && expected[usize::from(p)] > 0 {
            count_mismatch.push(format!(
                "port {p}: no file, expected {}",
                expected[usize::from(p)]
            ));
        }
    }
    let punts = files
        .iter()
        .find(|f| f.port.is_none())
        .map_or(0, |f| f.frames);
    let c = pipeline.counters();
    follower.stop();
    controller.shutdown();
    // The FIB directory ends holding the controller's final FIB.
    let final_generation = save_final_fib(&o.out, &plan, applied)?;
    let per_port: Vec<String> = ports.iter().map(|(p, n)| format!("{p}:{n}")).collect();
    let pipeline_mpps = frames_done as f64 / pipeline_secs.max(1e-9) / 1e6;
    let ok = mis == 0 && count_mismatch.is_empty() && punts == expected_punts;
    let report = Summary {
        variant: "pcap",
        ok,
        seconds: t.elapsed().as_secs_f64(),
        seed: o.seed,
        fib: FibPart {
            names: plan.names.len(),
            added: plan.counts[0],
            deleted: plan.counts[1],
            data_plane_bytes: fib_bytes,
            bits_per_name: bits,
            dir: o.out.join("fib").display().to_string(),
            initial_generation,
            final_generation: Some(final_generation),
        },
        source: None,
        forwarder: ForwarderPart {
            workers: 1,
            frames_in: Some(frames_done as u64),
            forwarded: Some(c.forwarded),
            dropped: Some(c.dropped),
            punted: Some(c.punted),
            pipeline_mpps: Some(pipeline_mpps),
            ..ForwarderPart::default()
        },
        delivered: ports.values().sum(),
        ports,
        sink_ring_drops: None,
        misforwarded: Some(mis),
        updates: UpdatesPart {
            changes: applied,
            seconds: apply_secs,
            per_second: applied as f64 / apply_secs.max(1e-9),
            apply_us_each: None,
            deltas: None,
        },
        ..Summary::default()
    };
    report.write(&o.out, o.json)?;

    say!();
    say!(
        "summary ({:.1} s in all; files in {}, figures also in summary.json)",
        t.elapsed().as_secs_f64(),
        o.out.display()
    );
    say!(
        "  fib           {} names (+{} added, -{} deleted live), {fib_bytes} B of data-plane arrays, {bits:.2} bits/name; \
         {} holds the final FIB (generation {final_generation}; generation {initial_generation} before the live changes)",
        plan.names.len(),
        plan.counts[0],
        plan.counts[1],
        o.out.join("fib").display()
    );
    say!(
        "  forwarder     in={frames_done} forwarded={} dropped={} punted={} ({punts} in controller.pcap, {expected_punts} expected)",
        c.forwarded, c.dropped, c.punted
    );
    say!(
        "  rate          {pipeline_mpps:.2} Mpps through the pipeline (pcap in, pcap out; no kernel I/O)"
    );
    say!("  ports         {}", per_port.join(" "));
    say!("  misforwarded  {mis}");
    say!(
        "  updates       {applied} changes through controller -> follower, {:.0} updates/s including propagation",
        applied as f64 / apply_secs.max(1e-9)
    );
    for e in &examples {
        say!("  example       {e}");
    }
    for e in &count_mismatch {
        say!("  count         {e}");
    }
    fs::remove_file(&in_path).ok();
    if !ok {
        bail!(
            "{mis} misforwarded frames, {} ports with wrong counts, {punts} punts ({expected_punts} expected)",
            count_mismatch.len()
        );
    }
    Ok(())
}
