//! `nexthop ndn bench`: satisfied Interests per second through one
//! forwarding thread over loopback UDP.
//!
//! Contract (outside tests rely on it): text lines `satisfied: N (R/s)`,
//! `rtt: p50 N us, p99 N us`, `drops: ...`; with `--json` one object with
//! at least `satisfied`, `satisfied_per_s`, `rtt_p50_us`, `rtt_p99_us`,
//! `nacked`, `timed_out`, `drops` (by reason, with `total`) and `python`
//! (`null` when python-ndn was not run).

use std::net::SocketAddr;
use std::path::PathBuf;
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use anyhow::{anyhow, Result};
use clap::Args;
use nexthop_ndnd::tools::consumer::{Consumer, ConsumerConfig, ConsumerStats};
use nexthop_ndnd::tools::producer::{Content, DataTemplate};
use nexthop_ndnd::NdndConfig;
use nexthop_wire::ndn::Name;

use crate::threadcpu;

use super::{drops_json, drops_text, find_python, ForwarderThread, ProducerThread};

const PY_CONSUMER: &str = include_str!("pyconsumer.py");

/// `ndn bench` arguments.
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// Use the forwarder listening on this UDP address instead of starting
    /// one (its counters are then not shown).
    #[arg(long, value_name = "ADDR:PORT")]
    forwarder: Option<SocketAddr>,
    /// Seconds of traffic.
    #[arg(long, value_name = "S", default_value_t = 5.0)]
    duration: f64,
    /// Interests outstanding per consumer.
    #[arg(long, value_name = "W", default_value_t = 256)]
    window: usize,
    /// Consumers (each on its own thread and socket).
    #[arg(long, value_name = "N", default_value_t = 1)]
    consumers: usize,
    /// Data payload in bytes.
    #[arg(long, value_name = "BYTES", default_value_t = 100)]
    payload: usize,
    /// Content Store capacity of the started forwarder, in packets.
    #[arg(long, value_name = "N", default_value_t = 65536)]
    cs_packets: usize,
    /// Prefix the producer registers.
    #[arg(long, value_name = "NAME", default_value = "/nexthop/bench")]
    prefix: String,
    /// python of a venv with python-ndn (default: NEXTHOP_INTEROP_PYTHON,
    /// else target/interop-venv/bin/python when present).
    #[arg(long, value_name = "PATH")]
    python: Option<PathBuf>,
    /// Do not measure the python-ndn consumer.
    #[arg(long)]
    no_python: bool,
    /// Seconds of the python-ndn consumer's run.
    #[arg(long, value_name = "S", default_value_t = 3.0)]
    python_duration: f64,
    /// Print one JSON object.
    #[arg(long)]
    json: bool,
    /// Plain `sendmmsg`/`recvmmsg` only: no UDP GSO/GRO in our consumer,
    /// producer and (when started here) forwarder.
    #[arg(long)]
    no_gso: bool,
}

struct PyRate {
    satisfied: u64,
    nacked: u64,
    timed_out: u64,
    elapsed: f64,
    window: usize,
}

/// Run `ndn bench`.
pub fn run(a: &BenchArgs) -> Result<()> {
    if !(a.duration > 0.0 && a.duration <= 3600.0) {
        return Err(anyhow!("--duration must be in (0, 3600] seconds"));
    }
    if !(a.python_duration > 0.0 && a.python_duration <= 3600.0) {
        return Err(anyhow!("--python-duration must be in (0, 3600] seconds"));
    }
    if !(1..=64).contains(&a.consumers) {
        return Err(anyhow!("--consumers must be in 1..=64"));
    }
    if a.payload > 8000 {
        return Err(anyhow!("--payload must be at most 8000 bytes"));
    }
    let prefix = Name::from_uri(&a.prefix).map_err(|e| anyhow!("--prefix: {e}"))?;
    let fwd = match a.forwarder {
        Some(_) => None,
        None => Some(ForwarderThread::start(NdndConfig {
            udp: Some("127.0.0.1:0".parse()?),
            cs_packets: a.cs_packets,
            udp_gso: !a.no_gso,
            ..NdndConfig::default()
        })?),
    };
    let addr = match &fwd {
        Some(f) => f.udp,
        None => a.forwarder.ok_or_else(|| anyhow!("no forwarder address"))?,
    };
    let producer = ProducerThread::start_with(
        addr,
        prefix.clone(),
        Content::Sized(DataTemplate::new(&vec![0x5a; a.payload], 10_000)),
        !a.no_gso,
    )?;
    let cfg = ConsumerConfig {
        window: a.window,
        lifetime_ms: 2000,
        rto: Duration::from_millis(1000),
        max_retries: 0,
        gso: !a.no_gso,
        ..ConsumerConfig::default()
    };
    cfg.validate().map_err(|e| anyhow!("{e}"))?;
    let duration = Duration::from_secs_f64(a.duration);
    let mut consumers = Vec::new();
    for _ in 0..a.consumers {
        consumers.push(Consumer::connect(addr, cfg).map_err(|e| anyhow!("consumer: {e}"))?);
    }
    let me = std::process::id() as i32;
    // The consumers start together once the first CPU sample is taken
    // (a thread must exist in both samples to be counted).
    let go = std::sync::Arc::new(std::sync::Barrier::new(a.consumers + 1));
    // The consumers stay alive until the closing CPU sample is taken (a
    // fast window drains in well under a millisecond).
    let hold = std::sync::Arc::new(std::sync::Barrier::new(a.consumers + 1));
    let mut handles = Vec::new();
    for (k, mut c) in consumers.into_iter().enumerate() {
        let p = prefix.clone();
        let (go, hold) = (go.clone(), hold.clone());
        handles.push(
            std::thread::Builder::new()
                .name(format!("ndn-consumer-{k}"))
                .spawn(move || {
                    go.wait();
                    let r = c.bench(&p, duration);
                    hold.wait();
                    r
                })?,
        );
    }
    let cpu0 = threadcpu::sample(&[me]);
    go.wait();
    let t0 = Instant::now();
    // The CPU sample closes at the end of the measured time.
    std::thread::sleep((t0 + duration).saturating_duration_since(Instant::now()));
    let cpu = threadcpu::between(&cpu0, &threadcpu::sample(&[me]));
    hold.wait();
    let mut stats = ConsumerStats::default();
    for h in handles {
        let s = h
            .join()
            .map_err(|_| anyhow!("a consumer thread panicked"))?
            .map_err(|e| anyhow!("consumer: {e}"))?;
        stats.merge(&s);
    }
    let wall = t0.elapsed();
    let fwd_cores = threadcpu::sum_prefix(&cpu, me, "ndn-forwarder");
    let prod_cores = threadcpu::sum_prefix(&cpu, me, "ndn-producer");
    let cons_cores = threadcpu::sum_prefix(&cpu, me, "ndn-consumer");
    // Forwarder CPU time per satisfied Interest (in-process forwarder only).
    let fwd_us = (fwd.is_some() && stats.satisfied_in_time > 0)
        .then(|| fwd_cores * duration.as_secs_f64() * 1e6 / stats.satisfied_in_time as f64);
    let py = if a.no_python {
        None
    } else {
        find_python(a.python.as_ref())
            .map(|py| python_rate(&py, addr, &a.prefix, a.python_duration))
    };
    let pc = producer.stop()?;
    let daemon = fwd.map(|f| f.stop()).transpose()?;
    let fc = daemon.as_ref().map(|d| *d.core().fw_counters());
    let py = py.transpose()?;

    let p50 = stats.rtt.quantile_us(0.5);
    let p99 = stats.rtt.quantile_us(0.99);
    if a.json {
        let mut drops = fc.as_ref().map_or_else(
            || serde_json::json!({"total": stats.timed_out + stats.nacked}),
            drops_json,
        );
        drops["consumer_timed_out"] = stats.timed_out.into();
        drops["consumer_nacked"] = stats.nacked.into();
        let v = serde_json::json!({
            "forwarder": a.forwarder.map_or_else(|| format!("in-process udp={addr}"), |x| x.to_string()),
            "forwarding_threads": 1,
            "consumers": a.consumers,
            "window": a.window,
            "payload": a.payload,
            "duration_s": a.duration,
            "sent": stats.sent,
            "satisfied": stats.satisfied,
            "satisfied_per_s": stats.rate(),
            "rtt_p50_us": p50,
            "rtt_p99_us": p99,
            "nacked": stats.nacked,
            "timed_out": stats.timed_out,
            "retransmitted": stats.retransmitted,
            "unexpected": stats.unexpected,
            "producer_data": pc.data,
            "cores": {"forwarder": fwd_cores, "producer": prod_cores, "consumers": cons_cores},
            "forwarder_us_per_satisfied": fwd_us,
            "forwarder_one_core_per_s": fwd_us.map(|u| 1e6 / u.max(1e-9)),
            "drops": drops,
            "forwarder_satisfied": fc.map(|c| c.satisfied),
            "forwarder_cs_hits": fc.map(|c| c.cs_hits),
            "forwarder_pit_entries": daemon.as_ref().map(|d| d.core().pit_len()),
            "python": py.as_ref().map(|p| serde_json::json!({
                "satisfied": p.satisfied,
                "nacked": p.nacked,
                "timed_out": p.timed_out,
                "elapsed_s": p.elapsed,
                "window": p.window,
                "satisfied_per_s": p.satisfied as f64 / p.elapsed.max(1e-9),
            })),
        });
        println!("{v}");
        return Ok(());
    }
    println!(
        "nexthop ndn bench: forwarder {} (1 forwarding thread), {} consumer(s), window {}, \
         payload {} B, {:.1} s (wall {:.1} s)",
        a.forwarder
            .map_or_else(|| format!("in-process udp={addr}"), |x| x.to_string()),
        a.consumers,
        a.window,
        a.payload,
        a.duration,
        wall.as_secs_f64()
    );
    println!(
        "satisfied: {} ({:.0}/s)  nacked: {}  timed out: {}  sent: {}",
        stats.satisfied,
        stats.rate(),
        stats.nacked,
        stats.timed_out,
        stats.sent
    );
    println!("rtt: p50 {p50} us, p99 {p99} us");
    match fwd_us {
        Some(u) => println!(
            "cpu: forwarder thread {fwd_cores:.2} cores ({u:.2} us per satisfied Interest: \
             {:.0}/s if it had a core to itself), producer {prod_cores:.2}, consumers \
             {cons_cores:.2}",
            1e6 / u.max(1e-9)
        ),
        None => println!(
            "cpu: producer {prod_cores:.2} cores, consumers {cons_cores:.2} (forwarder external)"
        ),
    }
    match &fc {
        Some(c) => println!(
            "drops: forwarder {} (total {}), consumer timeouts {}",
            drops_text(c),
            c.drops.total(),
            stats.timed_out
        ),
        None => println!("drops: consumer timeouts {}", stats.timed_out),
    }
    match &py {
        Some(p) => println!(
            "python-ndn consumer: {:.0} satisfied/s ({} in {:.1} s, {} Interests outstanding)",
            p.satisfied as f64 / p.elapsed.max(1e-9),
            p.satisfied,
            p.elapsed,
            p.window
        ),
        None if a.no_python => println!("python-ndn consumer: not run (--no-python)"),
        None => println!(
            "python-ndn consumer: not run (no python-ndn venv; `bash scripts/setup-interop.sh`)"
        ),
    }
    Ok(())
}

/// Run the python-ndn consumer against the same forwarder and producer.
fn python_rate(py: &PathBuf, fwd: SocketAddr, prefix: &str, secs: f64) -> Result<PyRate> {
    let window = 64;
    let out = Command::new(py)
        .arg("-c")
        .arg(PY_CONSUMER)
        .args([
            &format!("udp://{fwd}"),
            prefix,
            &format!("{secs}"),
            &window.to_string(),
        ])
        .stdin(Stdio::null())
        .output()
        .map_err(|e| anyhow!("running {}: {e}", py.display()))?;
    let text = String::from_utf8_lossy(&out.stdout);
    let line = text.lines().find(|l| l.starts_with("satisfied "));
    let (Some(line), true) = (line, out.status.success()) else {
        return Err(anyhow!(
            "the python-ndn consumer failed: {}{}",
            text.trim(),
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    };
    let f: Vec<&str> = line.split_whitespace().collect();
    let num = |k: usize| -> Result<f64> {
        f.get(k)
            .and_then(|v| v.parse::<f64>().ok())
            .ok_or_else(|| anyhow!("python-ndn consumer: bad line {line:?}"))
    };
    Ok(PyRate {
        satisfied: num(1)? as u64,
        nacked: num(3)? as u64,
        timed_out: num(5)? as u64,
        elapsed: num(7)?,
        window,
    })
}
