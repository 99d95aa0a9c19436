//! `nexthop ndn lab`: the NDN demo. A forwarder, a producer of a
//! segmented object and N consumers over loopback UDP; every consumer
//! fetches the whole object by segments through the forwarder and it is
//! compared byte for byte with the source.
//!
//! Contract (outside tests rely on it): the last line is `ndn lab: PASS`
//! (exit 0) or `ndn lab: FAIL ...` (non-zero exit); with `--json` one
//! object with at least `pass`, `bytes`, `segments`, `consumers` (each
//! with `ok`, `seconds`, `retransmitted`), `interests` (sent by the
//! consumers), `interests_per_s`, `forwarder_packets_in`,
//! `satisfied`, `cs_hits`, `pit_entries` and `drops` (by reason, with
//! `total`).

use std::path::PathBuf;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Context, Result};
use clap::Args;
use nexthop_ndnd::tools::consumer::{Consumer, ConsumerConfig, ConsumerStats, Fetched};
use nexthop_ndnd::tools::producer::{Content, SegmentedObject};
use nexthop_ndnd::NdndConfig;
use nexthop_wire::ndn::Name;
use rand::{RngCore, SeedableRng};

use super::{drops_json, drops_text, ForwarderThread, ProducerThread};

/// `ndn lab` arguments.
#[derive(Debug, Args)]
pub struct LabArgs {
    /// Size of the random object in bytes (ignored with --file).
    #[arg(long, value_name = "BYTES", default_value_t = 4 << 20)]
    size: usize,
    /// Serve this file instead of random bytes.
    #[arg(long, value_name = "FILE")]
    file: Option<PathBuf>,
    /// Consumers fetching the object at the same time.
    #[arg(long, value_name = "N", default_value_t = 3)]
    consumers: usize,
    /// Segment payload in bytes.
    #[arg(long, value_name = "BYTES", default_value_t = 4096)]
    segment: usize,
    /// Interests outstanding per consumer.
    #[arg(long, value_name = "W", default_value_t = 32)]
    window: usize,
    /// Content Store capacity of the forwarder, in packets.
    #[arg(long, value_name = "N", default_value_t = 65536)]
    cs_packets: usize,
    /// Seed of the random object.
    #[arg(long, value_name = "S", default_value_t = 1)]
    seed: u64,
    /// Give up after this many seconds.
    #[arg(long, value_name = "S", default_value_t = 120)]
    timeout: u64,
    /// Write the first consumer's copy here.
    #[arg(long, value_name = "FILE")]
    out: Option<PathBuf>,
    /// Print one JSON object.
    #[arg(long)]
    json: bool,
}

const PREFIX: &str = "/nexthop/lab/object";

/// Run `ndn lab`.
pub fn run(a: &LabArgs) -> Result<()> {
    if !(1..=64).contains(&a.consumers) {
        return Err(anyhow!("--consumers must be in 1..=64"));
    }
    if a.file.is_none() && a.size > 1 << 30 {
        return Err(anyhow!("--size must be at most 1 GiB"));
    }
    let source = match &a.file {
        Some(p) => std::fs::read(p).with_context(|| format!("{}", p.display()))?,
        None => {
            let mut v = vec![0u8; a.size];
            rand::rngs::StdRng::seed_from_u64(a.seed).fill_bytes(&mut v);
            v
        }
    };
    let prefix = Name::from_uri(PREFIX).map_err(|e| anyhow!("{e}"))?;
    let version = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(1, |d| d.as_millis() as u64);
    let object = SegmentedObject::new(&prefix, version, &source, a.segment, 60_000)
        .map_err(|e| anyhow!("--segment: {e}"))?;
    let segments = object.segment_count();
    let cfg = ConsumerConfig {
        window: a.window,
        lifetime_ms: 2000,
        rto: Duration::from_millis(500),
        max_retries: 8,
        ..ConsumerConfig::default()
    };
    cfg.validate().map_err(|e| anyhow!("{e}"))?;

    let fwd = ForwarderThread::start(NdndConfig {
        udp: Some("127.0.0.1:0".parse()?),
        cs_packets: a.cs_packets,
        ..NdndConfig::default()
    })?;
    let producer = ProducerThread::start(fwd.udp, prefix.clone(), Content::Object(object))?;
    if !a.json {
        println!(
            "ndn lab: forwarder udp={} (1 forwarding thread), producer of {} ({} bytes, {} segments \
             of {} B), {} consumer(s), window {}",
            fwd.udp,
            PREFIX,
            source.len(),
            segments,
            a.segment,
            a.consumers,
            a.window
        );
    }
    let deadline = Duration::from_secs(a.timeout.max(1));
    let mut handles = Vec::new();
    let t0 = Instant::now();
    for _ in 0..a.consumers {
        let mut c = Consumer::connect(fwd.udp, cfg).map_err(|e| anyhow!("consumer: {e}"))?;
        let p = prefix.clone();
        handles.push(std::thread::spawn(move || c.fetch(&p, deadline)));
    }
    let results: Vec<Result<(Fetched, ConsumerStats), String>> = handles
        .into_iter()
        .map(|h| match h.join() {
            Ok(r) => r.map_err(|e| e.to_string()),
            Err(_) => Err("consumer thread panicked".into()),
        })
        .collect();
    let wall = t0.elapsed();
    let pc = producer.stop()?;
    let d = fwd.stop()?;
    let fc = *d.core().fw_counters();
    let pit = d.core().pit_len();
    // Interests the consumers sent (retransmissions included): every one
    // reaches the forwarder, which has no single counter of them (an
    // aggregated Interest skips its CS lookup).
    let interests: u64 = results
        .iter()
        .filter_map(|r| r.as_ref().ok())
        .map(|(_, s)| s.sent)
        .sum();
    let packets_in = d.core().counters().packets_in;
    let per_s = interests as f64 / wall.as_secs_f64().max(1e-9);

    let mut pass = true;
    let mut rows = Vec::new();
    for (k, r) in results.iter().enumerate() {
        match r {
            Ok((f, s)) => {
                let ok = f.bytes == source;
                pass &= ok;
                rows.push((k, ok, s.elapsed.as_secs_f64(), s.retransmitted, None));
            }
            Err(e) => {
                pass = false;
                rows.push((k, false, 0.0, 0, Some(e.clone())));
            }
        }
    }
    if let (Some(out), Some(Ok((f, _)))) = (&a.out, results.first()) {
        crate::textio::write_atomic(out, &f.bytes)?;
    }
    if a.json {
        let v = serde_json::json!({
            "pass": pass,
            "bytes": source.len(),
            "segments": segments,
            "segment_size": a.segment,
            "window": a.window,
            "seconds": wall.as_secs_f64(),
            "consumers": rows.iter().map(|(k, ok, secs, re, err)| serde_json::json!({
                "consumer": k,
                "ok": ok,
                "seconds": secs,
                "retransmitted": re,
                "error": err,
            })).collect::<Vec<_>>(),
            "interests": interests,
            "interests_per_s": per_s,
            "forwarder_packets_in": packets_in,
            "satisfied": fc.satisfied,
            "cs_hits": fc.cs_hits,
            "cs_misses": fc.cs_misses,
            "aggregated": fc.suppressed,
            "pit_entries": pit,
            "producer_interests": pc.interests,
            "producer_data": pc.data,
            "drops": drops_json(&fc),
        });
        println!("{v}");
    } else {
        for (k, ok, secs, re, err) in &rows {
            match err {
                None => {
                    println!(
                    "consumer {k}: {} bytes in {secs:.2} s ({:.1} MB/s), {re} retransmitted, {}",
                    source.len(),
                    source.len() as f64 / secs.max(1e-9) / 1e6,
                    if *ok { "identical to the source" } else { "DIFFERS from the source" }
                )
                }
                Some(e) => println!("consumer {k}: failed: {e}"),
            }
        }
        println!(
            "forwarder: {interests} Interests in {:.2} s ({per_s:.0}/s), {packets_in} packets in, \
             satisfied {} from the producer, {} CS hits, {} aggregated, PIT entries now {pit}, \
             producer answered {}",
            wall.as_secs_f64(),
            fc.satisfied,
            fc.cs_hits,
            fc.suppressed,
            pc.data
        );
        println!("drops by reason: {}", drops_text(&fc));
    }
    if pass {
        if !a.json {
            println!("ndn lab: PASS");
        }
        Ok(())
    } else {
        if !a.json {
            println!("ndn lab: FAIL (a consumer did not get the object intact)");
        }
        Err(anyhow!("ndn lab: FAIL"))
    }
}
