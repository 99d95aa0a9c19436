//! `nexthop ndn repo bench`: writes and reads per second of a Repo through
//! the forwarder, measured with a fast Rust client that speaks
//! ndn-python-repo 0.3's command protocol, so that the same run can drive
//! `nexthop ndn repo` and ndn-python-repo's own server.
//!
//! Each client (a thread with its own face) owns one object of `--count`
//! Data packets of `--size` content bytes, `PREFIX/<run>/c<k>/seg=i`
//! (FinalBlockId, DigestSha256, built before the clock starts):
//!
//! 1. **write**: it registers its publisher prefix and the object's name,
//!    publishes an insert command (notify Interest `REPO/insert/notify`,
//!    then the command message when the Repo fetches it), answers the
//!    Repo's segment Interests from memory and polls `REPO/insert check`
//!    every [`CHECK_EVERY`] until status 200 with every packet counted (a
//!    404 before the process was seen running is waited out for
//!    [`UNKNOWN_GRACE`]: ndn-python-repo creates the process after it
//!    acknowledged the command). The
//!    write time runs from the notify Interest to that status.
//! 2. **read**: after every client has written, each unregisters its
//!    object's name (so that Interests reach the Repo) and fetches its
//!    packets by exact name with `--window` Interests in flight (by
//!    default [`read_window`]: 256 for 100 B packets, 64 for 8000 B),
//!    byte-comparing each answer with the packet it wrote.
//!
//! A phase's rate is all clients' packets over the time from the first
//! client's start to the last one's end.

use std::sync::Barrier;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use anyhow::{anyhow, bail, Result};
use clap::Args;
use nexthop_ndnd::tools::rand_nonce;
use nexthop_repo::command::{CommandParam, CommandResponse, NotifyParam};
use nexthop_repo::segment_object;
use nexthop_wire::ndn::{Data, Interest, Name, NameComponent, NetPacket};

use super::face::{net_packet, Face};
use super::{name, target, RIB_TIMEOUT};

/// How often a writer asks for its insert's status.
pub const CHECK_EVERY: Duration = Duration::from_millis(5);
/// A read Interest unanswered for this long is sent again.
const READ_RTO: Duration = Duration::from_millis(1000);
/// Tries per read Interest before the read fails.
const READ_TRIES: u32 = 5;
/// How long a check may answer 404 (no such process) before the process
/// was seen running.
const UNKNOWN_GRACE: Duration = Duration::from_secs(2);
/// A notify Interest unanswered for this long is sent again.
const NOTIFY_RTO: Duration = Duration::from_millis(1000);

/// `nexthop ndn repo bench ...`
#[derive(Debug, Args)]
pub struct BenchArgs {
    /// The Repo's name (where its insert commands go).
    #[arg(long)]
    pub repo: String,
    /// The forwarder: `unix:///PATH` or `udp://HOST:PORT`.
    #[arg(long, default_value = "unix:///run/nfd/nfd.sock")]
    pub forwarder: String,
    /// Objects are named `PREFIX/<run>/c<k>`; the Repo must serve PREFIX
    /// (or be given it with `--register-prefix`).
    #[arg(long)]
    pub prefix: String,
    /// Data packets per client.
    #[arg(long, default_value_t = 10_000)]
    pub count: u64,
    /// Content bytes per Data packet.
    #[arg(long, default_value_t = 100)]
    pub size: usize,
    /// Read Interests in flight per client (default: [`read_window`] of
    /// `--size`).
    #[arg(long)]
    pub window: Option<usize>,
    /// Clients, each a thread with its own face and object.
    #[arg(long, default_value_t = 1)]
    pub clients: usize,
    /// Send PREFIX as the command's RegisterPrefix.
    #[arg(long)]
    pub register_prefix: bool,
    /// Seconds each phase may take before the bench fails.
    #[arg(long, default_value_t = 300)]
    pub timeout_s: u64,
}

/// Bytes of Data a client's reads keep in flight by default.
pub const READ_BYTES_IN_FLIGHT: usize = 512 << 10;

/// The default read window for packets of `size` content bytes: about
/// [`READ_BYTES_IN_FLIGHT`] of Data, within 64 ..= 256 Interests (256 of
/// 100 B packets, 64 of 8000 B ones). Many small packets per wake-up keep
/// the Repo and the forwarder busy; 256 packets of 8000 B (2 MB) in flight
/// overran the path and the reads waited out retransmissions.
pub fn read_window(size: usize) -> usize {
    (READ_BYTES_IN_FLIGHT / (size + 100)).clamp(64, 256)
}

/// When one client's phase started and ended.
type Span = (Instant, Instant);

struct Client {
    face: Face,
    repo: Name,
    prefix: Name,
    object: Name,
    publisher: Name,
    packets: Vec<Vec<u8>>,
    register_prefix: bool,
    timeout: Duration,
    nonce: u32,
}

fn with(n: &Name, c: &[u8]) -> Name {
    let mut n = n.clone();
    n.push(&NameComponent::generic(c.to_vec()));
    n
}

fn segment_of(object: &Name, n: &Name) -> Option<u64> {
    if n.len() != object.len() + 1 || !object.is_prefix_of(n) {
        return None;
    }
    n.get(object.len())?.as_segment()
}

impl Client {
    fn next_nonce(&mut self) -> u32 {
        self.nonce = self
            .nonce
            .wrapping_mul(0x2c1b_3c6d)
            .wrapping_add(0x297a_2d39);
        self.nonce
    }

    fn interest(&mut self, name: Name, lifetime: Duration) -> Vec<u8> {
        let mut i = Interest::new(name);
        i.nonce = Some(self.next_nonce());
        i.lifetime_ms = Some(lifetime.as_millis() as u64);
        i.to_wire()
    }

    /// Insert the object through the command protocol; returns when the
    /// Repo reports status 200.
    fn write(&mut self) -> Result<Span> {
        let pid = self.object.to_string().into_bytes();
        let msg_nonce = rand_nonce().to_be_bytes().to_vec();
        let param = CommandParam {
            name: Some(self.object.clone()),
            start_block_id: Some(0),
            end_block_id: Some(self.packets.len() as u64 - 1),
            process_id: Some(pid.clone()),
            register_prefix: self.register_prefix.then(|| self.prefix.clone()),
            check_prefix: Some(self.publisher.clone()),
            ..CommandParam::default()
        };
        let mut msg_name = with(&self.publisher, b"msg");
        for c in self.repo.components() {
            msg_name.push(&c.to_owned());
        }
        let msg_name = with(&with(&msg_name, b"insert"), &msg_nonce);
        let mut msg = Data::new(msg_name.clone(), param.encode());
        msg.sign_digest_sha256();
        let msg = msg.to_wire();
        let notify = {
            let mut i = Interest::new(with(&with(&self.repo, b"insert"), b"notify"));
            i.set_app_parameters(
                NotifyParam {
                    publisher_prefix: self.publisher.clone(),
                    nonce: msg_nonce,
                    forwarding_hint: None,
                }
                .encode(),
            );
            i.lifetime_ms = Some(NOTIFY_RTO.as_millis() as u64);
            i
        };
        let check_name = with(
            &with(&self.repo, b"insert check"),
            &CommandParam {
                process_id: Some(pid),
                ..CommandParam::default()
            }
            .encode(),
        );
        let start = Instant::now();
        let end = start + self.timeout;
        let mut n = notify.clone();
        n.nonce = Some(self.next_nonce());
        self.face.send_all(&[n.to_wire()])?;
        let (mut asked, mut next_notify) = (false, start + NOTIFY_RTO);
        let mut next_check = start + CHECK_EVERY;
        let mut running = false;
        let (mut batch, mut out) = (Vec::new(), Vec::new());
        loop {
            let now = Instant::now();
            if now >= end {
                bail!("{}: no status 200 within {:?}", self.object, self.timeout);
            }
            if !asked && now >= next_notify {
                let mut n = notify.clone();
                n.nonce = Some(self.next_nonce());
                out.push(n.to_wire());
                next_notify = now + NOTIFY_RTO;
            }
            if asked && now >= next_check {
                let mut i = Interest::new(check_name.clone());
                i.must_be_fresh = true;
                i.nonce = Some(self.next_nonce());
                i.lifetime_ms = Some(1000);
                out.push(i.to_wire());
                next_check = now + CHECK_EVERY;
            }
            self.face.send_all(&out)?;
            out.clear();
            let wake = if asked { next_check } else { next_notify };
            batch.clear();
            self.face.recv_batch(wake.min(end), &mut batch)?;
            for w in batch.drain(..) {
                match net_packet(w) {
                    Some((NetPacket::Interest(i), _)) => {
                        if i.name == msg_name {
                            asked = true;
                            out.push(msg.clone());
                        } else if let Some(s) = segment_of(&self.object, &i.name) {
                            if let Some(p) = self.packets.get(s as usize) {
                                out.push(p.clone());
                            }
                        }
                    }
                    Some((NetPacket::Data(d), _)) if d.name == check_name => {
                        let r = CommandResponse::decode(d.content.as_deref().unwrap_or_default())
                            .map_err(|e| anyhow!("check answer: {e}"))?;
                        match r.status_code {
                            Some(300) => running = true,
                            // ndn-python-repo starts the process after it
                            // acknowledged the message: a check may come first.
                            Some(404) if !running && start.elapsed() < UNKNOWN_GRACE => {}
                            Some(200) if r.insert_num == Some(self.packets.len() as u64) => {
                                return Ok((start, Instant::now()));
                            }
                            c => bail!(
                                "{}: insert status {c:?} insert_num {:?}",
                                self.object,
                                r.insert_num
                            ),
                        }
                    }
                    _ => {}
                }
            }
        }
    }

    /// Fetch every packet by exact name, `window` in flight; each answer
    /// must equal the packet written.
    fn read(&mut self, window: usize) -> Result<Span> {
        let count = self.packets.len();
        let start = Instant::now();
        let end = start + self.timeout;
        // Per segment: when its Interest was sent and how often (0: not yet).
        let mut sent: Vec<(Instant, u32)> = vec![(start, 0); count];
        let mut done = vec![false; count];
        let (mut next, mut got, mut in_flight) = (0usize, 0usize, 0usize);
        let (mut batch, mut out) = (Vec::new(), Vec::new());
        let mut oldest = 0usize;
        while got < count {
            let now = Instant::now();
            if now >= end {
                bail!(
                    "{}: {got} of {count} read within {:?}",
                    self.object,
                    self.timeout
                );
            }
            while in_flight < window && next < count {
                let mut n = self.object.clone();
                n.push(&NameComponent::segment(next as u64));
                out.push(self.interest(n, READ_RTO * 2));
                sent[next] = (now, 1);
                in_flight += 1;
                next += 1;
            }
            // Retransmit what timed out, oldest first.
            while oldest < next && done[oldest] {
                oldest += 1;
            }
            for s in oldest..next {
                if done[s] || now.duration_since(sent[s].0) < READ_RTO {
                    continue;
                }
                if sent[s].1 >= READ_TRIES {
                    bail!(
                        "{}: segment {s} unanswered after {READ_TRIES} tries",
                        self.object
                    );
                }
                let mut n = self.object.clone();
                n.push(&NameComponent::segment(s as u64));
                out.push(self.interest(n, READ_RTO * 2));
                sent[s] = (now, sent[s].1 + 1);
            }
            self.face.send_all(&out)?;
            out.clear();
            batch.clear();
            self.face
                .recv_batch((now + Duration::from_millis(100)).min(end), &mut batch)?;
            for w in batch.drain(..) {
                let Some((NetPacket::Data(d), wire)) = net_packet(w) else {
                    continue;
                };
                let Some(s) = segment_of(&self.object, &d.name).map(|s| s as usize) else {
                    continue;
                };
                if s >= next || done[s] {
                    continue;
                }
                if wire != self.packets[s] {
                    bail!("{}: segment {s} differs from the packet written", d.name);
                }
                done[s] = true;
                got += 1;
                in_flight -= 1;
            }
        }
        Ok((start, Instant::now()))
    }
}

fn report(phase: &str, a: &BenchArgs, spans: &[Span]) {
    let first = spans.iter().map(|s| s.0).min();
    let last = spans.iter().map(|s| s.1).max();
    let (Some(first), Some(last)) = (first, last) else {
        return;
    };
    let secs = last.duration_since(first).as_secs_f64();
    let packets = a.count * spans.len() as u64;
    let rate = if secs > 0.0 {
        packets as f64 / secs
    } else {
        0.0
    };
    println!(
        "nexthop ndn repo bench: {phase} clients={} packets={packets} content={} seconds={secs:.3} packets_per_s={rate:.0}",
        spans.len(),
        a.size
    );
}

/// Run the bench (see the module docs); prints one line per phase.
pub fn run(a: &BenchArgs) -> Result<()> {
    let window = a.window.unwrap_or_else(|| read_window(a.size));
    if a.count == 0 || a.clients == 0 || window == 0 || a.size == 0 {
        bail!("--count, --clients, --window and --size must be at least 1");
    }
    if a.size > 8000 {
        bail!("--size {} does not fit a packet (at most 8000)", a.size);
    }
    let repo = name(&a.repo)?;
    let prefix = name(&a.prefix)?;
    let t = target(&a.forwarder)?;
    let run_id = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64)
        ^ u64::from(std::process::id());
    let run = format!("{run_id:016x}");
    let timeout = Duration::from_secs(a.timeout_s);
    let barrier = Barrier::new(a.clients);
    let results: Vec<Result<(Span, Span)>> = std::thread::scope(|sc| {
        let handles: Vec<_> = (0..a.clients)
            .map(|k| {
                let (repo, prefix, t, run, barrier) = (&repo, &prefix, &t, &run, &barrier);
                sc.spawn(move || {
                    let setup = || -> Result<Client> {
                        let object =
                            with(&with(prefix, run.as_bytes()), format!("c{k}").as_bytes());
                        let publisher = with(
                            &with(&Name::from_uri("/nexthop-repo-bench")?, run.as_bytes()),
                            format!("c{k}").as_bytes(),
                        );
                        let content: Vec<u8> = (0..a.count as usize * a.size)
                            .map(|i| (i as u64).wrapping_mul(2_654_435_761).to_le_bytes()[3])
                            .collect();
                        let packets = segment_object(&object, &content, a.size, 0);
                        let mut face = Face::connect(t)?;
                        face.rib("register", &publisher, RIB_TIMEOUT)?;
                        face.rib("register", &object, RIB_TIMEOUT)?;
                        Ok(Client {
                            face,
                            repo: repo.clone(),
                            prefix: prefix.clone(),
                            object,
                            publisher,
                            packets,
                            register_prefix: a.register_prefix,
                            timeout,
                            nonce: rand_nonce() ^ k as u32,
                        })
                    };
                    let mut c = setup();
                    barrier.wait();
                    let w = c
                        .as_mut()
                        .map_err(|e| anyhow!("{e}"))
                        .and_then(|c| c.write());
                    let unreg = match (&mut c, &w) {
                        (Ok(c), Ok(_)) => {
                            let o = c.object.clone();
                            c.face.rib("unregister", &o, RIB_TIMEOUT)
                        }
                        _ => Ok(()),
                    };
                    barrier.wait();
                    let r = match (&mut c, &w, unreg) {
                        (Ok(c), Ok(_), Ok(())) => c.read(window),
                        (_, _, Err(e)) => Err(e),
                        _ => Err(anyhow!("no write")),
                    };
                    Ok((w?, r?))
                })
            })
            .collect();
        handles
            .into_iter()
            .map(|h| {
                h.join()
                    .unwrap_or_else(|_| Err(anyhow!("a client panicked")))
            })
            .collect()
    });
    let mut writes = Vec::new();
    let mut reads = Vec::new();
    for r in results {
        let (w, r) = r?;
        writes.push(w);
        reads.push(r);
    }
    report("write", a, &writes);
    report("read", a, &reads);
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_default_read_window_keeps_about_half_a_megabyte_in_flight() {
        assert_eq!(read_window(100), 256);
        assert_eq!(read_window(8000), 64);
        assert_eq!(read_window(2000), 249);
        assert_eq!(read_window(1), 256);
    }
}
