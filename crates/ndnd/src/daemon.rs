//! Sockets and faces around a [`Core`], polled by one thread.

use std::collections::{HashMap, VecDeque};
use std::io::{self, Read, Write};
use std::net::{SocketAddr, TcpListener, TcpStream, UdpSocket};
use std::os::fd::{AsRawFd, RawFd};
use std::os::unix::fs::FileTypeExt;
use std::os::unix::net::{UnixListener, UnixStream};
use std::path::PathBuf;
use std::time::{Duration, Instant};

use nexthop_ndn::pit::{FaceId, Millis};

use crate::config::{NdndConfig, MAX_PACKET};
use crate::core::{Core, FaceInfo};
use crate::dataset::FaceStatus;
use crate::ether::{self, EtherSocket};
use crate::frag::Fragmenter;
use crate::input::{self, Inputs};
use crate::stream;
use crate::threads::Workers;
use crate::udp::{self, RecvBatch, BATCH};

/// Datagrams queued for one flush of the UDP socket (sent with one
/// `sendmmsg` per [`BATCH`] messages: without GSO a datagram each, with
/// it runs of up to 64, so a poll round's output usually goes in one
/// call).
const UDP_OUT: usize = BATCH * 16;

/// Face-layer counters.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct FaceLayerCounters {
    /// Faces opened.
    pub faces_opened: u64,
    /// Faces closed (peer closed, error, idle, oversized frame).
    pub faces_closed: u64,
    /// Connections or datagrams from new endpoints refused at `max_faces`.
    pub face_cap_drops: u64,
    /// Stream frames announcing more than the largest packet (face closed).
    pub oversized_frames: u64,
    /// Packets not sent: the stream face's queue was full or the socket
    /// refused the datagram.
    pub send_drops: u64,
    /// Packets for a face that no longer exists.
    pub send_no_face: u64,
    /// Packets over a UDP face's MTU sent as NDNLPv2 fragments.
    pub fragmented: u64,
    /// Packets over the MTU that could not be fragmented, dropped.
    pub frag_failed: u64,
    /// Packets handed to faces (before fragmentation).
    pub packets_out: u64,
    /// Bytes of those packets.
    pub bytes_out: u64,
    /// Messages the UDP sockets took in (a datagram each, or with GRO a
    /// coalesced run).
    pub udp_messages_in: u64,
    /// Messages `sendmmsg` sent (a datagram each, or with GSO a run).
    pub udp_messages_out: u64,
    /// Times the kernel refused a GSO message (GSO is then off).
    pub udp_gso_refused: u64,
}

/// A copy of the forwarder's counters for a metrics exporter
/// ([`Daemon::metrics`]).
#[derive(Debug, Clone, Default, PartialEq)]
pub struct DaemonMetrics {
    /// Seconds since the daemon was bound.
    pub uptime_secs: f64,
    /// Packets received from faces.
    pub packets_in: u64,
    /// Bytes received from faces.
    pub bytes_in: u64,
    /// Packets handed to faces.
    pub packets_out: u64,
    /// Bytes handed to faces.
    pub bytes_out: u64,
    /// Drops by reason (every reason, zeros too): the pipeline's
    /// (`DropReason::as_str`) then the face layer's.
    pub drops: Vec<(&'static str, u64)>,
    /// Other counters `(name, help, value)`.
    pub counters: Vec<(&'static str, &'static str, u64)>,
    /// Gauges `(name, help, value)`.
    pub gauges: Vec<(&'static str, &'static str, u64)>,
    /// The open faces with their counters.
    pub faces: Vec<FaceStatus>,
    /// Packets each forwarding thread took, in thread order.
    pub thread_packets: Vec<u64>,
    /// Each forwarding thread's own counters, in thread order (one entry,
    /// the polling thread's pipeline, with one thread); the sums are in
    /// `counters`, `gauges` and `drops`.
    pub threads: Vec<ThreadMetrics>,
}

/// One forwarding thread's counters (published with the label
/// `thread="i"` beside the sums).
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq)]
pub struct ThreadMetrics {
    /// Packets the thread took.
    pub packets: u64,
    /// Data that satisfied one of its PIT entries.
    pub satisfied: u64,
    /// Interests answered from its Content Store.
    pub cs_hits: u64,
    /// Interests that missed its Content Store.
    pub cs_misses: u64,
    /// Interests aggregated into one of its pending entries.
    pub suppressed: u64,
    /// Packets its pipeline dropped (every reason).
    pub drops: u64,
    /// Its PIT entries.
    pub pit_entries: u64,
    /// Its Content Store entries.
    pub cs_entries: u64,
}

impl ThreadMetrics {
    fn of(t: &crate::core::ThreadStats) -> ThreadMetrics {
        ThreadMetrics {
            packets: t.packets,
            satisfied: t.fw.satisfied,
            cs_hits: t.fw.cs_hits,
            cs_misses: t.fw.cs_misses,
            suppressed: t.fw.suppressed,
            drops: t.fw.drops.total(),
            pit_entries: t.general.pit_entries,
            cs_entries: t.general.cs_entries,
        }
    }
}

#[derive(Debug)]
enum Stream {
    Tcp(TcpStream),
    Unix(UnixStream),
}

impl Stream {
    fn fd(&self) -> RawFd {
        match self {
            Stream::Tcp(s) => s.as_raw_fd(),
            Stream::Unix(s) => s.as_raw_fd(),
        }
    }
    fn read(&mut self, b: &mut [u8]) -> io::Result<usize> {
        match self {
            Stream::Tcp(s) => s.read(b),
            Stream::Unix(s) => s.read(b),
        }
    }
    /// One `writev` of both halves of a face's queue.
    fn write_queued(&mut self, q: &VecDeque<u8>) -> io::Result<usize> {
        let (a, b) = q.as_slices();
        let bufs = [io::IoSlice::new(a), io::IoSlice::new(b)];
        match self {
            Stream::Tcp(s) => s.write_vectored(&bufs),
            Stream::Unix(s) => s.write_vectored(&bufs),
        }
    }
}

/// A stream face's queue is written once it holds this many bytes, and
/// at the end of each batch: fewer `write`s than one per packet, while
/// the peer can start on the first packets of a large batch before the
/// forwarder is through with the rest (a Repo behind the forwarder reads
/// 1.3x faster than with either one write per packet or one per batch;
/// docs/benchmarks.md).
const STREAM_WRITE_CHUNK: usize = 4096;

/// Write what a stream face has queued until the socket would block;
/// `false` when the face failed.
fn write_stream(s: &mut Stream, wbuf: &mut VecDeque<u8>) -> bool {
    while !wbuf.is_empty() {
        match s.write_queued(wbuf) {
            Ok(0) => return false,
            Ok(n) => {
                wbuf.drain(..n);
            }
            Err(e) if e.kind() == io::ErrorKind::WouldBlock => return true,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => {}
            Err(_) => return false,
        }
    }
    true
}

/// Split `b` into whole TLVs: their ranges go to `out`; returns how many
/// bytes they cover, and whether a TLV claimed more than [`MAX_PACKET`].
fn split_frames(b: &[u8], out: &mut Vec<std::ops::Range<usize>>) -> (usize, bool) {
    let mut at = 0;
    loop {
        match stream::frame_len(&b[at..]) {
            Ok(Some(n)) if b.len() - at >= n => {
                out.push(at..at + n);
                at += n;
            }
            Ok(_) => return (at, false),
            Err(_) => return (at, true),
        }
    }
}

#[derive(Debug)]
enum Io {
    Udp(SocketAddr),
    /// The multicast face of `Daemon::ether[i]`.
    Ether(usize),
    Stream {
        s: Stream,
        rbuf: Vec<u8>,
        wbuf: VecDeque<u8>,
    },
}

#[derive(Debug)]
struct Face {
    io: Io,
    local: bool,
    last_rx: Instant,
    /// Sequence numbers of the fragments sent (datagram faces).
    frag: Fragmenter,
}

/// The forwarder process: listeners, faces and the [`Core`], owned by the
/// thread that calls [`Daemon::run`].
#[derive(Debug)]
pub struct Daemon {
    cfg: NdndConfig,
    core: Core,
    udp: Option<UdpSocket>,
    /// Receive and send buffer bytes the kernel granted the UDP socket.
    udp_buffers: (usize, usize),
    /// Datagrams waiting for the next `sendmmsg` (at most [`UDP_OUT`]), and
    /// their destinations.
    udp_out: Vec<Vec<u8>>,
    udp_out_to: Vec<SocketAddr>,
    /// The UDP listening sockets have `UDP_GRO` on.
    udp_gro: bool,
    /// Sends use `UDP_SEGMENT` (`udp_gso`, until the kernel refuses).
    udp_gso: bool,
    tcp: Option<TcpListener>,
    unix: Option<(UnixListener, PathBuf)>,
    /// The Ethernet sockets (one per `--ether` interface) and the
    /// multicast face each one is.
    ether: Vec<(EtherSocket, FaceId)>,
    /// The receive buffer of the Ethernet sockets (one frame at a time).
    ether_buf: Vec<u8>,
    faces: HashMap<FaceId, Face>,
    udp_faces: HashMap<SocketAddr, FaceId>,
    free_ids: VecDeque<FaceId>,
    next_id: FaceId,
    start: Instant,
    counters: FaceLayerCounters,
    /// The forwarding threads (`threads > 1`); `None`: `core` forwards.
    workers: Option<Workers>,
    /// The UDP input threads (`udp_input_threads > 1`).
    inputs: Option<Inputs>,
    /// Datagrams the polling thread read from its own UDP socket.
    udp_own_rx: u64,
}

fn on_off(b: bool) -> &'static str {
    if b {
        "on"
    } else {
        "off"
    }
}

fn is_loopback(a: &SocketAddr) -> bool {
    a.ip().is_loopback()
}

/// An NFD face URI: `udp4://1.2.3.4:5`, `tcp6://[::1]:5`.
fn face_uri(scheme: &str, a: &SocketAddr) -> String {
    let v = if a.is_ipv4() { 4 } else { 6 };
    format!("{scheme}{v}://{a}")
}

impl Daemon {
    /// Bind the listeners of `cfg`. A stale Unix socket file at the path
    /// is replaced; any other file there is an error.
    pub fn bind(cfg: NdndConfig) -> io::Result<Daemon> {
        cfg.validate().map_err(io::Error::other)?;
        let (core, workers) = if cfg.threads > 1 {
            let w = Workers::start(&cfg).map_err(io::Error::other)?;
            let core = Core::for_dispatch(&cfg, w.stats()).map_err(io::Error::other)?;
            (core, Some(w))
        } else {
            (Core::new(&cfg).map_err(io::Error::other)?, None)
        };
        let mut udp_buffers = (0, 0);
        let mut inputs = None;
        // GRO where asked and the kernel has it (each socket of the
        // address alike).
        let mut udp_gro = cfg.udp_gso;
        let mut gro = |s: &UdpSocket| {
            if udp_gro && udp::enable_gro(s).is_err() {
                udp_gro = false;
            }
        };
        let udp = match cfg.udp {
            Some(a) if cfg.udp_input_threads > 1 => {
                let s = input::bind_reuseport(a)?;
                udp_buffers = udp::set_buffers(&s, cfg.udp_socket_buffer)?;
                gro(&s);
                // The others bind the port the first one got (`a` may ask
                // for any).
                let at = s.local_addr()?;
                let others = (1..cfg.udp_input_threads)
                    .map(|_| {
                        let o = input::bind_reuseport(at)?;
                        udp::set_buffers(&o, cfg.udp_socket_buffer)?;
                        gro(&o);
                        Ok(o)
                    })
                    .collect::<io::Result<Vec<_>>>()?;
                inputs = Some(Inputs::start(others, udp_gro).map_err(io::Error::other)?);
                Some(s)
            }
            Some(a) => {
                let s = UdpSocket::bind(a)?;
                s.set_nonblocking(true)?;
                udp_buffers = udp::set_buffers(&s, cfg.udp_socket_buffer)?;
                gro(&s);
                Some(s)
            }
            None => None,
        };
        let tcp = match cfg.tcp {
            Some(a) => {
                let l = TcpListener::bind(a)?;
                l.set_nonblocking(true)?;
                Some(l)
            }
            None => None,
        };
        let unix = match &cfg.unix {
            Some(p) => {
                if let Ok(m) = std::fs::symlink_metadata(p) {
                    if m.file_type().is_socket() {
                        std::fs::remove_file(p)?;
                    } else {
                        return Err(io::Error::other(format!(
                            "{} exists and is not a socket",
                            p.display()
                        )));
                    }
                }
                if let Some(dir) = p.parent() {
                    if !dir.as_os_str().is_empty() {
                        std::fs::create_dir_all(dir)?;
                    }
                }
                let l = UnixListener::bind(p)?;
                l.set_nonblocking(true)?;
                Some((l, p.clone()))
            }
            None => None,
        };
        let ether_socks = cfg
            .ether
            .iter()
            .map(|i| EtherSocket::open(i))
            .collect::<io::Result<Vec<_>>>()?;
        let mut d = Daemon {
            core,
            udp,
            udp_buffers,
            udp_out: Vec::with_capacity(UDP_OUT),
            udp_out_to: Vec::with_capacity(UDP_OUT),
            udp_gro,
            udp_gso: cfg.udp_gso,
            tcp,
            unix,
            ether: Vec::new(),
            ether_buf: Vec::new(),
            faces: HashMap::new(),
            udp_faces: HashMap::new(),
            free_ids: VecDeque::new(),
            next_id: 1,
            start: Instant::now(),
            counters: FaceLayerCounters::default(),
            workers,
            inputs,
            udp_own_rx: 0,
            cfg,
        };
        for sock in ether_socks {
            d.open_ether_face(sock)?;
        }
        Ok(d)
    }

    /// Make `sock` a permanent multicast face (never idle-closed).
    fn open_ether_face(&mut self, sock: EtherSocket) -> io::Result<()> {
        let id = self
            .alloc_face()
            .ok_or_else(|| io::Error::other("max_faces reached opening the Ethernet faces"))?;
        let info = FaceInfo {
            uri: ether::MULTICAST_URI.to_string(),
            local_uri: format!("dev://{}", sock.ifname()),
            local: false,
            mtu: Some(sock.mtu() as u64),
        };
        self.faces.insert(
            id,
            Face {
                io: Io::Ether(self.ether.len()),
                local: false,
                last_rx: Instant::now(),
                frag: Fragmenter::new(self.fragment_seed(id)),
            },
        );
        self.ether.push((sock, id));
        self.ether_buf.resize(MAX_PACKET, 0);
        self.core.face_opened(id, info);
        self.sync_changes();
        Ok(())
    }

    /// The readiness line: the bound addresses.
    pub fn ready_line(&self) -> String {
        let mut s = String::from("nexthop ndn: ready");
        if let Some(a) = self.udp.as_ref().and_then(|u| u.local_addr().ok()) {
            s += &format!(" udp={a}");
        }
        if let Some(a) = self.tcp.as_ref().and_then(|t| t.local_addr().ok()) {
            s += &format!(" tcp={a}");
        }
        if let Some((_, p)) = &self.unix {
            s += &format!(" unix={}", p.display());
        }
        for (sock, id) in &self.ether {
            s += &format!(" ether={}:{id}", sock.ifname());
        }
        s
    }

    /// The summary line printed at exit.
    pub fn summary_line(&self) -> String {
        let c = &self.core.total_counters();
        let f = &self.core.total_fw_counters();
        let r = self.core.reasm_counters();
        let l = &self.counters;
        format!(
            "nexthop ndn: stopped faces_opened={} faces_closed={} packets_in={} satisfied={} \
             cs_hits={} drops={} bad_lp={} oversized={} commands={} commands_refused={} \
             reasm_completed={} reasm_bad={} reasm_timeouts={} reasm_cap_drops={} \
             face_cap_drops={} send_drops={} fragmented={} frag_failed={} \
             udp_rcvbuf={} udp_sndbuf={} threads={} thread_packets={} \
             dispatch_drops={} return_drops={} udp_input_packets={} udp_input_waits={} \
             udp_messages_in={} udp_messages_out={} udp_gso={} udp_gro={} udp_gso_refused={}",
            l.faces_opened,
            l.faces_closed,
            c.packets_in,
            f.satisfied,
            f.cs_hits,
            f.drops.total(),
            c.bad_lp,
            c.oversized + l.oversized_frames,
            c.commands,
            c.commands_refused,
            r.completed,
            r.bad,
            r.timeouts,
            r.cap_drops,
            l.face_cap_drops,
            l.send_drops,
            l.fragmented,
            l.frag_failed,
            self.udp_buffers.0,
            self.udp_buffers.1,
            self.cfg.threads,
            self.thread_packets()
                .iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(","),
            self.queue_drops().dispatch,
            self.queue_drops().output,
            self.udp_input_packets()
                .iter()
                .map(u64::to_string)
                .collect::<Vec<_>>()
                .join(","),
            self.udp_input_waits(),
            l.udp_messages_in,
            l.udp_messages_out,
            on_off(self.udp_gso),
            on_off(self.udp_gro),
            l.udp_gso_refused,
        )
    }

    /// Packets each forwarding thread took (one thread: every packet in).
    pub fn thread_packets(&self) -> Vec<u64> {
        match self.workers {
            Some(_) => self.core.thread_packets(),
            None => vec![self.core.counters().packets_in],
        }
    }

    /// Each forwarding thread's counters (one thread: the pipeline of the
    /// polling thread, which is then the forwarding thread).
    pub fn thread_metrics(&self) -> Vec<ThreadMetrics> {
        match self.workers {
            Some(_) => self
                .core
                .peer_thread_stats()
                .iter()
                .map(ThreadMetrics::of)
                .collect(),
            None => {
                let own = self.core.thread_stats(self.core.counters().packets_in);
                vec![ThreadMetrics::of(&own)]
            }
        }
    }

    /// Drops at the queues between the polling and forwarding threads
    /// (zero with one thread).
    pub fn queue_drops(&self) -> crate::threads::QueueDrops {
        self.workers
            .as_ref()
            .map(Workers::drops)
            .unwrap_or_default()
    }

    /// Every counter, for a metrics exporter.
    pub fn metrics(&self) -> DaemonMetrics {
        let c = &self.core.total_counters();
        let f = &self.core.total_fw_counters();
        let r = self.core.reasm_counters();
        let l = &self.counters;
        let mut drops: Vec<(&'static str, u64)> = nexthop_ndn::fw::DropReason::ALL
            .iter()
            .map(|&d| (d.as_str(), f.drops.get(d)))
            .collect();
        drops.extend([
            ("bad_lp", c.bad_lp),
            ("oversized", c.oversized + l.oversized_frames),
            ("reasm_bad", r.bad),
            ("reasm_timeout", r.timeouts),
            ("reasm_cap", r.cap_drops),
            ("face_cap", l.face_cap_drops),
            ("send_queue_full", l.send_drops),
            ("send_no_face", l.send_no_face),
            ("frag_failed", l.frag_failed),
            ("thread_queue_full", self.queue_drops().dispatch),
            ("return_queue_full", self.queue_drops().output),
        ]);
        let pit = self.core.total_pit_len() as u64;
        let g = self.core.general_status();
        DaemonMetrics {
            uptime_secs: self.start.elapsed().as_secs_f64(),
            packets_in: c.packets_in,
            bytes_in: c.bytes_in,
            packets_out: l.packets_out,
            bytes_out: l.bytes_out,
            drops,
            counters: vec![
                (
                    "ndn_satisfied_total",
                    "Data that satisfied a PIT entry",
                    f.satisfied,
                ),
                (
                    "ndn_unsatisfied_total",
                    "PIT entries that expired",
                    g.unsatisfied,
                ),
                (
                    "ndn_cs_hits_total",
                    "Interests answered from the Content Store",
                    f.cs_hits,
                ),
                (
                    "ndn_cs_misses_total",
                    "Interests that missed the Content Store",
                    f.cs_misses,
                ),
                (
                    "ndn_suppressed_total",
                    "Interests aggregated into a pending entry",
                    f.suppressed,
                ),
                (
                    "ndn_commands_total",
                    "Management commands answered",
                    c.commands,
                ),
                (
                    "ndn_commands_refused_total",
                    "Management commands refused",
                    c.commands_refused,
                ),
                (
                    "ndn_reassembled_total",
                    "Packets reassembled from fragments",
                    r.completed,
                ),
                (
                    "ndn_fragmented_total",
                    "Packets sent as fragments",
                    l.fragmented,
                ),
                ("ndn_faces_opened_total", "Faces opened", l.faces_opened),
                ("ndn_faces_closed_total", "Faces closed", l.faces_closed),
                (
                    "ndn_udp_messages_in_total",
                    "Messages the UDP sockets took (with GRO a message may hold a run of datagrams)",
                    l.udp_messages_in,
                ),
                (
                    "ndn_udp_messages_out_total",
                    "Messages sent on the UDP socket (with GSO a message may hold a run of datagrams)",
                    l.udp_messages_out,
                ),
                (
                    "ndn_udp_gso_refused_total",
                    "Times the kernel refused a GSO message (GSO then off)",
                    l.udp_gso_refused,
                ),
            ],
            gauges: vec![
                ("ndn_pit_entries", "PIT entries", pit),
                ("ndn_cs_entries", "Content Store entries", g.cs_entries),
                ("ndn_fib_entries", "FIB entries", g.fib_entries),
                ("ndn_faces", "Open faces", self.faces.len() as u64),
                (
                    "ndn_udp_rcvbuf_bytes",
                    "Receive buffer the kernel granted the UDP socket",
                    self.udp_buffers.0 as u64,
                ),
                (
                    "ndn_udp_sndbuf_bytes",
                    "Send buffer the kernel granted the UDP socket",
                    self.udp_buffers.1 as u64,
                ),
            ],
            faces: self.core.face_statuses(),
            thread_packets: self.thread_packets(),
            threads: self.thread_metrics(),
        }
    }

    /// The receive and send buffer sizes the kernel granted the UDP
    /// socket for the `udp_socket_buffer` asked (Linux reports twice the
    /// request); `(0, 0)` without UDP.
    pub fn udp_buffers(&self) -> (usize, usize) {
        self.udp_buffers
    }

    /// The core (routes, counters).
    pub fn core(&self) -> &Core {
        &self.core
    }

    /// A first fragment Sequence for a new face: distinct per face and run.
    fn fragment_seed(&self, id: FaceId) -> u64 {
        let t = std::time::SystemTime::now()
            .duration_since(std::time::UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(0);
        (u64::from(id) << 48) ^ t
    }

    fn now(&self) -> Millis {
        self.start.elapsed().as_millis() as Millis
    }

    fn alloc_face(&mut self) -> Option<FaceId> {
        if self.faces.len() + 1 >= self.cfg.max_faces as usize {
            self.counters.face_cap_drops += 1;
            return None;
        }
        let id = if self.next_id < self.cfg.max_faces {
            self.next_id += 1;
            self.next_id - 1
        } else {
            self.free_ids.pop_front()?
        };
        self.counters.faces_opened += 1;
        Some(id)
    }

    fn close_face(&mut self, id: FaceId) {
        if let Some(f) = self.faces.remove(&id) {
            if let Io::Udp(a) = f.io {
                self.udp_faces.remove(&a);
            }
            self.core.face_closed(id);
            self.sync_changes();
            self.free_ids.push_back(id);
            self.counters.faces_closed += 1;
        }
    }

    /// Run until `stop()` returns true (checked at least every 100 ms).
    /// The Unix socket file is removed on return.
    pub fn run(&mut self, stop: impl Fn() -> bool) -> io::Result<()> {
        self.run_reporting(stop, Duration::from_secs(1), |_| {})
    }

    /// [`Self::run`], calling `report` with the daemon about every
    /// `every` (and once before returning): how `nexthop ndn run
    /// --metrics` publishes [`Self::metrics`].
    pub fn run_reporting(
        &mut self,
        stop: impl Fn() -> bool,
        every: Duration,
        mut report: impl FnMut(&Daemon),
    ) -> io::Result<()> {
        let r = self.run_inner(stop, every, &mut report);
        if let Some(mut w) = self.workers.take() {
            let mut send = Vec::new();
            w.stop(&mut send);
            self.flush_sends(&mut send);
            self.flush_udp();
            // Keep the final counters (and the queue drops) for reports.
            self.workers = Some(w);
        }
        report(self);
        if let Some((_, p)) = &self.unix {
            let _ = std::fs::remove_file(p);
        }
        r
    }

    fn run_inner(
        &mut self,
        stop: impl Fn() -> bool,
        every: Duration,
        report: &mut dyn FnMut(&Daemon),
    ) -> io::Result<()> {
        let mut buf = vec![0u8; 65536];
        let mut rx = RecvBatch::new(self.udp_gro);
        let mut send = Vec::new();
        let mut last_tick = Instant::now();
        let mut last_report = Instant::now();
        report(self);
        while !stop() {
            let mut fds: Vec<libc::pollfd> = Vec::new();
            let mut who: Vec<Option<FaceId>> = Vec::new();
            for fd in [
                self.udp.as_ref().map(|s| s.as_raw_fd()),
                self.tcp.as_ref().map(|s| s.as_raw_fd()),
                self.unix.as_ref().map(|s| s.0.as_raw_fd()),
            ]
            .into_iter()
            .chain([
                self.workers.as_ref().map(Workers::wake_fd),
                self.inputs.as_ref().map(Inputs::wake_fd),
            ])
            .flatten()
            .chain(self.ether.iter().map(|(sock, _)| sock.as_raw_fd()))
            {
                fds.push(libc::pollfd {
                    fd,
                    events: libc::POLLIN,
                    revents: 0,
                });
                who.push(None);
            }
            for (&id, f) in &self.faces {
                if let Io::Stream { s, wbuf, .. } = &f.io {
                    let mut ev = libc::POLLIN;
                    if !wbuf.is_empty() {
                        ev |= libc::POLLOUT;
                    }
                    fds.push(libc::pollfd {
                        fd: s.fd(),
                        events: ev,
                        revents: 0,
                    });
                    who.push(Some(id));
                }
            }
            // SAFETY: `fds` is a live, initialised array of `fds.len()`
            // pollfd structs that poll may write `revents` into.
            let n = unsafe { libc::poll(fds.as_mut_ptr(), fds.len() as libc::nfds_t, 100) };
            if n < 0 {
                let e = io::Error::last_os_error();
                if e.kind() == io::ErrorKind::Interrupted {
                    continue;
                }
                return Err(e);
            }
            for (pfd, id) in fds.iter().zip(&who) {
                if pfd.revents == 0 {
                    continue;
                }
                match id {
                    None => self.on_listener(pfd.fd, &mut rx, &mut send),
                    Some(id) => self.on_stream(*id, pfd.revents, &mut buf, &mut send),
                }
                self.flush_sends(&mut send);
            }
            self.flush_workers(&mut send);
            // The datagrams of this poll round go out together.
            self.flush_udp();
            if last_tick.elapsed() >= Duration::from_millis(100) {
                last_tick = Instant::now();
                let now = self.now();
                self.core.tick(now);
                let idle = Duration::from_secs(self.cfg.udp_idle_secs);
                let stale: Vec<FaceId> = self
                    .faces
                    .iter()
                    .filter(|(_, f)| matches!(f.io, Io::Udp(_)) && f.last_rx.elapsed() >= idle)
                    .map(|(&id, _)| id)
                    .collect();
                for id in stale {
                    self.close_face(id);
                }
            }
            if last_report.elapsed() >= every {
                last_report = Instant::now();
                report(self);
            }
        }
        Ok(())
    }

    /// Take one packet received on a face: through the core (one
    /// thread), or admitted by it and queued for its forwarding thread.
    fn take_in(
        &mut self,
        id: FaceId,
        local: bool,
        wire: &[u8],
        now: Millis,
        send: &mut Vec<(FaceId, Vec<u8>)>,
    ) {
        let Some(w) = self.workers.as_mut() else {
            self.core.receive(id, local, wire, now, send);
            return;
        };
        // A face opened for this packet reaches the threads before it.
        w.broadcast(self.core.take_changes(), now);
        let picked = self
            .core
            .dispatch(id, local, wire, now, send, |lp, bytes| w.pick(lp, bytes));
        if let Some((t, bytes)) = picked {
            w.push(t, id, bytes);
        }
        w.broadcast(self.core.take_changes(), now);
    }

    /// Send the management changes (faces, routes, strategies) to the
    /// forwarding threads.
    fn sync_changes(&mut self) {
        let now = self.now();
        if let Some(w) = self.workers.as_mut() {
            w.broadcast(self.core.take_changes(), now);
        }
    }

    /// Hand the queued packets to the forwarding threads and send what
    /// they returned.
    fn flush_workers(&mut self, send: &mut Vec<(FaceId, Vec<u8>)>) {
        let now = self.now();
        if let Some(w) = self.workers.as_mut() {
            w.flush(now);
            w.drain(send);
        }
        self.flush_sends(send);
    }

    /// The datagrams of one `recvmmsg` batch, each into its UDP face.
    fn take_udp_batch(&mut self, rx: &RecvBatch, send: &mut Vec<(FaceId, Vec<u8>)>) {
        self.counters.udp_messages_in += rx.messages() as u64;
        let now = self.now();
        for k in 0..rx.len() {
            let Some(from) = rx.source(k) else {
                continue;
            };
            let Some((id, local)) = self.udp_face(from) else {
                continue;
            };
            self.take_in(id, local, rx.packet(k), now, send);
        }
    }

    /// The batches the UDP input threads handed over (a bounded number,
    /// then let the others run); their buffers go back.
    fn on_inputs(&mut self, send: &mut Vec<(FaceId, Vec<u8>)>) {
        let Some(batches) = self.inputs.as_ref().map(|i| i.take(16)) else {
            return;
        };
        for (k, b) in batches {
            self.take_udp_batch(&b, send);
            self.flush_workers(send);
            if let Some(i) = self.inputs.as_ref() {
                i.give_back(k, b);
            }
        }
    }

    /// Datagrams received on each socket of the UDP listen address: the
    /// polling thread's own first, then each input thread's.
    pub fn udp_input_packets(&self) -> Vec<u64> {
        let mut v = vec![self.udp_own_rx];
        if let Some(i) = &self.inputs {
            v.extend(i.received());
        }
        v
    }

    /// Times a UDP input thread found its queue to the polling thread
    /// full and waited (its datagrams waited in its socket buffer).
    pub fn udp_input_waits(&self) -> u64 {
        self.inputs.as_ref().map_or(0, Inputs::waits)
    }

    fn on_listener(&mut self, fd: RawFd, rx: &mut RecvBatch, send: &mut Vec<(FaceId, Vec<u8>)>) {
        if self.workers.as_ref().is_some_and(|w| w.wake_fd() == fd) {
            self.flush_workers(send);
            return;
        }
        if self.inputs.as_ref().is_some_and(|i| i.wake_fd() == fd) {
            self.on_inputs(send);
            return;
        }
        if let Some(k) = self
            .ether
            .iter()
            .position(|(sock, _)| sock.as_raw_fd() == fd)
        {
            self.on_ether(k, send);
            return;
        }
        if self.udp.as_ref().is_some_and(|s| s.as_raw_fd() == fd) {
            // Drain a bounded number of batches, then let others run.
            for _ in 0..4 {
                let Some(sock) = self.udp.as_ref() else {
                    return;
                };
                let n = match rx.recv(sock) {
                    Ok(n) => n,
                    Err(_) => return,
                };
                self.udp_own_rx += n as u64;
                self.take_udp_batch(rx, send);
                self.flush_workers(send);
                if n < BATCH {
                    return;
                }
            }
            return;
        }
        let accepted = if self.tcp.as_ref().is_some_and(|s| s.as_raw_fd() == fd) {
            self.tcp.as_ref().and_then(|l| {
                let (s, a) = l.accept().ok()?;
                let _ = s.set_nodelay(true);
                let ours = s.local_addr().ok()?;
                let info = FaceInfo {
                    uri: face_uri("tcp", &a),
                    local_uri: face_uri("tcp", &ours),
                    local: is_loopback(&a),
                    mtu: None,
                };
                Some((Stream::Tcp(s), info))
            })
        } else {
            self.unix.as_ref().and_then(|(l, p)| {
                let (s, _) = l.accept().ok()?;
                let info = FaceInfo {
                    uri: format!("fd://{}", s.as_raw_fd()),
                    local_uri: format!("unix://{}", p.display()),
                    local: true,
                    mtu: None,
                };
                Some((Stream::Unix(s), info))
            })
        };
        let Some((s, info)) = accepted else { return };
        let local = info.local;
        let nb = match &s {
            Stream::Tcp(t) => t.set_nonblocking(true),
            Stream::Unix(u) => u.set_nonblocking(true),
        };
        if nb.is_err() {
            return;
        }
        let Some(id) = self.alloc_face() else { return };
        self.faces.insert(
            id,
            Face {
                io: Io::Stream {
                    s,
                    rbuf: Vec::new(),
                    wbuf: VecDeque::new(),
                },
                local,
                last_rx: Instant::now(),
                frag: Fragmenter::default(),
            },
        );
        self.core.face_opened(id, info);
        self.sync_changes();
    }

    /// The face of UDP endpoint `from` and whether it is local, opened on
    /// its first datagram (`None` at `max_faces`).
    /// Take the frames waiting on Ethernet socket `k` (a bounded number,
    /// then let the others run) into its multicast face.
    fn on_ether(&mut self, k: usize, send: &mut Vec<(FaceId, Vec<u8>)>) {
        let mut buf = std::mem::take(&mut self.ether_buf);
        for _ in 0..BATCH {
            let Some((sock, id)) = self.ether.get(k) else {
                break;
            };
            let id = *id;
            let n = match sock.recv(&mut buf) {
                Ok(Some((n, _src))) => n,
                Ok(None) | Err(_) => break,
            };
            if let Some(f) = self.faces.get_mut(&id) {
                f.last_rx = Instant::now();
            }
            let now = self.now();
            self.take_in(id, false, &buf[..n], now, send);
        }
        self.ether_buf = buf;
        self.flush_workers(send);
    }

    fn udp_face(&mut self, from: SocketAddr) -> Option<(FaceId, bool)> {
        let id = match self.udp_faces.get(&from) {
            Some(&id) => id,
            None => {
                let id = self.alloc_face()?;
                self.faces.insert(
                    id,
                    Face {
                        io: Io::Udp(from),
                        local: is_loopback(&from),
                        last_rx: Instant::now(),
                        frag: Fragmenter::new(self.fragment_seed(id)),
                    },
                );
                self.udp_faces.insert(from, id);
                let local_uri = self
                    .udp
                    .as_ref()
                    .and_then(|s| s.local_addr().ok())
                    .map(|a| face_uri("udp", &a))
                    .unwrap_or_default();
                self.core.face_opened(
                    id,
                    FaceInfo {
                        uri: face_uri("udp", &from),
                        local_uri,
                        local: is_loopback(&from),
                        mtu: Some(self.cfg.udp_mtu as u64),
                    },
                );
                id
            }
        };
        let f = self.faces.get_mut(&id)?;
        f.last_rx = Instant::now();
        Some((id, f.local))
    }

    fn on_stream(
        &mut self,
        id: FaceId,
        revents: i16,
        buf: &mut [u8],
        send: &mut Vec<(FaceId, Vec<u8>)>,
    ) {
        if revents & libc::POLLOUT != 0 && !self.flush_stream(id) {
            self.close_face(id);
            return;
        }
        if revents & (libc::POLLIN | libc::POLLHUP | libc::POLLERR) == 0 {
            return;
        }
        let mut closed = false;
        let mut oversized = false;
        let mut frames = Vec::new();
        // The face's partial packet, taken out while its packets go
        // through the core (which needs `self`); whole packets are read
        // straight from `buf`, without a copy.
        let (local, mut rbuf, n) = match self.faces.get_mut(&id) {
            Some(Face {
                io: Io::Stream { s, rbuf, .. },
                local,
                last_rx,
                ..
            }) => {
                let n = match s.read(buf) {
                    Ok(0) => {
                        closed = true;
                        0
                    }
                    Ok(n) => {
                        *last_rx = Instant::now();
                        n
                    }
                    Err(e)
                        if e.kind() == io::ErrorKind::WouldBlock
                            || e.kind() == io::ErrorKind::Interrupted =>
                    {
                        0
                    }
                    Err(_) => {
                        closed = true;
                        0
                    }
                };
                (*local, std::mem::take(rbuf), n)
            }
            _ => return,
        };
        let now = self.now();
        if rbuf.is_empty() {
            let (used, over) = split_frames(&buf[..n], &mut frames);
            for r in frames.drain(..) {
                self.take_in(id, local, &buf[r], now, send);
            }
            rbuf.extend_from_slice(&buf[used..n]);
            oversized |= over;
        } else {
            rbuf.extend_from_slice(&buf[..n]);
            let (used, over) = split_frames(&rbuf, &mut frames);
            for r in frames.drain(..) {
                self.take_in(id, local, &rbuf[r], now, send);
            }
            rbuf.drain(..used);
            oversized |= over;
        }
        // A header that cannot parse in 18 bytes is bad.
        if rbuf.len() > MAX_PACKET {
            oversized = true;
        }
        if let Some(Face {
            io: Io::Stream { rbuf: slot, .. },
            ..
        }) = self.faces.get_mut(&id)
        {
            *slot = rbuf;
        }
        self.flush_workers(send);
        if oversized {
            self.counters.oversized_frames += 1;
            closed = true;
        }
        if closed {
            self.flush_sends(send);
            self.close_face(id);
        }
    }

    /// Send what the core produced.
    fn flush_sends(&mut self, send: &mut Vec<(FaceId, Vec<u8>)>) {
        if send.is_empty() {
            return;
        }
        // Stream faces queue their packets and are written each
        // `STREAM_WRITE_CHUNK` bytes and at the end; faces that failed
        // are closed after.
        let mut dirty: Vec<FaceId> = Vec::new();
        let mut failed: Vec<FaceId> = Vec::new();
        for (id, bytes) in send.drain(..) {
            let Some(f) = self.faces.get_mut(&id) else {
                self.counters.send_no_face += 1;
                continue;
            };
            self.counters.packets_out += 1;
            self.counters.bytes_out += bytes.len() as u64;
            match &mut f.io {
                Io::Udp(a) => {
                    let (done, failed) = (f.frag.fragmented, f.frag.failed);
                    let datagrams = f.frag.fragment(bytes, self.cfg.udp_mtu);
                    self.counters.fragmented += f.frag.fragmented - done;
                    self.counters.frag_failed += f.frag.failed - failed;
                    let a = *a;
                    for d in datagrams {
                        self.udp_out.push(d);
                        self.udp_out_to.push(a);
                        if self.udp_out.len() >= UDP_OUT {
                            self.flush_udp();
                        }
                    }
                }
                Io::Ether(k) => {
                    let (done, failed) = (f.frag.fragmented, f.frag.failed);
                    let Some((sock, _)) = self.ether.get(*k) else {
                        continue;
                    };
                    let frames = f.frag.fragment(bytes, sock.mtu());
                    self.counters.fragmented += f.frag.fragmented - done;
                    self.counters.frag_failed += f.frag.failed - failed;
                    for fr in frames {
                        if sock.send(&fr, ether::NDN_MULTICAST).is_err() {
                            self.counters.send_drops += 1;
                        }
                    }
                }
                Io::Stream { s, wbuf, .. } => {
                    // A full queue is written out before a packet is
                    // refused.
                    if wbuf.len() + bytes.len() > self.cfg.stream_out_cap && !write_stream(s, wbuf)
                    {
                        failed.push(id);
                        continue;
                    }
                    if wbuf.len() + bytes.len() > self.cfg.stream_out_cap {
                        self.counters.send_drops += 1;
                        continue;
                    }
                    wbuf.extend(bytes);
                    if wbuf.len() >= STREAM_WRITE_CHUNK {
                        if !write_stream(s, wbuf) {
                            failed.push(id);
                        }
                    } else if !dirty.contains(&id) {
                        dirty.push(id);
                    }
                }
            }
        }
        // The rest of each stream face's batch in one write.
        for &id in &dirty {
            if !failed.contains(&id) && !self.flush_stream(id) {
                failed.push(id);
            }
        }
        for id in failed {
            self.close_face(id);
        }
    }

    /// Send the queued datagrams with `sendmmsg` (with GSO: equal-sized
    /// runs to one endpoint as one message each); each one the socket
    /// refuses (a full send buffer) is a `send_drops`.
    fn flush_udp(&mut self) {
        if self.udp_out.is_empty() {
            return;
        }
        let o = match self.udp.as_ref() {
            Some(s) if self.udp_gso => {
                udp::send_batch_gso(s, &self.udp_out, &self.udp_out_to, None)
            }
            Some(s) => udp::send_batch(s, &self.udp_out, &self.udp_out_to),
            None => udp::SendOutcome {
                failed: self.udp_out.len(),
                ..Default::default()
            },
        };
        if o.gso_refused {
            self.udp_gso = false;
            self.counters.udp_gso_refused += 1;
        }
        self.counters.udp_messages_out += o.messages as u64;
        self.counters.send_drops += o.failed as u64;
        self.udp_out.clear();
        self.udp_out_to.clear();
    }

    /// Write what a stream face has queued; `false` when the face failed.
    fn flush_stream(&mut self, id: FaceId) -> bool {
        let Some(Face {
            io: Io::Stream { s, wbuf, .. },
            ..
        }) = self.faces.get_mut(&id)
        else {
            return true;
        };
        write_stream(s, wbuf)
    }
}

#[cfg(test)]
mod tests;
