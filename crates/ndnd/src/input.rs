//! UDP input threads (`udp_input_threads > 1`): the UDP listen address is
//! bound by that many sockets with `SO_REUSEPORT`, and the kernel spreads
//! the datagrams of different remote endpoints over them (by a hash of the
//! address 4-tuple, so one endpoint's datagrams always reach the same
//! socket, in order).
//!
//! The polling thread reads the first socket itself and sends every UDP
//! datagram on it (same address and port, so peers see one endpoint).
//! Each input thread owns one of the other sockets: it waits for
//! datagrams, takes them with `recvmmsg` (the kernel's per-datagram
//! receive work runs on the input thread) and hands the filled
//! [`RecvBatch`] to the polling thread through a bounded queue, waking it
//! with an eventfd. The polling thread turns each datagram into a face
//! packet exactly as those of its own socket (face lookup or creation,
//! NDNLPv2, management, the pipeline or the dispatch to a forwarding
//! thread), so faces, PIT and Content Store keep their one owner each, and
//! returns the buffer to its input thread for reuse. When the queue is
//! full the input thread waits before it reads on (the datagrams wait in
//! its socket's receive buffer, `udp_socket_buffer`, as they would for
//! the polling thread), so nothing it read is dropped; buffers per input
//! thread are bounded by the queue's capacity plus two.

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};
use std::sync::mpsc::{self, Receiver, SyncSender, TrySendError};
use std::sync::Arc;
use std::thread::JoinHandle;
use std::time::Duration;

use crate::threads::Wake;
use crate::udp::{self, RecvBatch};

/// Filled batches queued towards the polling thread, all input threads
/// together, before an input thread waits.
const QUEUE: usize = 64;

/// How long an input thread waits for room in the queue before it tries
/// again.
const FULL_WAIT: Duration = Duration::from_micros(200);

/// A UDP socket bound to `addr` with `SO_REUSEPORT` set (so that more
/// sockets may bind the same address), non-blocking.
pub fn bind_reuseport(addr: SocketAddr) -> io::Result<UdpSocket> {
    let domain = if addr.is_ipv4() {
        libc::AF_INET
    } else {
        libc::AF_INET6
    };
    // SAFETY: socket takes no pointers; the result is checked below.
    let fd = unsafe { libc::socket(domain, libc::SOCK_DGRAM | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io::Error::last_os_error());
    }
    // SAFETY: `fd` is a fresh descriptor that nothing else owns.
    let owned = unsafe { OwnedFd::from_raw_fd(fd) };
    udp::setsockopt_int(fd, libc::SOL_SOCKET, libc::SO_REUSEPORT, 1)?;
    let (ss, len) = udp::to_sockaddr(&addr);
    // SAFETY: `ss` holds a socket address of `len` bytes for `addr`'s
    // family (written by `to_sockaddr`), alive for the call, only read.
    let r = unsafe { libc::bind(fd, (&ss as *const libc::sockaddr_storage).cast(), len) };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    let sock = UdpSocket::from(owned);
    sock.set_nonblocking(true)?;
    Ok(sock)
}

/// The input threads, owned by the polling thread.
#[derive(Debug)]
pub struct Inputs {
    filled: Receiver<(usize, Box<RecvBatch>)>,
    free: Vec<SyncSender<Box<RecvBatch>>>,
    wake: Wake,
    stop: Arc<AtomicBool>,
    handles: Vec<JoinHandle<()>>,
    received: Vec<Arc<AtomicU64>>,
    waits: Arc<AtomicU64>,
}

impl Inputs {
    /// One input thread per socket of `socks`.
    /// With `gro`, each socket already has UDP GRO on ([`udp::enable_gro`])
    /// and its batches split coalesced runs.
    pub fn start(socks: Vec<UdpSocket>, gro: bool) -> Result<Inputs, String> {
        let wake = Wake::new().map_err(|e| format!("eventfd: {e}"))?;
        let (filled_tx, filled) = mpsc::sync_channel(QUEUE);
        let mut ins = Inputs {
            filled,
            free: Vec::with_capacity(socks.len()),
            wake,
            stop: Arc::new(AtomicBool::new(false)),
            handles: Vec::with_capacity(socks.len()),
            received: Vec::with_capacity(socks.len()),
            waits: Arc::new(AtomicU64::new(0)),
        };
        for (k, sock) in socks.into_iter().enumerate() {
            let (free_tx, free_rx) = mpsc::sync_channel(QUEUE);
            let received = Arc::new(AtomicU64::new(0));
            let t = InputThread {
                k,
                sock,
                filled: filled_tx.clone(),
                free: free_rx,
                wake: ins.wake.fd(),
                stop: ins.stop.clone(),
                received: received.clone(),
                waits: ins.waits.clone(),
                gro,
            };
            let h = std::thread::Builder::new()
                .name(format!("ndn-udp-in{k}"))
                .spawn(move || t.run())
                .map_err(|e| format!("spawning UDP input thread {k}: {e}"))?;
            ins.free.push(free_tx);
            ins.handles.push(h);
            ins.received.push(received);
        }
        Ok(ins)
    }

    /// The descriptor the polling thread polls for filled batches.
    pub fn wake_fd(&self) -> RawFd {
        self.wake.fd()
    }

    /// Up to `max` filled batches, each with the input thread it came
    /// from (give the buffer back with [`Self::give_back`]).
    pub fn take(&self, max: usize) -> Vec<(usize, Box<RecvBatch>)> {
        self.wake.clear();
        let v: Vec<_> = self.filled.try_iter().take(max).collect();
        if v.len() == max {
            // More may wait: keep the polling thread's wakeup pending.
            Wake::signal(self.wake.fd());
        }
        v
    }

    /// Return a batch buffer to input thread `k` (dropped when its free
    /// list is full).
    pub fn give_back(&self, k: usize, b: Box<RecvBatch>) {
        if let Some(tx) = self.free.get(k) {
            let _ = tx.try_send(b);
        }
    }

    /// Datagrams each input thread received.
    pub fn received(&self) -> Vec<u64> {
        self.received
            .iter()
            .map(|r| r.load(Ordering::Relaxed))
            .collect()
    }

    /// Times an input thread found the queue to the polling thread full
    /// and waited.
    pub fn waits(&self) -> u64 {
        self.waits.load(Ordering::Relaxed)
    }
}

impl Drop for Inputs {
    fn drop(&mut self) {
        self.stop.store(true, Ordering::Relaxed);
        for h in self.handles.drain(..) {
            // A thread that panicked has nothing left to hand back.
            let _ = h.join();
        }
    }
}

/// How long an input thread waits for a datagram before it checks the
/// stop flag.
const POLL_MS: libc::c_int = 50;

struct InputThread {
    k: usize,
    sock: UdpSocket,
    filled: SyncSender<(usize, Box<RecvBatch>)>,
    free: Receiver<Box<RecvBatch>>,
    wake: RawFd,
    stop: Arc<AtomicBool>,
    received: Arc<AtomicU64>,
    waits: Arc<AtomicU64>,
    gro: bool,
}

impl InputThread {
    fn run(self) {
        let mut batch = Box::new(RecvBatch::new(self.gro));
        while !self.stop.load(Ordering::Relaxed) {
            let mut pfd = libc::pollfd {
                fd: self.sock.as_raw_fd(),
                events: libc::POLLIN,
                revents: 0,
            };
            // SAFETY: `pfd` is one live, initialised pollfd that poll may
            // write `revents` into.
            if unsafe { libc::poll(&mut pfd, 1, POLL_MS) } <= 0 {
                continue;
            }
            let n = match batch.recv(&self.sock) {
                Ok(0) | Err(_) => continue,
                Ok(n) => n as u64,
            };
            self.received.fetch_add(n, Ordering::Relaxed);
            let mut filled = (self.k, batch);
            batch = loop {
                match self.filled.try_send(filled) {
                    Ok(()) => {
                        Wake::signal(self.wake);
                        break self
                            .free
                            .try_recv()
                            .unwrap_or_else(|_| Box::new(RecvBatch::new(self.gro)));
                    }
                    Err(TrySendError::Full(f)) if !self.stop.load(Ordering::Relaxed) => {
                        self.waits.fetch_add(1, Ordering::Relaxed);
                        Wake::signal(self.wake);
                        std::thread::sleep(FULL_WAIT);
                        filled = f;
                    }
                    // Stopping, or the polling thread is gone: nobody
                    // takes the batch.
                    Err(TrySendError::Full((_, b)) | TrySendError::Disconnected((_, b))) => {
                        break b;
                    }
                }
            };
        }
    }
}
