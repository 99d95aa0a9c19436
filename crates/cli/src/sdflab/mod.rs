//! `nexthop sdf lab`: the built-in l2switch run through the SDF pipeline
//! (its decision cache, app thread and pending-miss table) over generated
//! traffic, without root: progress lines (hit rate, app calls per second,
//! revocations), a summary, and a check that every frame went where the
//! app itself, with no cache, sends it.
//!
//! The traffic: `--hosts` hosts on `--ports` ports each say hello
//! (broadcast), then `--frames` unicast frames between random pairs, with
//! `--moves` hosts moving to another port on the way (their next frame
//! comes from the new port) and one frame in 64 to a MAC nobody has. Every
//! frame carries its sequence number, so each frame's output ports are
//! known. Frames go through in groups of up to 32 (each group's decisions
//! waited for, as `sdf run` does offline); a frame that changes the
//! switch's state for frames behind it (a move) ends its group, so the
//! oracle's one-frame-at-a-time order and the pipeline's agree.
//!
//! The oracle is `nexthop_sdf::app::Switch` with caching off: the same app
//! on every frame in order. PASS: every frame's output ports are the
//! oracle's (frames compared by sequence number).
//!
//! `--netns` (root) runs the same traffic as real frames between network
//! namespaces (`netns.rs`): the switch's ports are veth interfaces in a
//! namespace of their own, run by `sdf::run_live` (the forwarder engine,
//! AF_PACKET) as `nexthop sdf run --port` runs them; the hosts' ends are in
//! another namespace, where the lab sends each group's frames and waits
//! until the deliveries the oracle expects arrived (a move frame is sent on
//! its own, after the frames before it were delivered). Output ports are
//! where each frame arrived.

use std::collections::BTreeMap;
use std::io::{self, Write};
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Result};
use clap::Args;
use nexthop_dataplane::sdf::{SdfConfig, SdfCounters, SdfRuntime, SdfStats, Sink, Stamp};
use nexthop_sdf::app::{L2Config, L2Switch, Ports, Switch};
use rand::{Rng, SeedableRng};

mod netns;

/// Groups of frames decided together.
const GROUP: usize = 32;
/// Byte offset of the sequence number in a lab frame.
const SEQ_AT: usize = 14;

/// `nexthop sdf lab` arguments.
#[derive(Debug, Args)]
pub struct LabArgs {
    /// Hosts (2 to 60000).
    #[arg(long, value_name = "N", default_value_t = 64)]
    hosts: u32,
    /// Switch ports (2 to 64).
    #[arg(long, value_name = "N", default_value_t = 4)]
    ports: u16,
    /// Unicast frames after the hellos.
    #[arg(long, value_name = "N", default_value_t = 100_000)]
    frames: u64,
    /// Hosts that move to another port on the way.
    #[arg(long, value_name = "N", default_value_t = 8)]
    moves: u32,
    /// The traffic's random seed.
    #[arg(long, value_name = "S", default_value_t = 1)]
    seed: u64,
    /// Cached decisions at most.
    #[arg(long, value_name = "N", default_value_t = 65536)]
    cache_capacity: usize,
    /// A progress line every this many frames (0: none).
    #[arg(long, value_name = "N", default_value_t = 20_000)]
    every: u64,
    /// Print the summary as JSON instead of one line.
    #[arg(long)]
    json: bool,
    /// Real frames between network namespaces (veth, AF_PACKET; root)
    /// instead of frames handed to the pipeline in memory.
    #[arg(long)]
    netns: bool,
}

/// What the pipeline sent, per sequence number: the output ports.
#[derive(Default)]
struct Record(BTreeMap<u32, Vec<u16>>);

impl Sink for Record {
    fn emit(&mut self, ports: &[u16], _controller: bool, frame: &[u8], _stamp: Stamp) {
        if let Some(seq) = seq_of(frame) {
            self.0.entry(seq).or_default().extend_from_slice(ports);
        }
    }
}

fn seq_of(frame: &[u8]) -> Option<u32> {
    let b = frame.get(SEQ_AT..SEQ_AT + 4)?;
    Some(u32::from_be_bytes([b[0], b[1], b[2], b[3]]))
}

fn host_mac(h: u32) -> [u8; 6] {
    let b = h.to_be_bytes();
    [0x02, 0x5d, b[0], b[1], b[2], b[3]]
}

fn frame(dst: [u8; 6], src: [u8; 6], seq: u32) -> Vec<u8> {
    let mut f = vec![0u8; 64];
    f[..6].copy_from_slice(&dst);
    f[6..12].copy_from_slice(&src);
    f[12..14].copy_from_slice(&[0x88, 0xb5]);
    f[SEQ_AT..SEQ_AT + 4].copy_from_slice(&seq.to_be_bytes());
    f
}

/// The generated traffic: groups of (in port, frame).
struct Traffic {
    groups: Vec<Vec<(u16, Vec<u8>)>>,
    /// Per group: whether its last frame is a move.
    move_ends: Vec<bool>,
    frames: u64,
    moves: u32,
}

fn traffic(a: &LabArgs) -> Traffic {
    let mut rng = rand::rngs::StdRng::seed_from_u64(a.seed);
    let mut at: Vec<u16> = (0..a.hosts)
        .map(|h| (h % u32::from(a.ports)) as u16)
        .collect();
    let mut groups = Vec::new();
    let mut move_ends = Vec::new();
    let mut group = Vec::with_capacity(GROUP);
    let mut seq = 0u32;
    let mut frames = 0u64;
    let mut push = |group: &mut Vec<(u16, Vec<u8>)>, port, f, end: bool| {
        group.push((port, f));
        if end || group.len() == GROUP {
            groups.push(std::mem::take(group));
            move_ends.push(end);
        }
    };
    for h in 0..a.hosts {
        push(
            &mut group,
            at[h as usize],
            frame([0xff; 6], host_mac(h), seq),
            false,
        );
        seq += 1;
        frames += 1;
    }
    // The frame numbers at which a host moves.
    let mut move_at: Vec<u64> = (0..a.moves)
        .map(|_| rng.gen_range(0..a.frames.max(1)))
        .collect();
    move_at.sort_unstable();
    let mut moves = 0;
    let mut next_move = 0;
    for i in 0..a.frames {
        let src = rng.gen_range(0..a.hosts);
        let moving = next_move < move_at.len() && move_at[next_move] == i;
        if moving {
            while next_move < move_at.len() && move_at[next_move] == i {
                next_move += 1;
            }
            let old = at[src as usize];
            at[src as usize] = (old + 1 + rng.gen_range(0..a.ports - 1)) % a.ports;
            moves += 1;
        }
        let dst = if rng.gen_range(0..64) == 0 {
            // Nobody has it: flooded.
            host_mac(a.hosts + 1 + rng.gen_range(0..1000))
        } else {
            let mut d = rng.gen_range(0..a.hosts);
            if d == src {
                d = (d + 1) % a.hosts;
            }
            host_mac(d)
        };
        let f = frame(dst, host_mac(src), seq);
        push(&mut group, at[src as usize], f, moving);
        seq = seq.wrapping_add(1);
        frames += 1;
    }
    if !group.is_empty() {
        groups.push(group);
        move_ends.push(false);
    }
    Traffic {
        groups,
        move_ends,
        frames,
        moves,
    }
}

/// The progress lines on stderr, every `every` frames.
struct Progress {
    every: u64,
    next_line: u64,
    start: Instant,
    last: (Instant, u64),
}

impl Progress {
    fn new(every: u64) -> Progress {
        Progress {
            every,
            next_line: every,
            start: Instant::now(),
            last: (Instant::now(), 0),
        }
    }

    /// `done` frames went through; `sdf` and `st` are the counters now.
    fn update(&mut self, done: u64, sdf: &SdfCounters, st: &SdfStats) {
        if self.every == 0 || done < self.next_line {
            return;
        }
        while self.next_line <= done {
            self.next_line += self.every;
        }
        let dt = self.last.0.elapsed().as_secs_f64().max(1e-9);
        let calls_per_s = st.app.app_calls.saturating_sub(self.last.1) as f64 / dt;
        self.last = (Instant::now(), st.app.app_calls);
        eprintln!(
            "t={:.2}s frames={done} hit_rate={:.3} app_calls={} app_calls_per_s={calls_per_s:.0} revocations={} entries={}",
            self.start.elapsed().as_secs_f64(),
            sdf.hits as f64 / (sdf.hits + sdf.misses).max(1) as f64,
            st.app.app_calls,
            st.cache.revocations,
            st.entries,
        );
    }
}

/// What driving the traffic through the switch gave.
struct Outcome {
    got: Record,
    sdf: SdfCounters,
    stats: SdfStats,
    /// Offline: flows whose decision never came back; `--netns`: sends
    /// whose expected deliveries had not all arrived within the wait.
    unanswered: usize,
    elapsed: Duration,
}

/// The frames through the pipeline in memory, group by group.
fn drive_in_memory(a: &LabArgs, t: &Traffic, rt: SdfRuntime) -> Outcome {
    let mut stage = rt.stage();
    let mut got = Record::default();
    let start = Instant::now();
    let mut progress = Progress::new(a.every);
    let mut done = 0u64;
    let mut unanswered = 0usize;
    for g in &t.groups {
        let mut i = 0;
        while i < g.len() {
            let port = g[i].0;
            let n = g[i..].iter().take_while(|(p, _)| *p == port).count();
            let refs: Vec<&[u8]> = g[i..i + n].iter().map(|(_, f)| &f[..]).collect();
            stage.process(port, &refs, &[], &mut got);
            i += n;
        }
        if !stage.flush(&mut got, Duration::from_secs(10)) {
            unanswered += stage.pending_flows();
        }
        done += g.len() as u64;
        progress.update(done, stage.sdf_counters(), &rt.stats());
    }
    let elapsed = start.elapsed();
    let sdf = *stage.sdf_counters();
    drop(stage);
    Outcome {
        got,
        sdf,
        stats: rt.shutdown(),
        unanswered,
        elapsed,
    }
}

fn l2(cfg: L2Config) -> L2Switch {
    L2Switch::new(cfg)
}

/// `nexthop sdf lab`.
pub fn run(a: &LabArgs) -> Result<()> {
    if !(2..=60_000).contains(&a.hosts) {
        bail!("--hosts {}: expected 2 to 60000", a.hosts);
    }
    if !(2..=64).contains(&a.ports) {
        bail!("--ports {}: expected 2 to 64", a.ports);
    }
    if a.frames > u64::from(u32::MAX / 2) {
        bail!("--frames {}: at most {}", a.frames, u32::MAX / 2);
    }
    if a.netns {
        netns::check()?;
    }
    let l2cfg = L2Config {
        timeout: Duration::from_secs(3600),
        max_macs: 1 << 20,
    };
    let ports: Vec<u16> = (0..a.ports).collect();
    let cache = nexthop_sdf::Config {
        capacity: a.cache_capacity,
        ..nexthop_sdf::Config::default()
    };
    let t = traffic(a);
    // The oracle: the same app on every frame, in order, no cache.
    let mut oracle = Switch::new(l2(l2cfg), cache, Ports::physical(&ports), false)
        .map_err(|e| anyhow!("{e}"))?;
    let mut want: BTreeMap<u32, Vec<u16>> = BTreeMap::new();
    for (port, f) in t.groups.iter().flatten() {
        for e in oracle.process(*port, f) {
            if let Some(seq) = seq_of(&e.bytes) {
                want.entry(seq).or_default().extend_from_slice(&e.ports);
            }
        }
    }
    let rt = SdfRuntime::start(
        Box::new(l2(l2cfg)),
        SdfConfig {
            cache,
            ports: ports.clone(),
            ..SdfConfig::default()
        },
    )
    .map_err(|e| anyhow!("{e}"))?;
    let Outcome {
        mut got,
        sdf,
        stats,
        unanswered,
        elapsed,
    } = if a.netns {
        netns::drive(a, &t, &want, rt)?
    } else {
        drive_in_memory(a, &t, rt)
    };
    // The order frames reached their ports in is not compared: sort each
    // frame's ports (in memory they come in the app's order).
    for v in got.0.values_mut() {
        v.sort_unstable();
    }
    for v in want.values_mut() {
        v.sort_unstable();
    }
    let mut mismatches = 0u64;
    let mut first = Vec::new();
    for (port, f) in t.groups.iter().flatten() {
        let Some(seq) = seq_of(f) else { continue };
        let (w, g) = (want.get(&seq), got.0.get(&seq));
        if w.map(Vec::as_slice).unwrap_or(&[]) != g.map(Vec::as_slice).unwrap_or(&[]) {
            mismatches += 1;
            if first.len() < 5 {
                first.push(format!(
                    "frame {seq} from port {port}: the app sends it to {w:?}, the pipeline to {g:?}"
                ));
            }
        }
    }
    let pass = mismatches == 0 && unanswered == 0;
    let verdict = if pass { "PASS" } else { "FAIL" };
    let hit_rate = sdf.hits as f64 / (sdf.hits + sdf.misses).max(1) as f64;
    let secs = elapsed.as_secs_f64();
    let mut stdout = io::stdout().lock();
    if a.json {
        let v = serde_json::json!({
            "result": verdict,
            "app": "l2switch",
            "netns": a.netns,
            "frames": t.frames,
            "hosts": a.hosts,
            "ports": a.ports,
            "moves": t.moves,
            "hits": sdf.hits,
            "misses": sdf.misses,
            "hit_rate": hit_rate,
            "app_calls": stats.app.app_calls,
            "app_calls_per_s": stats.app.app_calls as f64 / secs.max(1e-9),
            "pending_waits": sdf.pending_waits,
            "installs": stats.cache.installs,
            "revocations": stats.cache.revocations,
            "evictions": stats.cache.evictions,
            "entries": stats.entries,
            "drops": sdf.drops.total(),
            "mismatches": mismatches,
            "unanswered": unanswered,
            "seconds": secs,
        });
        serde_json::to_writer_pretty(&mut stdout, &v).map_err(io::Error::from)?;
        writeln!(stdout)?;
    } else {
        writeln!(
            stdout,
            "{verdict} frames={} moves={} hits={} misses={} hit_rate={hit_rate:.3} app_calls={} \
             app_calls_per_s={:.0} installs={} revocations={} evictions={} mismatches={mismatches} \
             seconds={secs:.3}",
            t.frames,
            t.moves,
            sdf.hits,
            sdf.misses,
            stats.app.app_calls,
            stats.app.app_calls as f64 / secs.max(1e-9),
            stats.cache.installs,
            stats.cache.revocations,
            stats.cache.evictions,
        )?;
    }
    stdout.flush()?;
    for m in &first {
        eprintln!("mismatch: {m}");
    }
    if !pass {
        bail!(
            "{mismatches} frames went elsewhere than the app says, {unanswered} flows unanswered"
        );
    }
    Ok(())
}
