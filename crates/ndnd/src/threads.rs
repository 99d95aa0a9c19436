//! Forwarding threads of a multi-threaded forwarder (`threads > 1`): the
//! name dispatch table (NDN-DPDK's NDT), the bounded queues and the
//! threads that each own a [`Core`] (its PIT and Content Store).
//!
//! The polling thread owns the sockets. It hands each Interest to the
//! thread the NDT gives the hash of its name's first `ndt_prefix`
//! components, and each Data or Nack to the thread named by the PitToken
//! that thread put on the Interest it sent upstream ([`thread_token`]);
//! a Data or Nack without such a token goes by its name's hash, as an
//! Interest. Management changes reach every thread through the same queue
//! as the packets, so a thread applies them in the order they were made.
//! Each thread returns what to send to the polling thread, which sends it
//! on the faces (UDP datagrams batched with `sendmmsg`).
//!
//! [`thread_token`]: crate::core::thread_token

use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, RecvTimeoutError, SyncSender, TrySendError};
use std::sync::{Arc, Mutex};
use std::thread::JoinHandle;
use std::time::{Duration, Instant};

use nexthop_ndn::pit::{FaceId, Millis};
use nexthop_wire::ndn::tlv::read_var_number;
use nexthop_wire::ndn::{tt, LpView};

use crate::config::NdndConfig;
use crate::core::{token_thread, Change, Core, ThreadStats};

/// Packets to send, `(face, bytes)`.
pub type Sends = Vec<(FaceId, Vec<u8>)>;

/// What the polling thread queues for a forwarding thread.
#[derive(Debug)]
enum Msg {
    /// Packets `(face, wire)` received at `now`.
    Packets(Vec<(FaceId, Vec<u8>)>, Millis),
    /// A management change, applied in queue order.
    Change(Change),
}

/// The name dispatch table: `2^bits` entries mapping a name hash to a
/// forwarding thread, filled round-robin.
#[derive(Debug, Clone)]
pub struct Ndt {
    table: Vec<u8>,
    bits: u32,
    prefix: usize,
}

impl Ndt {
    /// A table of `2^bits` entries over `threads` threads (`1..=64`),
    /// hashing the first `prefix` name components.
    pub fn new(bits: u32, prefix: usize, threads: usize) -> Ndt {
        let threads = threads.clamp(1, 64);
        Ndt {
            table: (0..1usize << bits).map(|i| (i % threads) as u8).collect(),
            bits,
            prefix,
        }
    }

    /// The thread of a name given as the bytes of its first components
    /// (their TLVs, as on the wire).
    pub fn thread_of(&self, components: &[u8]) -> usize {
        // FNV-1a, then a multiplicative mix for the top bits.
        let mut h: u64 = 0xcbf2_9ce4_8422_2325;
        for &b in components {
            h = (h ^ u64::from(b)).wrapping_mul(0x0100_0000_01b3);
        }
        let h = (h ^ (h >> 29)).wrapping_mul(0x9e37_79b9_7f4a_7c15);
        let slot = if self.bits == 0 {
            0
        } else {
            (h >> (64 - self.bits)) as usize
        };
        usize::from(self.table[slot])
    }

    /// The first `prefix` components of the Name of an Interest or Data
    /// `packet` (its outer TLV), `None` when it does not parse.
    pub fn name_prefix<'a>(&self, packet: &'a [u8]) -> Option<&'a [u8]> {
        let (_, tl) = read_var_number(packet, 0).ok()?;
        let (_, ll) = read_var_number(packet, tl).ok()?;
        let at = tl + ll;
        let (t, ntl) = read_var_number(packet, at).ok()?;
        if t != u64::from(tt::NAME) {
            return None;
        }
        let (nlen, nll) = read_var_number(packet, at + ntl).ok()?;
        let start = at + ntl + nll;
        let end = start.checked_add(usize::try_from(nlen).ok()?)?;
        let name = packet.get(start..end)?;
        let mut pos = 0;
        for _ in 0..self.prefix {
            if pos >= name.len() {
                break;
            }
            let (_, ctl) = read_var_number(name, pos).ok()?;
            let (clen, cll) = read_var_number(name, pos + ctl).ok()?;
            pos = (pos + ctl + cll).checked_add(usize::try_from(clen).ok()?)?;
        }
        name.get(..pos)
    }

    /// The thread of a packet the polling thread admitted: `lp` its
    /// NDNLPv2 header (if any), `wire` the packet (reassembled).
    pub fn pick(&self, lp: Option<&LpView<'_>>, wire: &[u8], threads: usize) -> usize {
        let inner: &[u8] = match lp.and_then(|l| l.fragment) {
            Some(f) => f,
            None => wire,
        };
        let is_interest = inner.first() == Some(&(tt::INTEREST as u8));
        let nack = lp.is_some_and(|l| l.nack.is_some());
        if !is_interest || nack {
            let by_token = lp
                .and_then(|l| l.pit_token)
                .and_then(token_thread)
                .map(usize::from)
                .filter(|&t| t < threads);
            if let Some(t) = by_token {
                return t;
            }
        }
        match self.name_prefix(inner) {
            Some(p) => self.thread_of(p) % threads,
            // Malformed: any thread counts and drops it.
            None => 0,
        }
    }
}

/// An eventfd the forwarding (and UDP input) threads write to wake the
/// polling thread.
#[derive(Debug)]
pub(crate) struct Wake(OwnedFd);

impl Wake {
    pub(crate) fn new() -> std::io::Result<Wake> {
        // SAFETY: eventfd takes no pointers; the result is checked below.
        let fd = unsafe { libc::eventfd(0, libc::EFD_NONBLOCK | libc::EFD_CLOEXEC) };
        if fd < 0 {
            return Err(std::io::Error::last_os_error());
        }
        // SAFETY: `fd` is a fresh descriptor that nothing else owns.
        Ok(Wake(unsafe { OwnedFd::from_raw_fd(fd) }))
    }

    /// The descriptor to poll (and to [`Wake::signal`]).
    pub(crate) fn fd(&self) -> RawFd {
        self.0.as_raw_fd()
    }

    pub(crate) fn signal(fd: RawFd) {
        let one: u64 = 1;
        // SAFETY: writes the 8 bytes of `one`, which outlives the call, to
        // an eventfd; a full counter (EAGAIN) still leaves it readable.
        unsafe { libc::write(fd, (&one as *const u64).cast(), 8) };
    }

    pub(crate) fn clear(&self) {
        let mut v: u64 = 0;
        // SAFETY: reads at most 8 bytes into `v`, which outlives the call;
        // the descriptor is non-blocking.
        unsafe { libc::read(self.0.as_raw_fd(), (&mut v as *mut u64).cast(), 8) };
    }
}

/// Drops at the queues between threads.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct QueueDrops {
    /// Packets not queued for a forwarding thread (its queue was full).
    pub dispatch: u64,
    /// Packets to send a forwarding thread could not queue for the
    /// polling thread (its queue was full).
    pub output: u64,
}

/// The forwarding threads and their queues, owned by the polling thread.
#[derive(Debug)]
pub struct Workers {
    ndt: Ndt,
    txs: Vec<SyncSender<Msg>>,
    out: Receiver<Sends>,
    handles: Vec<JoinHandle<()>>,
    stats: Vec<Arc<Mutex<ThreadStats>>>,
    pending: Vec<Vec<(FaceId, Vec<u8>)>>,
    wake: Wake,
    dispatch_drops: u64,
    output_drops: Arc<AtomicU64>,
}

impl Workers {
    /// Start `cfg.threads` forwarding threads, each with its own core.
    pub fn start(cfg: &NdndConfig) -> Result<Workers, String> {
        let n = cfg.threads;
        let wake = Wake::new().map_err(|e| format!("eventfd: {e}"))?;
        let (out_tx, out) = mpsc::sync_channel::<Sends>(cfg.thread_queue);
        let output_drops = Arc::new(AtomicU64::new(0));
        let mut w = Workers {
            ndt: Ndt::new(cfg.ndt_bits, cfg.ndt_prefix, n),
            txs: Vec::with_capacity(n),
            out,
            handles: Vec::with_capacity(n),
            stats: Vec::with_capacity(n),
            pending: vec![Vec::new(); n],
            wake,
            dispatch_drops: 0,
            output_drops: output_drops.clone(),
        };
        for t in 0..n {
            let core = Core::for_thread(cfg, t as u8)?;
            let (tx, rx) = mpsc::sync_channel::<Msg>(cfg.thread_queue);
            let stats = Arc::new(Mutex::new(core.thread_stats(0)));
            let (s, o, d) = (stats.clone(), out_tx.clone(), output_drops.clone());
            let fd = w.wake.0.as_raw_fd();
            let h = std::thread::Builder::new()
                .name(format!("ndn-fw{t}"))
                .spawn(move || worker(core, rx, o, fd, s, d))
                .map_err(|e| format!("spawning forwarding thread {t}: {e}"))?;
            w.txs.push(tx);
            w.handles.push(h);
            w.stats.push(stats);
        }
        Ok(w)
    }

    /// The threads' published counters.
    pub fn stats(&self) -> Vec<Arc<Mutex<ThreadStats>>> {
        self.stats.clone()
    }

    /// The descriptor the polling thread polls for returned packets.
    pub fn wake_fd(&self) -> RawFd {
        self.wake.0.as_raw_fd()
    }

    /// The thread of an admitted packet ([`Ndt::pick`]).
    pub fn pick(&self, lp: Option<&LpView<'_>>, wire: &[u8]) -> usize {
        self.ndt.pick(lp, wire, self.txs.len())
    }

    /// Queue an admitted packet for thread `t` (from [`Self::pick`]; sent
    /// at [`Self::flush`]).
    pub fn push(&mut self, t: usize, face: FaceId, wire: Vec<u8>) {
        if let Some(p) = self.pending.get_mut(t) {
            p.push((face, wire));
        }
    }

    /// Send the queued packets, one batch per thread; a full queue drops
    /// the batch (counted).
    pub fn flush(&mut self, now: Millis) {
        for (tx, p) in self.txs.iter().zip(self.pending.iter_mut()) {
            if p.is_empty() {
                continue;
            }
            let batch = std::mem::take(p);
            let n = batch.len() as u64;
            if let Err(TrySendError::Full(_) | TrySendError::Disconnected(_)) =
                tx.try_send(Msg::Packets(batch, now))
            {
                self.dispatch_drops += n;
            }
        }
    }

    /// Send management changes to every thread, after the packets queued
    /// before them. Waits for room: changes are never dropped.
    pub fn broadcast(&mut self, changes: Vec<Change>, now: Millis) {
        if changes.is_empty() {
            return;
        }
        self.flush(now);
        for c in changes {
            for tx in &self.txs {
                // A thread that ended (only at shutdown) needs no changes.
                let _ = tx.send(Msg::Change(c.clone()));
            }
        }
    }

    /// Append what the threads returned to `send`.
    pub fn drain(&mut self, send: &mut Sends) {
        self.wake.clear();
        while let Ok(batch) = self.out.try_recv() {
            send.extend(batch);
        }
    }

    /// Drops at the queues.
    pub fn drops(&self) -> QueueDrops {
        QueueDrops {
            dispatch: self.dispatch_drops,
            output: self.output_drops.load(Ordering::Relaxed),
        }
    }

    /// Stop the threads after they processed their queues, and append
    /// what they returned to `send`. Their final counters are published.
    pub fn stop(&mut self, send: &mut Sends) {
        self.txs.clear();
        for h in self.handles.drain(..) {
            // A thread that panicked published its last counters already.
            let _ = h.join();
        }
        self.drain(send);
    }
}

impl Drop for Workers {
    fn drop(&mut self) {
        let mut sink = Vec::new();
        self.stop(&mut sink);
    }
}

/// How often a busy thread publishes its counters.
const PUBLISH_EVERY: Duration = Duration::from_millis(10);

fn worker(
    mut core: Core,
    rx: Receiver<Msg>,
    out: SyncSender<Sends>,
    wake: RawFd,
    stats: Arc<Mutex<ThreadStats>>,
    output_drops: Arc<AtomicU64>,
) {
    let mut packets = 0u64;
    let mut send: Sends = Vec::new();
    let mut published = Instant::now();
    let publish = |core: &Core, packets: u64| {
        if let Ok(mut s) = stats.lock() {
            *s = core.thread_stats(packets);
        }
    };
    let give_back = |send: &mut Sends| {
        if send.is_empty() {
            return;
        }
        let n = send.len() as u64;
        match out.try_send(std::mem::take(send)) {
            Ok(()) => Wake::signal(wake),
            Err(_) => {
                output_drops.fetch_add(n, Ordering::Relaxed);
            }
        }
    };
    loop {
        let first = match rx.recv_timeout(Duration::from_millis(50)) {
            Ok(m) => m,
            Err(RecvTimeoutError::Timeout) => {
                publish(&core, packets);
                published = Instant::now();
                continue;
            }
            Err(RecvTimeoutError::Disconnected) => break,
        };
        let mut next = Some(first);
        while let Some(m) = next.take() {
            match m {
                Msg::Packets(batch, now) => {
                    for (face, wire) in batch {
                        packets += 1;
                        core.forward(face, &wire, now, &mut send);
                    }
                }
                Msg::Change(c) => core.apply(c),
            }
            // Each batch's packets go back at once: latency over syscalls.
            give_back(&mut send);
            if published.elapsed() >= PUBLISH_EVERY {
                publish(&core, packets);
                published = Instant::now();
            }
            next = rx.try_recv().ok();
        }
    }
    give_back(&mut send);
    publish(&core, packets);
}

#[cfg(test)]
mod tests {
    use super::*;
    use nexthop_wire::ndn::{Data, Interest, LpPacket, Name};

    #[test]
    fn the_ndt_hashes_the_first_components_only() {
        let ndt = Ndt::new(8, 2, 4);
        let i = |u: &str| Interest::new(Name::from_uri(u).unwrap()).to_wire();
        let a = ndt.name_prefix(&i("/a/b/c/d")).unwrap().to_vec();
        assert_eq!(ndt.name_prefix(&i("/a/b/x")).unwrap(), &a[..]);
        assert_ne!(ndt.name_prefix(&i("/a/c")).unwrap(), &a[..]);
        assert_eq!(ndt.name_prefix(&i("/a")).unwrap().len(), 3);
        let d = Data::new(Name::from_uri("/a/b/zz").unwrap(), b"x".to_vec()).to_wire();
        assert_eq!(ndt.pick(None, &d, 4), ndt.pick(None, &i("/a/b/c"), 4));
        // Many prefixes reach every thread.
        let mut seen = [0u32; 4];
        for k in 0..400 {
            seen[ndt.pick(None, &i(&format!("/p{k}/x")), 4)] += 1;
        }
        assert!(seen.iter().all(|&n| n > 50), "{seen:?}");
        // Bad input goes to thread 0 and never panics.
        for bad in [
            &[][..],
            &[5],
            &[5, 3, 7, 9, 8],
            &[5, 2, 8, 0],
            &[0xfd, 0xff],
        ] {
            assert_eq!(ndt.pick(None, bad, 4), 0);
        }
    }

    #[test]
    fn data_and_nacks_follow_the_thread_token() {
        let ndt = Ndt::new(8, 2, 4);
        let d = Data::new(Name::from_uri("/a/b").unwrap(), b"x".to_vec()).to_wire();
        let by_name = ndt.pick(None, &d, 4);
        let other = (by_name + 1) % 4;
        let lp = LpPacket {
            pit_token: Some(crate::core::thread_token(other as u8).as_bytes().to_vec()),
            ..LpPacket::wrap(d.clone())
        };
        let w = lp.to_wire();
        assert_eq!(ndt.pick(Some(&LpView::parse(&w).unwrap()), &w, 4), other);
        // A token naming no thread, or not ours: by name.
        for t in [vec![0xd7, 9], vec![1, 2, 3]] {
            let lp = LpPacket {
                pit_token: Some(t),
                ..LpPacket::wrap(d.clone())
            };
            let w = lp.to_wire();
            assert_eq!(ndt.pick(Some(&LpView::parse(&w).unwrap()), &w, 4), by_name);
        }
        // An Interest's own token (a downstream's) never steers it.
        let it = Interest::new(Name::from_uri("/a/b").unwrap()).to_wire();
        let lp = LpPacket {
            pit_token: Some(crate::core::thread_token(other as u8).as_bytes().to_vec()),
            ..LpPacket::wrap(it.clone())
        };
        let w = lp.to_wire();
        assert_eq!(ndt.pick(Some(&LpView::parse(&w).unwrap()), &w, 4), by_name);
    }
}
