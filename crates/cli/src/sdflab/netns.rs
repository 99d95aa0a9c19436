//! `nexthop sdf lab --netns`: the lab's traffic as real frames between
//! network namespaces. Switch port P is interface `lsP` in the switch's
//! namespace, run by `sdf::run_live` (the forwarder engine, AF_PACKET, one
//! worker) on a thread that entered it; its veth peer `lhP` is in the
//! hosts' namespace, where a second thread sends each step's frames from
//! the port of their host and reads what the switch delivers to every
//! port. The worker may decide the frames of one send in any order across
//! ports, so a step holds only frames whose order does not matter: a
//! group of the lab is cut after its last hello and before a move (the
//! move is a step of its own, sent once every frame before it has been
//! decided, as the oracle's order has it). The next step starts once the
//! deliveries the oracle expects for this one have arrived and the cache
//! has looked up each of its frames (or [`STEP_WAIT`] passed: counted as
//! unanswered).

use std::collections::BTreeMap;
use std::sync::mpsc;
use std::time::{Duration, Instant};

use anyhow::{anyhow, bail, Context, Result};
use nexthop_dataplane::afpacket::{poll_fds, FanoutMode, RingConfig, RxRing, TxPort};
use nexthop_dataplane::engine::{EngineConfig, IoMode, PortsConfig, XdpAttach};
use nexthop_dataplane::live::{StopAfter, StopFlag};
use nexthop_dataplane::netns::{enter, is_root, Namespaces};
use nexthop_dataplane::sdf::{live_ports, run_live, SdfLivePorts, SdfRuntime};

use super::{seq_of, LabArgs, Outcome, Progress, Record, Traffic};

/// How long a step waits for its deliveries.
const STEP_WAIT: Duration = Duration::from_secs(3);
/// How long the lab listens after the last step for late deliveries.
const DRAIN: Duration = Duration::from_millis(200);

/// Whether `--netns` can run here; the error says why not.
pub(super) fn check() -> Result<()> {
    if !is_root() {
        bail!("--netns needs root (network namespaces); without it the lab runs in memory");
    }
    Ok(())
}

/// The host side: a receive ring and a transmit socket per port.
struct Hosts {
    rings: Vec<RxRing>,
    tx: Vec<TxPort>,
    /// Per sequence number: the port its frame was sent from (the ring of
    /// that port also sees it leave).
    sent_from: BTreeMap<u32, u16>,
}

impl Hosts {
    fn open(ports: u16) -> Result<Hosts> {
        let cfg = RingConfig {
            block_size: 1 << 16,
            block_count: 64,
            frame_size: 2048,
            block_timeout_ms: 1,
        };
        let mut rings = Vec::new();
        let mut tx = Vec::new();
        for p in 0..ports {
            let name = format!("lh{p}");
            rings.push(RxRing::open(&name, &cfg).with_context(|| format!("host port {name}"))?);
            tx.push(TxPort::open(&name).with_context(|| format!("host port {name}"))?);
        }
        Ok(Hosts {
            rings,
            tx,
            sent_from: BTreeMap::new(),
        })
    }

    /// Read what arrived; returns how many deliveries of frames in
    /// `step` (sequence numbers) it recorded.
    fn read(&mut self, got: &mut Record, step: &[u32]) -> usize {
        let mut n = 0;
        for (p, ring) in self.rings.iter_mut().enumerate() {
            let p = p as u16;
            while let Some(mut block) = ring.next_block() {
                let mut frames = Vec::new();
                block.frames_into(&mut frames);
                for f in frames {
                    let Some(seq) = seq_of(f) else { continue };
                    match self.sent_from.get(&seq) {
                        // Our own frame leaving, or one never sent.
                        Some(&from) if from == p => continue,
                        None => continue,
                        Some(_) => {}
                    }
                    got.0.entry(seq).or_default().push(p);
                    n += usize::from(step.contains(&seq));
                }
            }
        }
        n
    }

    /// Send `frames` (port, frame), each from its port, in order.
    fn send(&mut self, frames: &[(u16, Vec<u8>)]) -> Result<()> {
        let mut i = 0;
        while i < frames.len() {
            let port = frames[i].0;
            let n = frames[i..].iter().take_while(|(p, _)| *p == port).count();
            let batch: Vec<&[u8]> = frames[i..i + n].iter().map(|(_, f)| &f[..]).collect();
            for f in &batch {
                if let Some(seq) = seq_of(f) {
                    self.sent_from.insert(seq, port);
                }
            }
            let out = self.tx[usize::from(port)].send_batch(&batch);
            if out.failed > 0 {
                bail!(
                    "host port lh{port}: {} frames not sent (os error {:?})",
                    out.failed,
                    out.last_error
                );
            }
            i += n;
        }
        Ok(())
    }

    fn fds(&self) -> Vec<std::os::fd::RawFd> {
        self.rings.iter().map(RxRing::raw_fd).collect()
    }
}

/// Run `t` through `rt` between namespaces; `want` is the oracle's output
/// ports per sequence number.
pub(super) fn drive(
    a: &LabArgs,
    t: &Traffic,
    want: &BTreeMap<u32, Vec<u16>>,
    rt: SdfRuntime,
) -> Result<Outcome> {
    check()?;
    let tag = std::process::id();
    let (sw, hs) = (format!("nh-sdflab-sw-{tag}"), format!("nh-sdflab-h-{tag}"));
    let mut guard = Namespaces::new();
    guard.create(&sw)?;
    guard.create(&hs)?;
    for p in 0..a.ports {
        guard.veth(&hs, &format!("lh{p}"), &sw, &format!("ls{p}"), None)?;
    }
    let names: Vec<String> = (0..a.ports).map(|p| format!("ls{p}")).collect();
    let maps: Vec<(u16, &str)> = names
        .iter()
        .enumerate()
        .map(|(p, n)| (p as u16, n.as_str()))
        .collect();
    let (by_port, inputs) = live_ports(&maps, &[]).map_err(|e| anyhow!(e))?;
    let stop = StopFlag::new();
    let ports_cfg = PortsConfig {
        workers: 1,
        io: IoMode::Afpacket,
        xdp_attach: XdpAttach::Auto,
        xdp_queue: 0,
        ring: RingConfig::default(),
        fanout: FanoutMode::Hash,
        fanout_group_base: (tag & 0x7fff) as u16,
    };
    let (ready_tx, ready_rx) = mpsc::channel();
    let out = std::thread::scope(|s| -> Result<Outcome> {
        let switch = s.spawn(|| -> Result<_> {
            enter(&sw)?;
            let engine = EngineConfig {
                after: StopAfter::default(),
                report_every: None,
            };
            let live = SdfLivePorts {
                ifaces: &by_port,
                inputs: &inputs,
                config: &ports_cfg,
            };
            let run = run_live(
                &rt,
                live,
                engine,
                &stop,
                |_| {
                    let _ = ready_tx.send(());
                },
                |_| {},
            );
            // The host thread may be waiting for readiness that never
            // comes: a failed start ends the lab.
            stop.raise();
            Ok(run?)
        });
        let (rt, stop, hs) = (&rt, &stop, &hs);
        let hosts = s.spawn(move || -> Result<(Record, usize, Duration)> {
            enter(hs)?;
            let mut h = Hosts::open(a.ports)?;
            if ready_rx.recv_timeout(Duration::from_secs(10)).is_err() {
                bail!("the switch did not start");
            }
            let res = steps(a, t, want, rt, &mut h, stop);
            stop.raise();
            res
        });
        let host_res = hosts
            .join()
            .map_err(|_| anyhow!("the host thread panicked"))?;
        let sw_res = switch
            .join()
            .map_err(|_| anyhow!("the switch thread panicked"))?;
        let done = sw_res?;
        let (got, unanswered, elapsed) = host_res?;
        Ok(Outcome {
            got,
            sdf: done.sdf,
            stats: done.stats,
            unanswered,
            elapsed,
        })
    });
    let _ = rt.shutdown();
    out
}

/// Send the traffic step by step; the deliveries, the steps that timed
/// out and the time it took.
fn steps(
    a: &LabArgs,
    t: &Traffic,
    want: &BTreeMap<u32, Vec<u16>>,
    rt: &SdfRuntime,
    h: &mut Hosts,
    stop: &StopFlag,
) -> Result<(Record, usize, Duration)> {
    let mut got = Record::default();
    let mut progress = Progress::new(a.every);
    let start = Instant::now();
    let mut unanswered = 0;
    let mut done = 0u64;
    let fds = h.fds();
    for (g, &move_end) in t.groups.iter().zip(&t.move_ends) {
        // Step boundaries: after the last hello (frames of one step may be
        // decided in any order across ports, and a unicast frame must not
        // overtake its destination's hello) and before a move.
        let mut cuts = vec![0];
        if let Some(i) = g
            .iter()
            .position(|(_, f)| seq_of(f).is_some_and(|s| s >= a.hosts))
        {
            cuts.push(i);
        }
        if move_end {
            cuts.push(g.len() - 1);
        }
        cuts.push(g.len());
        cuts.dedup();
        for w in cuts.windows(2) {
            let step = &g[w[0]..w[1]];
            if stop.is_raised() {
                bail!("the switch stopped");
            }
            let seqs: Vec<u32> = step.iter().filter_map(|(_, f)| seq_of(f)).collect();
            let expect: usize = seqs.iter().map(|s| want.get(s).map_or(0, Vec::len)).sum();
            let before = rt.stats();
            h.send(step)?;
            let deadline = Instant::now() + STEP_WAIT;
            let mut n = h.read(&mut got, &seqs);
            let mut timed_out = false;
            while n < expect {
                if Instant::now() >= deadline {
                    timed_out = true;
                    break;
                }
                poll_fds(&fds, 5)?;
                n += h.read(&mut got, &seqs);
            }
            // A step that delivers nothing (a frame to a host on its own
            // port) gives no sign that it was decided: wait until the
            // cache has looked every frame up and, for a lone frame that
            // missed, until the app has decided it (and revoked what a
            // move revokes) before the next step.
            while !timed_out {
                let now = rt.stats();
                let looked = now.cache.lookups >= before.cache.lookups + step.len() as u64;
                let decided = step.len() > 1
                    || now.cache.misses == before.cache.misses
                    || now.app.app_calls > before.app.app_calls;
                if looked && decided {
                    break;
                }
                if Instant::now() >= deadline {
                    timed_out = true;
                    break;
                }
                std::thread::sleep(Duration::from_micros(200));
            }
            unanswered += usize::from(timed_out);
            done += step.len() as u64;
        }
        progress.update(done, &rt.stage_counters(), &rt.stats());
    }
    // Late deliveries (a frame sent where the oracle sends none) still
    // count against the run.
    let end = Instant::now() + DRAIN;
    while Instant::now() < end {
        poll_fds(&fds, 10)?;
        h.read(&mut got, &[]);
    }
    Ok((got, unanswered, start.elapsed()))
}
