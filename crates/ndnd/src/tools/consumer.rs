//! A batched UDP consumer: a window of Interests outstanding, timeouts and
//! retransmission, counts of what came back.
//!
//! * [`Consumer::bench`]: unique names `/prefix/<run>/seq=N` for a given
//!   time, the window kept full; satisfied, Nacked and timed-out Interests
//!   and the round-trip times are counted.
//! * [`Consumer::fetch`]: a segmented object `/prefix/v=V/seg=N` (as
//!   python-ndn's and ndn-tools' chunks tools publish it): a first Interest
//!   with CanBePrefix and MustBeFresh finds the version and the
//!   FinalBlockId, then the segments are fetched with the window full and
//!   joined.
//!
//! An Interest not answered within `rto` is sent again with a new Nonce,
//! at most `max_retries` times; a Nacked one likewise. In a fetch a
//! segment that runs out of retries fails the fetch; in a bench it counts
//! as timed out (or Nacked).

use std::collections::HashMap;
use std::net::SocketAddr;
use std::time::{Duration, Instant};

use nexthop_wire::ndn::{Data, Interest, Name, NameComponent};

use super::{decode_received, rand_nonce, Received, RttHistogram, ToolError, UdpFace};

/// Consumer settings.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ConsumerConfig {
    /// Interests outstanding at once, `1..=65536`.
    pub window: usize,
    /// InterestLifetime put in every Interest.
    pub lifetime_ms: u64,
    /// Resend an unanswered Interest after this long.
    pub rto: Duration,
    /// Resends of one Interest (after a timeout or a Nack) before giving up.
    pub max_retries: u32,
    /// Most segments a fetched object may announce (its FinalBlockId),
    /// checked before anything is allocated for them.
    pub max_segments: u64,
    /// Send with UDP GSO and receive with GRO where the kernel has them
    /// ([`crate::udp::send_batch_gso`]); the datagrams are the same.
    pub gso: bool,
}

impl Default for ConsumerConfig {
    fn default() -> Self {
        ConsumerConfig {
            window: 64,
            lifetime_ms: 4000,
            rto: Duration::from_millis(1000),
            max_retries: 3,
            max_segments: 1 << 20,
            gso: true,
        }
    }
}

impl ConsumerConfig {
    /// Check the ranges.
    pub fn validate(&self) -> Result<(), ToolError> {
        if !(1..=65536).contains(&self.window) {
            return Err(ToolError::Config(format!(
                "window {} not in 1..=65536",
                self.window
            )));
        }
        if self.lifetime_ms == 0 || self.rto.is_zero() {
            return Err(ToolError::Config(
                "the Interest lifetime and the retransmission timeout must be above 0".into(),
            ));
        }
        if self.max_segments == 0 {
            return Err(ToolError::Config("max_segments must be at least 1".into()));
        }
        Ok(())
    }
}

/// What a consumer counted.
#[derive(Debug, Clone, Default)]
pub struct ConsumerStats {
    /// Interests sent (retransmissions included).
    pub sent: u64,
    /// Interests answered with Data.
    pub satisfied: u64,
    /// Interests given up after Nacks (last reason counted in `nack_reasons`).
    pub nacked: u64,
    /// Nacks received, by reason code (0: none given).
    pub nack_reasons: Vec<(u64, u64)>,
    /// Interests given up after timeouts.
    pub timed_out: u64,
    /// Interests sent again.
    pub retransmitted: u64,
    /// Data or Nacks for nothing outstanding (late, duplicate, unknown).
    pub unexpected: u64,
    /// Datagrams that did not decode.
    pub bad: u64,
    /// Round-trip times of Interests answered on their first send.
    pub rtt: RttHistogram,
    /// Satisfied within the measured time (a bench's `duration`).
    pub satisfied_in_time: u64,
    /// The measured time.
    pub elapsed: Duration,
}

impl ConsumerStats {
    /// Satisfied Interests per second over the measured time.
    pub fn rate(&self) -> f64 {
        let s = self.elapsed.as_secs_f64();
        if s > 0.0 {
            self.satisfied_in_time as f64 / s
        } else {
            0.0
        }
    }

    fn count_nack(&mut self, code: u64) {
        match self.nack_reasons.iter_mut().find(|(c, _)| *c == code) {
            Some((_, n)) => *n += 1,
            None => self.nack_reasons.push((code, 1)),
        }
    }

    /// Add another consumer's counts (the measured time is the longest).
    pub fn merge(&mut self, o: &ConsumerStats) {
        self.sent += o.sent;
        self.satisfied += o.satisfied;
        self.nacked += o.nacked;
        for &(c, n) in &o.nack_reasons {
            for _ in 0..n {
                self.count_nack(c);
            }
        }
        self.timed_out += o.timed_out;
        self.retransmitted += o.retransmitted;
        self.unexpected += o.unexpected;
        self.bad += o.bad;
        self.rtt.merge(&o.rtt);
        self.satisfied_in_time += o.satisfied_in_time;
        self.elapsed = self.elapsed.max(o.elapsed);
    }
}

/// A fetched object.
#[derive(Debug, Clone)]
pub struct Fetched {
    /// `/prefix/v=VERSION`, from the first Data.
    pub versioned_name: Name,
    /// Segment count (FinalBlockId + 1).
    pub segments: u64,
    /// The joined content.
    pub bytes: Vec<u8>,
}

#[derive(Debug, Clone, Copy)]
struct Pending {
    sent: Instant,
    retries: u32,
}

/// One consumer on one UDP face.
#[derive(Debug)]
pub struct Consumer {
    face: UdpFace,
    cfg: ConsumerConfig,
    nonce: u32,
    stats: ConsumerStats,
    out: Vec<Vec<u8>>,
}

/// What the window loop does with an answer.
enum Outcome {
    Data(u64, Box<Data>),
    Nack(u64, u64),
}

impl Consumer {
    /// A consumer talking to the forwarder at `forwarder`.
    pub fn connect(forwarder: SocketAddr, cfg: ConsumerConfig) -> Result<Consumer, ToolError> {
        cfg.validate()?;
        Ok(Consumer {
            face: UdpFace::connect_with(forwarder, cfg.gso)?,
            cfg,
            nonce: rand_nonce(),
            stats: ConsumerStats::default(),
            out: Vec::new(),
        })
    }

    fn interest(&mut self, name: Name, can_be_prefix: bool, must_be_fresh: bool) -> Vec<u8> {
        self.nonce = self.nonce.wrapping_add(1);
        let mut i = Interest::new(name);
        i.nonce = Some(self.nonce);
        i.lifetime_ms = Some(self.cfg.lifetime_ms);
        i.can_be_prefix = can_be_prefix;
        i.must_be_fresh = must_be_fresh;
        i.to_wire()
    }

    fn flush(&mut self) -> Result<(), ToolError> {
        if self.out.is_empty() {
            return Ok(());
        }
        let n = self.face.send_batch(&self.out)?;
        self.stats.sent += n as u64;
        self.out.clear();
        Ok(())
    }

    /// Receive for up to `wait`; the answers keyed by `key` of the name
    /// (`None`: not one of ours).
    fn receive(
        &mut self,
        wait: Duration,
        key: impl Fn(&Name) -> Option<u64>,
        got: &mut Vec<Outcome>,
    ) -> Result<(), ToolError> {
        let n = self.face.recv_batch(wait)?;
        for k in 0..n {
            match decode_received(self.face.packet(k)) {
                Ok(Received::Data(d, _)) => match key(&d.name) {
                    Some(id) => got.push(Outcome::Data(id, Box::new(d))),
                    None => self.stats.unexpected += 1,
                },
                Ok(Received::Nack(i, code)) => {
                    self.stats.count_nack(code);
                    match key(&i.name) {
                        Some(id) => got.push(Outcome::Nack(id, code)),
                        None => self.stats.unexpected += 1,
                    }
                }
                Ok(Received::Interest(..)) => self.stats.unexpected += 1,
                Err(_) => self.stats.bad += 1,
            }
        }
        Ok(())
    }

    /// Send Interests for unique names under `prefix` for `duration`,
    /// keeping the window full; then wait for the outstanding ones (at
    /// most `rto * (max_retries + 1)`).
    pub fn bench(&mut self, prefix: &Name, duration: Duration) -> Result<ConsumerStats, ToolError> {
        self.stats = ConsumerStats::default();
        let mut run = prefix.clone();
        run.push(&NameComponent::generic(
            format!("{:08x}", rand_nonce()).into_bytes(),
        ));
        let depth = run.len() + 1;
        let name_of = |seq: u64| {
            let mut n = run.clone();
            n.push(&NameComponent::sequence_num(seq));
            n
        };
        let key = |n: &Name| {
            if n.len() != depth || !run.is_prefix_of(n) {
                return None;
            }
            n.last()?.as_sequence_num()
        };
        let mut pending: HashMap<u64, Pending> = HashMap::with_capacity(self.cfg.window * 2);
        let mut got = Vec::new();
        let mut seq = 0u64;
        let start = Instant::now();
        let end = start + duration;
        let drain_end = end + self.cfg.rto * (self.cfg.max_retries + 1);
        let mut last_scan = start;
        loop {
            let now = Instant::now();
            if now < end {
                while pending.len() < self.cfg.window {
                    let w = self.interest(name_of(seq), false, false);
                    self.out.push(w);
                    pending.insert(
                        seq,
                        Pending {
                            sent: now,
                            retries: 0,
                        },
                    );
                    seq += 1;
                }
            } else if pending.is_empty() || now >= drain_end {
                self.stats.timed_out += pending.len() as u64;
                break;
            }
            self.flush()?;
            self.receive(Duration::from_millis(5), key, &mut got)?;
            let now = Instant::now();
            for o in got.drain(..) {
                match o {
                    Outcome::Data(id, _) => {
                        let Some(p) = pending.remove(&id) else {
                            self.stats.unexpected += 1;
                            continue;
                        };
                        self.stats.satisfied += 1;
                        if now <= end {
                            self.stats.satisfied_in_time += 1;
                        }
                        if p.retries == 0 {
                            self.stats.rtt.record(now - p.sent);
                        }
                    }
                    Outcome::Nack(id, _) => {
                        let Some(p) = pending.get_mut(&id) else {
                            continue;
                        };
                        if p.retries >= self.cfg.max_retries {
                            pending.remove(&id);
                            self.stats.nacked += 1;
                        } else {
                            p.retries += 1;
                            p.sent = now;
                            self.stats.retransmitted += 1;
                            let w = self.interest(name_of(id), false, false);
                            self.out.push(w);
                        }
                    }
                }
            }
            if now - last_scan >= Duration::from_millis(10) {
                last_scan = now;
                self.resend_expired(&mut pending, now, &name_of, false)?;
            }
        }
        self.stats.elapsed = duration;
        Ok(std::mem::take(&mut self.stats))
    }

    /// Resend (or give up on) every Interest older than `rto`; in a fetch
    /// giving up is an error.
    fn resend_expired(
        &mut self,
        pending: &mut HashMap<u64, Pending>,
        now: Instant,
        name_of: &impl Fn(u64) -> Name,
        fail: bool,
    ) -> Result<(), ToolError> {
        let expired: Vec<u64> = pending
            .iter()
            .filter(|(_, p)| now - p.sent >= self.cfg.rto)
            .map(|(&k, _)| k)
            .collect();
        for id in expired {
            let Some(p) = pending.get_mut(&id) else {
                continue;
            };
            if p.retries >= self.cfg.max_retries {
                if fail {
                    return Err(ToolError::Timeout("a segment (retries exhausted)"));
                }
                pending.remove(&id);
                self.stats.timed_out += 1;
                continue;
            }
            p.retries += 1;
            p.sent = now;
            self.stats.retransmitted += 1;
            let w = self.interest(name_of(id), false, false);
            self.out.push(w);
        }
        Ok(())
    }

    /// Fetch the segmented object published under `prefix`, giving up at
    /// `deadline` after the start.
    pub fn fetch(
        &mut self,
        prefix: &Name,
        deadline: Duration,
    ) -> Result<(Fetched, ConsumerStats), ToolError> {
        self.stats = ConsumerStats::default();
        let start = Instant::now();
        let end = start + deadline;
        // Discovery: CanBePrefix + MustBeFresh for the prefix.
        let first = self.discover(prefix, end)?;
        let depth = prefix.len() + 2;
        let versioned = first.name.prefix(depth - 1);
        if versioned
            .get(depth - 2)
            .and_then(|c| c.as_version())
            .is_none()
        {
            return Err(ToolError::BadReply(format!(
                "{} is not /prefix/v=VERSION/seg=N",
                first.name
            )));
        }
        let segments = self
            .final_block(&first)?
            .checked_add(1)
            .ok_or_else(|| ToolError::BadReply("FinalBlockId out of range".into()))?;
        let mut parts: Vec<Option<Vec<u8>>> = vec![None; segments as usize];
        let first_seg = first
            .name
            .last()
            .and_then(|c| c.as_segment())
            .ok_or_else(|| ToolError::BadReply("first Data has no segment number".into()))?;
        let mut have = 0u64;
        if let Some(slot) = parts.get_mut(first_seg as usize) {
            *slot = Some(first.content.clone().unwrap_or_default());
            have += 1;
        }
        let name_of = |seg: u64| {
            let mut n = versioned.clone();
            n.push(&NameComponent::segment(seg));
            n
        };
        let key = |n: &Name| {
            if n.len() != depth || !versioned.is_prefix_of(n) {
                return None;
            }
            n.last()?.as_segment()
        };
        let mut pending: HashMap<u64, Pending> = HashMap::new();
        let mut next = 0u64;
        let mut got = Vec::new();
        let mut last_scan = Instant::now();
        while have < segments {
            let now = Instant::now();
            if now >= end {
                return Err(ToolError::Timeout("the whole object"));
            }
            while pending.len() < self.cfg.window && next < segments {
                if parts[next as usize].is_none() {
                    let w = self.interest(name_of(next), false, false);
                    self.out.push(w);
                    pending.insert(
                        next,
                        Pending {
                            sent: now,
                            retries: 0,
                        },
                    );
                }
                next += 1;
            }
            self.flush()?;
            self.receive(Duration::from_millis(5), key, &mut got)?;
            let now = Instant::now();
            for o in got.drain(..) {
                match o {
                    Outcome::Data(seg, d) => {
                        let Some(p) = pending.remove(&seg) else {
                            self.stats.unexpected += 1;
                            continue;
                        };
                        if self.final_block(&d)? + 1 != segments {
                            return Err(ToolError::BadReply(format!(
                                "{}: FinalBlockId changed",
                                d.name
                            )));
                        }
                        self.stats.satisfied += 1;
                        if p.retries == 0 {
                            self.stats.rtt.record(now - p.sent);
                        }
                        parts[seg as usize] = Some(d.content.unwrap_or_default());
                        have += 1;
                    }
                    Outcome::Nack(seg, code) => {
                        let Some(p) = pending.get_mut(&seg) else {
                            continue;
                        };
                        if p.retries >= self.cfg.max_retries {
                            return Err(ToolError::Refused {
                                code,
                                text: format!("Nack for {}", name_of(seg)),
                            });
                        }
                        p.retries += 1;
                        p.sent = now;
                        self.stats.retransmitted += 1;
                        let w = self.interest(name_of(seg), false, false);
                        self.out.push(w);
                    }
                }
            }
            if now - last_scan >= Duration::from_millis(10) {
                last_scan = now;
                self.resend_expired(&mut pending, now, &name_of, true)?;
            }
        }
        self.stats.satisfied_in_time = self.stats.satisfied + 1;
        self.stats.satisfied += 1;
        self.stats.elapsed = start.elapsed();
        let bytes = parts.into_iter().flatten().flatten().collect();
        Ok((
            Fetched {
                versioned_name: versioned,
                segments,
                bytes,
            },
            std::mem::take(&mut self.stats),
        ))
    }

    fn final_block(&self, d: &Data) -> Result<u64, ToolError> {
        let f = d
            .meta_info
            .final_block_id
            .as_ref()
            .and_then(|c| {
                nexthop_wire::ndn::Name::from_components([c.clone()])
                    .get(0)
                    .and_then(|r| r.as_segment())
            })
            .ok_or_else(|| ToolError::BadReply(format!("{}: no segment FinalBlockId", d.name)))?;
        if f >= self.cfg.max_segments {
            return Err(ToolError::BadReply(format!(
                "{}: FinalBlockId {f} above the limit of {} segments",
                d.name, self.cfg.max_segments
            )));
        }
        Ok(f)
    }

    /// The first Data under `prefix` (CanBePrefix, MustBeFresh), with
    /// retransmission.
    fn discover(&mut self, prefix: &Name, end: Instant) -> Result<Data, ToolError> {
        let depth = prefix.len() + 2;
        let key =
            |n: &Name| (n == prefix || (n.len() == depth && prefix.is_prefix_of(n))).then_some(0);
        let mut retries = 0;
        let mut got = Vec::new();
        loop {
            let w = self.interest(prefix.clone(), true, true);
            self.out.push(w);
            self.flush()?;
            let sent = Instant::now();
            let step = sent + self.cfg.rto;
            let mut nacked = false;
            while let Some(left) = step.min(end).checked_duration_since(Instant::now()) {
                self.receive(left.min(Duration::from_millis(50)), key, &mut got)?;
                for o in got.drain(..) {
                    match o {
                        Outcome::Data(_, d) => {
                            self.stats.rtt.record(sent.elapsed());
                            return Ok(*d);
                        }
                        Outcome::Nack(_, code) if retries >= self.cfg.max_retries => {
                            return Err(ToolError::Refused {
                                code,
                                text: format!("Nack for {prefix}"),
                            })
                        }
                        Outcome::Nack(..) => nacked = true,
                    }
                }
                if nacked {
                    break;
                }
            }
            if Instant::now() >= end || retries >= self.cfg.max_retries {
                return Err(ToolError::Timeout("the first segment"));
            }
            retries += 1;
            self.stats.retransmitted += 1;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::tools::producer::SegmentedObject;
    use crate::tools::with_token;
    use nexthop_wire::ndn::{LpPacket, MetaInfo, NackReason};
    use std::net::UdpSocket;
    use std::sync::atomic::{AtomicBool, Ordering};
    use std::sync::Arc;

    /// A fake forwarder on loopback: `answer` gets each Interest and the
    /// count of Interests so far, and returns the datagrams to send back.
    fn fake_forwarder(
        answer: impl Fn(&Interest, u64) -> Vec<Vec<u8>> + Send + 'static,
    ) -> (SocketAddr, Arc<AtomicBool>, std::thread::JoinHandle<()>) {
        let s = UdpSocket::bind("127.0.0.1:0").unwrap();
        s.set_read_timeout(Some(Duration::from_millis(20))).unwrap();
        let addr = s.local_addr().unwrap();
        let stop = Arc::new(AtomicBool::new(false));
        let st = stop.clone();
        let h = std::thread::spawn(move || {
            let mut buf = vec![0u8; 9000];
            let mut n = 0u64;
            while !st.load(Ordering::Relaxed) {
                let Ok((len, from)) = s.recv_from(&mut buf) else {
                    continue;
                };
                let Ok(i) = Interest::decode(&buf[..len]) else {
                    continue;
                };
                n += 1;
                for p in answer(&i, n) {
                    let _ = s.send_to(&p, from);
                }
            }
        });
        (addr, stop, h)
    }

    fn cfg() -> ConsumerConfig {
        ConsumerConfig {
            window: 8,
            rto: Duration::from_millis(100),
            max_retries: 3,
            ..ConsumerConfig::default()
        }
    }

    #[test]
    fn fetch_resends_lost_segments_and_joins_the_object() {
        let prefix = Name::from_uri("/obj").unwrap();
        let bytes: Vec<u8> = (0..20_000u32).map(|x| (x * 7) as u8).collect();
        let o = SegmentedObject::new(&prefix, 3, &bytes, 1000, 0).unwrap();
        let seen = std::sync::Mutex::new(std::collections::HashSet::new());
        // The first Interest for every name is lost.
        let (addr, stop, h) = fake_forwarder(move |i, _| {
            if !seen.lock().unwrap().insert(i.name.clone()) {
                o.answer(&i.name, i.can_be_prefix)
                    .map(|d| vec![with_token(d.to_vec(), Some(vec![1]))])
                    .unwrap_or_default()
            } else {
                Vec::new()
            }
        });
        let mut c = Consumer::connect(addr, cfg()).unwrap();
        let (f, s) = c.fetch(&prefix, Duration::from_secs(20)).unwrap();
        stop.store(true, Ordering::Relaxed);
        h.join().unwrap();
        assert_eq!(f.bytes, bytes);
        assert_eq!(f.segments, 20);
        assert!(s.retransmitted >= 20, "{s:?}");
        assert_eq!(s.satisfied, 20);
    }

    #[test]
    fn fetch_refuses_a_final_block_id_above_the_cap_and_gives_up_on_silence() {
        let (addr, stop, h) = fake_forwarder(|i, _| {
            let mut n = i.name.clone();
            n.push(&NameComponent::version(1));
            n.push(&NameComponent::segment(0));
            let mut d = Data::new(n, vec![1, 2, 3]);
            d.meta_info = MetaInfo {
                final_block_id: Some(NameComponent::segment(u64::MAX)),
                ..MetaInfo::default()
            };
            d.sign_digest_sha256();
            vec![d.to_wire(), vec![0x06, 0x05, 0x00], b"junk".to_vec()]
        });
        let mut c = Consumer::connect(addr, cfg()).unwrap();
        let e = c
            .fetch(&Name::from_uri("/big").unwrap(), Duration::from_secs(5))
            .unwrap_err();
        assert!(matches!(e, ToolError::BadReply(_)), "{e}");
        stop.store(true, Ordering::Relaxed);
        h.join().unwrap();

        let (addr, stop, h) = fake_forwarder(|_, _| Vec::new());
        let mut c = Consumer::connect(addr, cfg()).unwrap();
        let t = Instant::now();
        let e = c
            .fetch(&Name::from_uri("/none").unwrap(), Duration::from_secs(5))
            .unwrap_err();
        assert!(matches!(e, ToolError::Timeout(_)), "{e}");
        assert!(t.elapsed() < Duration::from_secs(3));
        stop.store(true, Ordering::Relaxed);
        h.join().unwrap();
    }

    #[test]
    fn bench_counts_nacks_and_timeouts() {
        // Odd Interests are Nacked (NoRoute), even ones go unanswered.
        let (addr, stop, h) = fake_forwarder(|i, n| {
            if n % 2 == 1 {
                vec![LpPacket::nack(i, Some(NackReason::NoRoute)).to_wire()]
            } else {
                Vec::new()
            }
        });
        let mut c = Consumer::connect(
            addr,
            ConsumerConfig {
                max_retries: 0,
                ..cfg()
            },
        )
        .unwrap();
        let s = c
            .bench(&Name::from_uri("/b").unwrap(), Duration::from_millis(300))
            .unwrap();
        stop.store(true, Ordering::Relaxed);
        h.join().unwrap();
        assert_eq!(s.satisfied, 0);
        assert!(s.nacked > 0 && s.timed_out > 0, "{s:?}");
        assert_eq!(s.nacked + s.timed_out, s.sent, "{s:?}");
        assert_eq!(s.nack_reasons, vec![(150, s.nacked)]);
        assert!(ConsumerConfig { window: 0, ..cfg() }.validate().is_err());
    }
}
