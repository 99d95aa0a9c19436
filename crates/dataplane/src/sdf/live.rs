//! An SDF runtime over live interfaces: one [`SdfStage`] per worker of
//! the forwarder engine. `nexthop sdf run --port` and the Python
//! package's `run_live` (a Python app on live ports) both run it, so a
//! Rust app and a Python app forward through the same code.

use std::collections::{BTreeMap, BTreeSet};

use super::{app_drops, slice_fields, SdfCounters, SdfRuntime, SdfStats, SliceReport};
use crate::engine::{
    io_list, open_ports, progress_line, summary_line, Engine, EngineConfig, EngineError, NoRefresh,
    PortsConfig, PortsError, Report, Worker,
};
use crate::live::{LiveRun, Progress, StopFlag};

/// Why [`run_live`] failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum SdfLiveError {
    /// A port could not be opened.
    #[error(transparent)]
    Ports(#[from] PortsError),
    /// The engine failed.
    #[error(transparent)]
    Engine(#[from] EngineError),
}

/// A finished live SDF run.
#[derive(Debug)]
pub struct SdfLiveRun {
    /// Every worker's run merged (the engine's counters).
    pub run: LiveRun,
    /// Each port's I/O (`PORT:afpacket,...`, [`io_list`]).
    pub io: String,
    /// The stages' counters, merged.
    pub sdf: SdfCounters,
    /// The cache's and the app side's counters.
    pub stats: SdfStats,
    /// Each slice's report (none without slices).
    pub slices: Vec<SliceReport>,
}

impl SdfLiveRun {
    /// The summary line: the engine's ([`summary_line`]), `io=...`, the
    /// SDF fields ([`live_fields`]) and each slice's
    /// ([`slice_fields`]).
    pub fn summary_line(&self) -> String {
        format!(
            "{} io={} {}{}",
            summary_line(&self.run),
            self.io,
            live_fields(&self.sdf, &self.stats),
            slice_fields(&self.slices)
        )
    }
}

/// The port map and input ports of a live run from `--port N=IFACE`
/// pairs and `--in N` ports (none: every port receives, as a switch
/// does); a port or an interface mapped twice, or an input port without
/// an interface, is an error naming the flag.
///
/// # Errors
/// The message to show.
pub fn live_ports<'a>(
    maps: &[(u16, &'a str)],
    inputs: &[u16],
) -> Result<(BTreeMap<u16, &'a str>, BTreeSet<u16>), String> {
    let by_port = crate::live::port_map(maps.iter().copied())?;
    let inputs: BTreeSet<u16> = if inputs.is_empty() {
        by_port.keys().copied().collect()
    } else {
        inputs.iter().copied().collect()
    };
    if let Some(p) = inputs.iter().find(|p| !by_port.contains_key(p)) {
        return Err(format!(
            "--in {p}: port {p} has no interface (add --port {p}=IFACE)"
        ));
    }
    Ok((by_port, inputs))
}

/// Where a live run receives and sends.
#[derive(Clone, Copy, Debug)]
pub struct SdfLivePorts<'a> {
    /// Switch port → interface ([`live_ports`]).
    pub ifaces: &'a BTreeMap<u16, &'a str>,
    /// The ports received on.
    pub inputs: &'a BTreeSet<u16>,
    /// Workers, I/O and rings.
    pub config: &'a PortsConfig,
}

/// Run `rt` over `ports` until `stop` or `engine.after`: `on_ready` gets
/// the ports' I/O list once every port is open (the caller's readiness
/// line), `on_report` the merged progress every `engine.report_every`.
///
/// # Errors
/// A port that cannot be opened, or the engine's failure.
pub fn run_live(
    rt: &SdfRuntime,
    ports: SdfLivePorts<'_>,
    engine: EngineConfig,
    stop: &StopFlag,
    on_ready: impl FnOnce(&str),
    on_report: impl FnMut(&Report<'_>),
) -> Result<SdfLiveRun, SdfLiveError> {
    let SdfLivePorts {
        ifaces,
        inputs,
        config,
    } = ports;
    let worker_ports = open_ports(ifaces, inputs, config)?;
    let io = io_list(&worker_ports[0], ifaces.keys().copied());
    let workers: Vec<Worker<_>> = worker_ports
        .into_iter()
        .map(|p| Worker::new(rt.stage(), p))
        .collect();
    on_ready(&io);
    // Every stage has published its last counters once `run` returns (a
    // stage publishes when its worker drops it).
    let done = Engine::new(engine).run(workers, &NoRefresh, stop, on_report)?;
    Ok(SdfLiveRun {
        run: done.merged,
        io,
        sdf: rt.stage_counters(),
        stats: rt.stats(),
        slices: rt.slice_reports(&rt.slice_counters()),
    })
}

/// The readiness line of a live run, once its ports are open (scripts
/// wait for it): `nexthop sdf run: forwarding app=LABEL in=N=IFACE,..
/// out=N=IFACE,.. io=IO workers=N (Ctrl-C stops)`.
pub fn ready_line(label: &str, ports: SdfLivePorts<'_>, io: &str) -> String {
    let show = |ps: &dyn Fn(u16) -> bool| {
        ports
            .ifaces
            .iter()
            .filter(|(p, _)| ps(**p))
            .map(|(p, i)| format!("{p}={i}"))
            .collect::<Vec<_>>()
            .join(",")
    };
    format!(
        "nexthop sdf run: forwarding app={label} in={} out={} io={io} workers={} (Ctrl-C stops)",
        show(&|p| ports.inputs.contains(&p)),
        show(&|_| true),
        ports.config.workers
    )
}

/// A live run's progress line: the engine's ([`progress_line`]) with the
/// SDF hits and app calls so far (`sdf_hits=N app_calls=N`).
pub fn sdf_progress_line(rt: &SdfRuntime, p: &Progress<'_>) -> String {
    format!(
        "{} sdf_hits={} app_calls={}",
        progress_line(p),
        rt.stage_counters().hits,
        rt.stats().app.app_calls
    )
}

/// The SDF fields of the live summary line: `sdf_hits=N sdf_misses=N
/// app_calls=N pending_waits=N installs=N revocations=N entries=N masks=N
/// sdf_drops=REASON:N,...|- app_drops=REASON:N,...|-`.
pub fn live_fields(sdf: &SdfCounters, stats: &SdfStats) -> String {
    let drops: Vec<String> = sdf
        .drops
        .named()
        .iter()
        .filter(|(_, n)| *n > 0)
        .map(|(r, n)| format!("{r}:{n}"))
        .collect();
    format!(
        "sdf_hits={} sdf_misses={} app_calls={} pending_waits={} installs={} revocations={} \
         entries={} masks={} sdf_drops={} app_drops={}",
        sdf.hits,
        sdf.misses,
        stats.app.app_calls,
        sdf.pending_waits,
        stats.cache.installs,
        stats.cache.revocations,
        stats.entries,
        stats.masks,
        if drops.is_empty() {
            "-".to_string()
        } else {
            drops.join(",")
        },
        app_drops(stats),
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_live_fields_name_drops_or_say_none() {
        let mut sdf = SdfCounters::default();
        let mut stats = SdfStats::default();
        let line = live_fields(&sdf, &stats);
        assert!(line.ends_with("sdf_drops=- app_drops=-"), "{line}");
        sdf.drops.app_timeout = 2;
        stats.app.drops.add(nexthop_sdf::app::DropReason::AppError);
        let line = live_fields(&sdf, &stats);
        assert!(line.contains("sdf_drops=app_timeout:2 "), "{line}");
        assert!(line.ends_with(" app_drops=app_error:1"), "{line}");
        assert!(!line.contains("  "), "{line}");
    }

    /// AF_PACKET ports with `workers` workers, every other setting default.
    fn afpacket_ports(workers: usize) -> PortsConfig {
        PortsConfig {
            workers,
            io: crate::engine::IoMode::Afpacket,
            xdp_attach: crate::engine::XdpAttach::Auto,
            xdp_queue: 0,
            ring: Default::default(),
            fanout: crate::afpacket::FanoutMode::Hash,
            fanout_group_base: 1,
        }
    }

    #[test]
    fn the_ready_line_names_inputs_outputs_io_and_workers() {
        let (ifaces, inputs) = live_ports(&[(1, "a"), (2, "b")], &[2]).unwrap();
        let config = afpacket_ports(3);
        let ports = SdfLivePorts {
            ifaces: &ifaces,
            inputs: &inputs,
            config: &config,
        };
        assert_eq!(
            ready_line("a=x.py,b=l2switch", ports, "1:afpacket,2:afpacket"),
            "nexthop sdf run: forwarding app=a=x.py,b=l2switch in=2=b out=1=a,2=b \
             io=1:afpacket,2:afpacket workers=3 (Ctrl-C stops)"
        );
    }

    #[test]
    fn live_ports_default_inputs_and_refuse_double_maps() {
        let (m, i) = live_ports(&[(2, "b"), (1, "a")], &[]).unwrap();
        assert_eq!(m.into_iter().collect::<Vec<_>>(), [(1, "a"), (2, "b")]);
        assert_eq!(i.into_iter().collect::<Vec<_>>(), [1, 2]);
        let (_, i) = live_ports(&[(1, "a"), (2, "b")], &[2]).unwrap();
        assert_eq!(i.into_iter().collect::<Vec<_>>(), [2]);
        let e = live_ports(&[(1, "a"), (1, "b")], &[]).unwrap_err();
        assert!(e.contains("port 1 is mapped twice"), "{e}");
        let e = live_ports(&[(1, "a"), (2, "a")], &[]).unwrap_err();
        assert!(e.contains("interface a is already port 1"), "{e}");
        let e = live_ports(&[(1, "a")], &[3]).unwrap_err();
        assert!(e.contains("--in 3: port 3 has no interface"), "{e}");
    }

    #[test]
    fn a_port_that_does_not_exist_is_an_error_not_a_panic() {
        let rt = SdfRuntime::start(
            Box::new(nexthop_sdf::app::L2Switch::new(Default::default())),
            super::super::SdfConfig {
                ports: vec![1],
                ..Default::default()
            },
        )
        .expect("runtime");
        let ifaces = BTreeMap::from([(1u16, "nexthop-no-such-if0")]);
        let inputs = BTreeSet::from([1u16]);
        let ports = afpacket_ports(1);
        let mut ready = false;
        let r = run_live(
            &rt,
            SdfLivePorts {
                ifaces: &ifaces,
                inputs: &inputs,
                config: &ports,
            },
            EngineConfig {
                after: Default::default(),
                report_every: None,
            },
            &StopFlag::new(),
            |_| ready = true,
            |_| {},
        );
        assert!(matches!(r, Err(SdfLiveError::Ports(_))), "{r:?}");
        assert!(!ready);
        rt.shutdown();
    }
}
