//! `nexthop ndn bench` and `nexthop ndn lab`: a forwarder, a producer and
//! consumers over loopback UDP (glue over `nexthop_ndnd::tools`).
//!
//! Both start the forwarder in this process on one thread (the one
//! forwarding thread `nexthop ndn run` has), the producer and each
//! consumer on threads of their own, each with its own UDP socket to the
//! forwarder. Every thread is stopped and joined when the command ends,
//! also on failure (the guards' `Drop`), so no socket or thread outlives
//! it.

pub mod bench;
pub mod lab;

use std::net::SocketAddr;
use std::path::PathBuf;
use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::Arc;
use std::thread::JoinHandle;

use anyhow::{anyhow, Context, Result};
use nexthop_ndn::fw::{DropReason, FwCounters};
use nexthop_ndnd::tools::producer::{Content, Producer, ProducerCounters};
use nexthop_ndnd::{Daemon, NdndConfig};
use nexthop_wire::ndn::Name;

/// The forwarder on a thread of this process.
pub struct ForwarderThread {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<(Daemon, std::io::Result<()>)>>,
    /// Its UDP listener.
    pub udp: SocketAddr,
}

impl ForwarderThread {
    /// Bind `cfg` (its `udp` must be set) and run it.
    pub fn start(cfg: NdndConfig) -> Result<ForwarderThread> {
        let mut d = Daemon::bind(cfg).context("binding the forwarder")?;
        let ready = d.ready_line();
        let udp: SocketAddr = ready
            .split(' ')
            .find_map(|f| f.strip_prefix("udp="))
            .ok_or_else(|| anyhow!("the forwarder has no UDP listener"))?
            .parse()
            .context("the forwarder's UDP address")?;
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let handle = std::thread::Builder::new()
            .name("ndn-forwarder".into())
            .spawn(move || {
                let r = d.run(|| s.load(Ordering::Relaxed));
                (d, r)
            })
            .context("starting the forwarder thread")?;
        Ok(ForwarderThread {
            stop,
            handle: Some(handle),
            udp,
        })
    }

    /// Stop it; the daemon (its counters) back.
    pub fn stop(mut self) -> Result<Daemon> {
        self.stop.store(true, Ordering::Relaxed);
        let h = self
            .handle
            .take()
            .ok_or_else(|| anyhow!("already stopped"))?;
        let (d, r) = h
            .join()
            .map_err(|_| anyhow!("the forwarder thread panicked"))?;
        r.context("forwarder loop")?;
        Ok(d)
    }
}

impl Drop for ForwarderThread {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// The producer on a thread of this process.
pub struct ProducerThread {
    stop: Arc<AtomicBool>,
    handle: Option<JoinHandle<Result<ProducerCounters, nexthop_ndnd::tools::ToolError>>>,
}

impl ProducerThread {
    /// Register `prefix` with the forwarder at `fwd` (waits for the
    /// answer), then serve `content` on a thread.
    pub fn start(fwd: SocketAddr, prefix: Name, content: Content) -> Result<ProducerThread> {
        ProducerThread::start_with(fwd, prefix, content, true)
    }

    /// [`ProducerThread::start`], with UDP GSO and GRO only when `gso`.
    pub fn start_with(
        fwd: SocketAddr,
        prefix: Name,
        content: Content,
        gso: bool,
    ) -> Result<ProducerThread> {
        let mut p = Producer::start_with(fwd, prefix.clone(), content, gso)
            .map_err(|e| anyhow!("producer for {prefix}: {e}"))?;
        let stop = Arc::new(AtomicBool::new(false));
        let s = stop.clone();
        let handle = std::thread::Builder::new()
            .name("ndn-producer".into())
            .spawn(move || p.run(&s))
            .context("starting the producer thread")?;
        Ok(ProducerThread {
            stop,
            handle: Some(handle),
        })
    }

    /// Stop it; its counters.
    pub fn stop(mut self) -> Result<ProducerCounters> {
        self.stop.store(true, Ordering::Relaxed);
        let h = self
            .handle
            .take()
            .ok_or_else(|| anyhow!("already stopped"))?;
        h.join()
            .map_err(|_| anyhow!("the producer thread panicked"))?
            .map_err(|e| anyhow!("producer: {e}"))
    }
}

impl Drop for ProducerThread {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        if let Some(h) = self.handle.take() {
            let _ = h.join();
        }
    }
}

/// The forwarder's drops by reason, the non-zero ones (all in JSON).
pub fn drops_text(c: &FwCounters) -> String {
    let v: Vec<String> = DropReason::ALL
        .iter()
        .filter(|&&r| c.drops.get(r) > 0)
        .map(|&r| format!("{}={}", r.as_str(), c.drops.get(r)))
        .collect();
    if v.is_empty() {
        "none".into()
    } else {
        v.join(" ")
    }
}

/// The forwarder's drops by reason as a JSON object (every reason).
pub fn drops_json(c: &FwCounters) -> serde_json::Value {
    let mut m = serde_json::Map::new();
    for r in DropReason::ALL {
        m.insert(r.as_str().into(), c.drops.get(r).into());
    }
    m.insert("total".into(), c.drops.total().into());
    serde_json::Value::Object(m)
}

/// The interop venv's python (python-ndn 0.5.2): `explicit`, else
/// `NEXTHOP_INTEROP_PYTHON`, else `target/interop-venv/bin/python` under
/// the working directory or beside this executable's target directory.
pub fn find_python(explicit: Option<&PathBuf>) -> Option<PathBuf> {
    if let Some(p) = explicit {
        return Some(p.clone());
    }
    if let Some(p) = std::env::var_os("NEXTHOP_INTEROP_PYTHON") {
        return Some(PathBuf::from(p));
    }
    let mut candidates = vec![PathBuf::from("target/interop-venv/bin/python")];
    if let Ok(exe) = std::env::current_exe() {
        // target/<profile>/nexthop -> target/interop-venv
        if let Some(target) = exe.parent().and_then(|p| p.parent()) {
            candidates.push(target.join("interop-venv/bin/python"));
        }
    }
    candidates.into_iter().find(|p| p.exists())
}
