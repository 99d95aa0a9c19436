//! Live ports on Linux interfaces: AF_PACKET sockets.
//!
//! * [`RxRing`]: a memory-mapped `TPACKET_V3` receive ring. The kernel
//!   fills fixed-size *blocks* with variable-length frames and hands a whole
//!   block to user space at once (when it is full, or when the retire
//!   timeout passes); [`RxRing::next_block`] takes the next ready block
//!   without a system call, and [`RxRing::wait`] `poll()`s when none is
//!   ready. Dropping the [`Block`] gives it back to the kernel.
//! * [`TxPort`]: batched transmit. An AF_PACKET socket bound to the
//!   interface (protocol 0, so it receives nothing) with
//!   `PACKET_QDISC_BYPASS`; [`TxPort::send_batch`] sends up to
//!   [`TX_BURST`] frames per `sendmmsg` call, straight from the caller's
//!   buffers (frames of a held receive block need no copy).
//!
//! Both need `CAP_NET_RAW`. Ring geometry comes from a validated
//! [`RingConfig`]; the socket and the mapping are released on drop.
//!
//! # Threading
//! A port is owned by one thread: every method takes `&mut self` (or
//! `&self` for read-only queries), and a [`Block`] borrows its ring
//! mutably, so at most one block is held at a time.
//!
//! # What the kernel does to frames
//! The kernel strips an 802.1Q/802.1ad tag on receive before any packet
//! socket sees the frame (the tag is then only metadata), so frames from
//! an [`RxRing`] are untagged; a frame whose VLAN tag is cut short never
//! reaches the socket. Frames shorter than 14 bytes cannot be sent on an
//! Ethernet device. Frames the kernel captured only in part (longer than
//! a block can hold) are skipped and counted ([`RxRing::truncated`]).
#![allow(unsafe_code)]

use std::ffi::CString;
use std::io;
use std::os::fd::{AsRawFd, FromRawFd, OwnedFd, RawFd};
use std::ptr::NonNull;
use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{Duration, SystemTime, UNIX_EPOCH};

use thiserror::Error;

/// Frames per `sendmmsg` call.
pub const TX_BURST: usize = 256;

/// Smallest block: one page.
pub const MIN_BLOCK_SIZE: usize = 4096;
/// Largest block the ring accepts (the kernel allocates each block as one
/// contiguous run of pages where it can).
pub const MAX_BLOCK_SIZE: usize = 1 << 27;
/// Largest whole ring.
pub const MAX_RING_SIZE: usize = 1 << 30;

/// Bytes before the first frame of a block: `tpacket_block_desc` rounded up.
const BLOCK_HDR_LEN: usize = tpacket_align(std::mem::size_of::<libc::tpacket_block_desc>());
/// Bytes of a frame's header in the ring: `tpacket3_hdr` rounded up plus
/// `sockaddr_ll` (the kernel's `TPACKET3_HDRLEN`).
const FRAME_HDR_LEN: usize = libc::TPACKET3_HDRLEN;
/// Offset of `hdr` (a `tpacket_hdr_v1`) in a `tpacket_block_desc`.
const BLOCK_DESC_HDR: usize = std::mem::offset_of!(libc::tpacket_block_desc, hdr);
/// Offset of the `sockaddr_ll` after each `tpacket3_hdr`.
const SLL_OFFSET: usize = tpacket_align(std::mem::size_of::<libc::tpacket3_hdr>());

const fn tpacket_align(x: usize) -> usize {
    (x + libc::TPACKET_ALIGNMENT - 1) & !(libc::TPACKET_ALIGNMENT - 1)
}

/// Geometry of a `TPACKET_V3` receive ring.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct RingConfig {
    /// Bytes per block: a power of two, at least one page
    /// ([`MIN_BLOCK_SIZE`]), at most [`MAX_BLOCK_SIZE`]. A frame longer
    /// than a block (less its headers) is captured only in part.
    pub block_size: usize,
    /// Blocks in the ring (at least 2); the ring is
    /// `block_size * block_count` bytes, at most [`MAX_RING_SIZE`].
    pub block_count: usize,
    /// The nominal frame slot the kernel sizes its accounting by: a
    /// multiple of 16, at least the frame header (`TPACKET3_HDRLEN` plus an
    /// Ethernet header), at most `block_size` less the block header.
    /// `TPACKET_V3` packs frames by their real length, so this does not cap
    /// frame sizes.
    pub frame_size: usize,
    /// Milliseconds after which the kernel hands over a block that is not
    /// full (1 to 10,000): the latency bound at low rates.
    pub block_timeout_ms: u32,
}

impl Default for RingConfig {
    /// 64 blocks of 256 KiB (16 MiB), 2048-byte frame slots, 1 ms timeout.
    fn default() -> Self {
        RingConfig {
            block_size: 1 << 18,
            block_count: 64,
            frame_size: 2048,
            block_timeout_ms: 1,
        }
    }
}

/// A [`RingConfig`] the kernel would refuse or that cannot work.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum RingConfigError {
    /// Block size not a power of two between the limits.
    #[error(
        "ring block size {got} must be a power of two from {MIN_BLOCK_SIZE} to {MAX_BLOCK_SIZE} bytes"
    )]
    BlockSize {
        /// The configured block size.
        got: usize,
    },
    /// Block size not a multiple of the page size.
    #[error("ring block size {got} must be a multiple of the page size {page}")]
    BlockNotPageAligned {
        /// The configured block size.
        got: usize,
        /// The system page size.
        page: usize,
    },
    /// Fewer than two blocks.
    #[error("ring block count {got} must be at least 2")]
    TooFewBlocks {
        /// The configured block count.
        got: usize,
    },
    /// The whole ring is too large.
    #[error("ring of {block_count} blocks of {block_size} bytes exceeds {MAX_RING_SIZE} bytes")]
    RingTooLarge {
        /// Bytes per block.
        block_size: usize,
        /// Blocks.
        block_count: usize,
    },
    /// Frame size not a multiple of 16.
    #[error("ring frame size {got} must be a multiple of 16")]
    FrameUnaligned {
        /// The configured frame size.
        got: usize,
    },
    /// Frame size out of range.
    #[error(
        "ring frame size {got} must be from {min} to {max} bytes (block size less its header)"
    )]
    FrameSize {
        /// The configured frame size.
        got: usize,
        /// Smallest slot that holds a frame header and an Ethernet header.
        min: usize,
        /// Block size less the block header.
        max: usize,
    },
    /// Block timeout out of range.
    #[error("ring block timeout {got} ms must be from 1 to 10000")]
    Timeout {
        /// The configured timeout.
        got: u32,
    },
}

impl RingConfig {
    /// Smallest [`frame_size`](Self::frame_size).
    pub const MIN_FRAME_SIZE: usize = tpacket_align(FRAME_HDR_LEN + 14);

    /// Check the geometry.
    ///
    /// # Errors
    /// The first rule broken, naming the value and its bounds.
    pub fn validate(&self) -> Result<(), RingConfigError> {
        let bs = self.block_size;
        if !bs.is_power_of_two() || !(MIN_BLOCK_SIZE..=MAX_BLOCK_SIZE).contains(&bs) {
            return Err(RingConfigError::BlockSize { got: bs });
        }
        let page = page_size();
        if !bs.is_multiple_of(page) {
            return Err(RingConfigError::BlockNotPageAligned { got: bs, page });
        }
        if self.block_count < 2 {
            return Err(RingConfigError::TooFewBlocks {
                got: self.block_count,
            });
        }
        if bs
            .checked_mul(self.block_count)
            .is_none_or(|n| n > MAX_RING_SIZE)
        {
            return Err(RingConfigError::RingTooLarge {
                block_size: bs,
                block_count: self.block_count,
            });
        }
        if !self.frame_size.is_multiple_of(libc::TPACKET_ALIGNMENT) {
            return Err(RingConfigError::FrameUnaligned {
                got: self.frame_size,
            });
        }
        let (min, max) = (Self::MIN_FRAME_SIZE, bs - BLOCK_HDR_LEN);
        if !(min..=max).contains(&self.frame_size) {
            return Err(RingConfigError::FrameSize {
                got: self.frame_size,
                min,
                max,
            });
        }
        if !(1..=10_000).contains(&self.block_timeout_ms) {
            return Err(RingConfigError::Timeout {
                got: self.block_timeout_ms,
            });
        }
        Ok(())
    }

    /// Bytes of the whole ring.
    pub fn ring_size(&self) -> usize {
        self.block_size * self.block_count
    }
}

fn page_size() -> usize {
    // SAFETY: (1) sysconf has no preconditions; _SC_PAGESIZE is a valid name.
    let p = unsafe { libc::sysconf(libc::_SC_PAGESIZE) };
    usize::try_from(p).ok().filter(|&p| p > 0).unwrap_or(4096)
}

/// Opening or using a live port failed.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum AfPacketError {
    /// The ring geometry is invalid.
    #[error("{iface}: {source}")]
    Config {
        /// Interface name.
        iface: String,
        /// What is wrong.
        source: RingConfigError,
    },
    /// An interface name that cannot name a Linux interface.
    #[error("invalid interface name {iface:?} (1 to 15 bytes, no NUL or '/')")]
    BadName {
        /// The name given.
        iface: String,
    },
    /// No interface has this name (in this network namespace).
    #[error("no network interface named {iface:?}")]
    NoSuchInterface {
        /// The name given.
        iface: String,
    },
    /// A system call failed.
    #[error("{iface}: {op}: {source}")]
    Io {
        /// Interface name.
        iface: String,
        /// The step that failed (`socket`, `bind`, `mmap`, ...).
        op: &'static str,
        /// The OS error.
        source: io::Error,
    },
}

fn io_err(iface: &str, op: &'static str) -> AfPacketError {
    AfPacketError::Io {
        iface: iface.to_string(),
        op,
        source: io::Error::last_os_error(),
    }
}

/// The index of interface `iface`.
///
/// # Errors
/// [`AfPacketError::BadName`] or [`AfPacketError::NoSuchInterface`].
pub fn if_index(iface: &str) -> Result<i32, AfPacketError> {
    let bad = || AfPacketError::BadName {
        iface: iface.to_string(),
    };
    if iface.is_empty() || iface.len() >= libc::IF_NAMESIZE || iface.contains('/') {
        return Err(bad());
    }
    let c = CString::new(iface).map_err(|_| bad())?;
    // SAFETY: (2) `c` is a valid NUL-terminated string that outlives the call.
    let idx = unsafe { libc::if_nametoindex(c.as_ptr()) };
    match i32::try_from(idx) {
        Ok(i) if i > 0 => Ok(i),
        _ => Err(AfPacketError::NoSuchInterface {
            iface: iface.to_string(),
        }),
    }
}

/// A new AF_PACKET raw socket with protocol 0 (it receives nothing until
/// bound with a protocol).
fn packet_socket(iface: &str) -> Result<OwnedFd, AfPacketError> {
    // SAFETY: (3) socket has no memory preconditions.
    let fd = unsafe { libc::socket(libc::AF_PACKET, libc::SOCK_RAW | libc::SOCK_CLOEXEC, 0) };
    if fd < 0 {
        return Err(io_err(iface, "socket(AF_PACKET)"));
    }
    // SAFETY: (4) `fd` was just returned by socket(), is open, and nothing
    // else owns it.
    Ok(unsafe { OwnedFd::from_raw_fd(fd) })
}

fn set_opt<T>(fd: &OwnedFd, opt: libc::c_int, value: &T) -> io::Result<()> {
    let len = libc::socklen_t::try_from(std::mem::size_of::<T>())
        .map_err(|_| io::Error::from(io::ErrorKind::InvalidInput))?;
    // SAFETY: (5) `value` points to a live `T` of `len` bytes for the whole
    // call; the kernel only reads it.
    let r = unsafe {
        libc::setsockopt(
            fd.as_raw_fd(),
            libc::SOL_PACKET,
            opt,
            (value as *const T).cast(),
            len,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

fn bind_to(fd: &OwnedFd, ifindex: i32, protocol: u16) -> io::Result<()> {
    let addr = sockaddr_ll(ifindex, protocol);
    // SAFETY: (6) `addr` is a fully initialised sockaddr_ll that lives for
    // the call, and the length passed is its size.
    let r = unsafe {
        libc::bind(
            fd.as_raw_fd(),
            (&addr as *const libc::sockaddr_ll).cast(),
            std::mem::size_of::<libc::sockaddr_ll>() as libc::socklen_t,
        )
    };
    if r == 0 {
        Ok(())
    } else {
        Err(io::Error::last_os_error())
    }
}

fn sockaddr_ll(ifindex: i32, protocol: u16) -> libc::sockaddr_ll {
    libc::sockaddr_ll {
        sll_family: libc::AF_PACKET as u16,
        sll_protocol: protocol.to_be(),
        sll_ifindex: ifindex,
        sll_hatype: 0,
        sll_pkttype: 0,
        sll_halen: 0,
        sll_addr: [0; 8],
    }
}

/// How `PACKET_FANOUT` splits an interface's frames among the workers'
/// sockets.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FanoutMode {
    /// By the kernel's flow hash: a flow stays on one worker, in order.
    /// Frames the flow dissector cannot hash (non-IP) share one hash.
    Hash,
    /// Round robin: even load whatever the traffic, no per-flow order.
    LoadBalance,
    /// By the CPU that received the frame.
    Cpu,
    /// By the receive queue of the NIC.
    Queue,
}

impl FanoutMode {
    fn kernel_value(self) -> libc::c_int {
        let v = match self {
            FanoutMode::Hash => libc::PACKET_FANOUT_HASH,
            FanoutMode::LoadBalance => libc::PACKET_FANOUT_LB,
            FanoutMode::Cpu => libc::PACKET_FANOUT_CPU,
            FanoutMode::Queue => libc::PACKET_FANOUT_QM,
        };
        v as libc::c_int
    }

    /// `hash`, `lb`, `cpu` or `queue`.
    pub fn name(self) -> &'static str {
        match self {
            FanoutMode::Hash => "hash",
            FanoutMode::LoadBalance => "lb",
            FanoutMode::Cpu => "cpu",
            FanoutMode::Queue => "queue",
        }
    }
}

impl std::str::FromStr for FanoutMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "hash" => Ok(FanoutMode::Hash),
            "lb" => Ok(FanoutMode::LoadBalance),
            "cpu" => Ok(FanoutMode::Cpu),
            "queue" => Ok(FanoutMode::Queue),
            _ => Err(format!(
                "unknown fanout mode '{s}': expected hash, lb, cpu or queue"
            )),
        }
    }
}

/// A memory-mapped `TPACKET_V3` receive ring on one interface.
pub struct RxRing {
    fd: OwnedFd,
    /// Start of the mapping of `cfg.ring_size()` bytes.
    map: NonNull<u8>,
    cfg: RingConfig,
    /// The next block to hand out (blocks are filled in order).
    next: usize,
    iface: String,
    truncated: u64,
    drops: u64,
}

// SAFETY: (7) the mapping is owned by this RxRing alone (created in `open`,
// unmapped in `drop`) and only reached through `&mut self`/`&self` methods,
// so moving the ring to another thread moves its sole owner.
unsafe impl Send for RxRing {}

impl std::fmt::Debug for RxRing {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RxRing")
            .field("iface", &self.iface)
            .field("cfg", &self.cfg)
            .field("next", &self.next)
            .finish_non_exhaustive()
    }
}

impl RxRing {
    /// A receive ring on `iface` with geometry `cfg`, receiving every
    /// protocol (`ETH_P_ALL`) and, where the kernel supports it, not the
    /// frames sent on `iface` (they are skipped anyway).
    ///
    /// # Errors
    /// An invalid `cfg`, an unknown interface, or a failed system call
    /// (`EPERM` without `CAP_NET_RAW`).
    pub fn open(iface: &str, cfg: &RingConfig) -> Result<RxRing, AfPacketError> {
        cfg.validate().map_err(|source| AfPacketError::Config {
            iface: iface.to_string(),
            source,
        })?;
        let ifindex = if_index(iface)?;
        let fd = packet_socket(iface)?;
        let version = libc::tpacket_versions::TPACKET_V3 as libc::c_int;
        set_opt(&fd, libc::PACKET_VERSION, &version).map_err(|source| AfPacketError::Io {
            iface: iface.to_string(),
            op: "setsockopt(PACKET_VERSION, TPACKET_V3)",
            source,
        })?;
        // validate() bounds every figure below, so none overflows a u32.
        let req = libc::tpacket_req3 {
            tp_block_size: cfg.block_size as u32,
            tp_block_nr: cfg.block_count as u32,
            tp_frame_size: cfg.frame_size as u32,
            tp_frame_nr: ((cfg.block_size / cfg.frame_size) * cfg.block_count) as u32,
            tp_retire_blk_tov: cfg.block_timeout_ms,
            tp_sizeof_priv: 0,
            tp_feature_req_word: 0,
        };
        set_opt(&fd, libc::PACKET_RX_RING, &req).map_err(|source| AfPacketError::Io {
            iface: iface.to_string(),
            op: "setsockopt(PACKET_RX_RING)",
            source,
        })?;
        // Older kernels lack PACKET_IGNORE_OUTGOING; outgoing frames are
        // then skipped by their packet type.
        let one: libc::c_int = 1;
        let _ = set_opt(&fd, libc::PACKET_IGNORE_OUTGOING, &one);
        let len = cfg.ring_size();
        // SAFETY: (8) a fresh shared mapping chosen by the kernel (null
        // hint) of the ring's exact size on a socket that has a ring of
        // that size; no existing memory is affected.
        let p = unsafe {
            libc::mmap(
                std::ptr::null_mut(),
                len,
                libc::PROT_READ | libc::PROT_WRITE,
                libc::MAP_SHARED | libc::MAP_POPULATE,
                fd.as_raw_fd(),
                0,
            )
        };
        if p == libc::MAP_FAILED {
            return Err(io_err(iface, "mmap(rx ring)"));
        }
        let Some(map) = NonNull::new(p.cast::<u8>()) else {
            return Err(io_err(iface, "mmap(rx ring)"));
        };
        let ring = RxRing {
            fd,
            map,
            cfg: *cfg,
            next: 0,
            iface: iface.to_string(),
            truncated: 0,
            drops: 0,
        };
        // Bind last: frames flow into the ring only from here on. On error
        // `ring` drops, unmapping and closing.
        bind_to(&ring.fd, ifindex, libc::ETH_P_ALL as u16).map_err(|source| AfPacketError::Io {
            iface: iface.to_string(),
            op: "bind",
            source,
        })?;
        Ok(ring)
    }

    /// Join the `PACKET_FANOUT` group `group` of this ring's interface:
    /// the kernel then splits the interface's frames among every socket in
    /// the group (one per worker) by `mode`. Every member must use the same
    /// mode.
    ///
    /// # Errors
    /// The kernel refused (another mode in the group, or no fanout
    /// support).
    pub fn join_fanout(&self, group: u16, mode: FanoutMode) -> Result<(), AfPacketError> {
        let arg: libc::c_int = libc::c_int::from(group) | (mode.kernel_value() << 16);
        set_opt(&self.fd, libc::PACKET_FANOUT, &arg).map_err(|source| AfPacketError::Io {
            iface: self.iface.clone(),
            op: "setsockopt(PACKET_FANOUT)",
            source,
        })
    }

    /// The interface name.
    pub fn iface(&self) -> &str {
        &self.iface
    }

    /// The geometry.
    pub fn config(&self) -> &RingConfig {
        &self.cfg
    }

    /// The socket, for `poll()` over several rings.
    pub fn raw_fd(&self) -> RawFd {
        self.fd.as_raw_fd()
    }

    /// Frames skipped because the kernel captured them only in part.
    pub fn truncated(&self) -> u64 {
        self.truncated
    }

    /// The status word of block `i` (`i < block_count`).
    fn status(&self, i: usize) -> &AtomicU32 {
        let off = i * self.cfg.block_size + std::mem::offset_of!(libc::tpacket_block_desc, hdr);
        // SAFETY: (9) `i < block_count`, so the block descriptor lies inside
        // the live mapping; `block_status` is the first u32 of `hdr`, which
        // is 8-byte aligned in a page-aligned block, so the pointer is
        // aligned for AtomicU32. The kernel and this process access the
        // word concurrently only through atomic operations (the kernel
        // with barriers around plain stores, as the TPACKET ABI specifies).
        unsafe { AtomicU32::from_ptr(self.map.as_ptr().add(off).cast::<u32>()) }
    }

    /// The next block the kernel has handed over, if any (no system call).
    pub fn next_block(&mut self) -> Option<Block<'_>> {
        let i = self.next;
        if self.status(i).load(Ordering::Acquire) & libc::TP_STATUS_USER == 0 {
            return None;
        }
        let bs = self.cfg.block_size;
        // SAFETY: (10) `i < block_count`, so `i * bs` is inside the mapping
        // (at most its length); the pointer is derived from the non-null
        // mapping start, so it is non-null.
        let base = unsafe { NonNull::new_unchecked(self.map.as_ptr().add(i * bs)) };
        Some(Block {
            base,
            len: bs,
            index: i,
            ring: self,
        })
    }

    /// Wait up to `timeout_ms` (negative: forever) for a block; `Ok(true)`
    /// when one is ready. An interrupting signal returns `Ok(false)`.
    ///
    /// # Errors
    /// `poll()` failed, or the socket reports an error.
    pub fn wait(&mut self, timeout_ms: i32) -> io::Result<bool> {
        if self.status(self.next).load(Ordering::Acquire) & libc::TP_STATUS_USER != 0 {
            return Ok(true);
        }
        let ready = poll_fds(&[self.raw_fd()], timeout_ms)?;
        Ok(ready > 0 && self.status(self.next).load(Ordering::Acquire) & libc::TP_STATUS_USER != 0)
    }

    /// Ring drops counted by the last [`drops`](Self::drops) call.
    pub fn drops_so_far(&self) -> u64 {
        self.drops
    }

    /// Frames the kernel dropped because the ring was full, since the ring
    /// was opened (reads and accumulates the socket's statistics).
    ///
    /// # Errors
    /// `getsockopt(PACKET_STATISTICS)` failed.
    pub fn drops(&mut self) -> io::Result<u64> {
        let mut st = libc::tpacket_stats_v3 {
            tp_packets: 0,
            tp_drops: 0,
            tp_freeze_q_cnt: 0,
        };
        let mut len = std::mem::size_of::<libc::tpacket_stats_v3>() as libc::socklen_t;
        // SAFETY: (11) `st` and `len` are live, writable and `len` holds
        // `st`'s size; the kernel writes at most `len` bytes.
        let r = unsafe {
            libc::getsockopt(
                self.fd.as_raw_fd(),
                libc::SOL_PACKET,
                libc::PACKET_STATISTICS,
                (&mut st as *mut libc::tpacket_stats_v3).cast(),
                &mut len,
            )
        };
        if r != 0 {
            return Err(io::Error::last_os_error());
        }
        // The kernel resets its counters on every read.
        self.drops += u64::from(st.tp_drops);
        Ok(self.drops)
    }
}

impl Drop for RxRing {
    fn drop(&mut self) {
        // SAFETY: (12) `map` is the start of the mapping of exactly
        // `ring_size()` bytes made in `open`; no `Block` (which borrows
        // `self`) outlives this call, so nothing refers to it afterwards.
        // The fd is closed after this by OwnedFd's drop.
        unsafe {
            libc::munmap(self.map.as_ptr().cast(), self.cfg.ring_size());
        }
    }
}

/// `poll()` the fds for input; the number ready (0 on timeout or signal).
///
/// # Errors
/// `poll()` failed with anything but `EINTR`, or a socket has an error.
pub fn poll_fds(fds: &[RawFd], timeout_ms: i32) -> io::Result<usize> {
    let mut pfds: Vec<libc::pollfd> = fds
        .iter()
        .map(|&fd| libc::pollfd {
            fd,
            events: libc::POLLIN | libc::POLLERR,
            revents: 0,
        })
        .collect();
    // SAFETY: (13) `pfds` is a live, writable array of exactly `len()`
    // pollfd entries for the whole call.
    let r = unsafe { libc::poll(pfds.as_mut_ptr(), pfds.len() as libc::nfds_t, timeout_ms) };
    if r < 0 {
        let e = io::Error::last_os_error();
        return if e.kind() == io::ErrorKind::Interrupted {
            Ok(0)
        } else {
            Err(e)
        };
    }
    if pfds.iter().any(|p| p.revents & libc::POLLNVAL != 0) {
        return Err(io::Error::from_raw_os_error(libc::EBADF));
    }
    Ok(r as usize)
}

/// A block handed over by the kernel; given back on drop.
pub struct Block<'a> {
    /// Start of the block in the ring's mapping, `len` bytes.
    base: NonNull<u8>,
    len: usize,
    index: usize,
    ring: &'a mut RxRing,
}

impl std::fmt::Debug for Block<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Block")
            .field("iface", &self.ring.iface)
            .field("index", &self.index)
            .field("packets", &self.packets())
            .finish()
    }
}

impl Block<'_> {
    /// The block's bytes, for as long as the caller's borrow of the block.
    ///
    /// # Safety
    /// The caller must choose `'b` no longer than a borrow of `self`
    /// (shared or mutable), so that the slice is gone before `Drop` gives
    /// the block back to the kernel.
    unsafe fn bytes<'b>(&self) -> &'b [u8] {
        // SAFETY: (14) `base..base + len` is one block inside the ring's
        // live mapping (`next_block`), and the ring outlives the block. The
        // kernel handed the block over (status TP_STATUS_USER, read with
        // Acquire) and does not write it until `Drop` stores
        // TP_STATUS_KERNEL; nothing in this process writes it while a
        // slice exists (the only write is that store, in `Drop`, after
        // every borrow of the block has ended, by the caller's contract);
        // the ring is mutably borrowed by the block, so no other block or
        // slice of this one is made meanwhile.
        unsafe { std::slice::from_raw_parts(self.base.as_ptr(), self.len) }
    }

    /// Frames the kernel says the block holds.
    pub fn packets(&self) -> u32 {
        // SAFETY: (15) the slice lives only within this call, inside the
        // borrow of `self`.
        let data = unsafe { self.bytes() };
        read_u32(
            data,
            BLOCK_DESC_HDR + std::mem::offset_of!(libc::tpacket_hdr_v1, num_pkts),
        )
        .unwrap_or(0)
    }

    /// Append the block's frames to `out` (received frames only: frames
    /// sent on the interface and frames captured in part are skipped).
    /// Offsets the kernel wrote are checked against the block, so a
    /// corrupt block yields fewer frames, never a read outside it.
    pub fn frames_into<'b>(&'b mut self, out: &mut Vec<&'b [u8]>) {
        self.walk(|frame, _| out.push(frame));
    }

    /// [`Self::frames_into`] with each frame's receive time: the kernel's
    /// timestamp of the frame (`tp_sec`, `tp_nsec`), on the realtime clock
    /// (CLOCK_REALTIME, as `SystemTime`), for measurements that compare
    /// arrival times with instants other processes logged.
    pub fn timed_frames_into<'b>(&'b mut self, out: &mut Vec<(SystemTime, &'b [u8])>) {
        self.walk(|frame, h| out.push((h.time(), frame)));
    }

    /// Call `f` with each received, whole frame of the block and its
    /// header, in order.
    fn walk<'b>(&'b mut self, mut f: impl FnMut(&'b [u8], &FrameHdr)) {
        // SAFETY: (16) `'b` is this call's mutable borrow of `self`: the
        // frames handed to `f` cannot outlive the block.
        let data: &'b [u8] = unsafe { self.bytes() };
        let hdr = BLOCK_DESC_HDR;
        let first = read_u32(
            data,
            hdr + std::mem::offset_of!(libc::tpacket_hdr_v1, offset_to_first_pkt),
        );
        let mut off = first.map_or(usize::MAX, |o| o as usize);
        for _ in 0..self.packets() {
            let Some(h) = FrameHdr::read(data, off) else {
                break;
            };
            let start = off.saturating_add(h.mac as usize);
            match data.get(start..start.saturating_add(h.snaplen as usize)) {
                Some(frame) if h.pkttype != libc::PACKET_OUTGOING => {
                    if h.snaplen < h.len {
                        self.ring.truncated += 1;
                    } else {
                        f(frame, &h);
                    }
                }
                Some(_) => {}
                None => break,
            }
            if h.next == 0 {
                break;
            }
            off = off.saturating_add(h.next as usize);
        }
    }
}

impl Drop for Block<'_> {
    fn drop(&mut self) {
        // Every slice of the block borrowed `self`, so none is alive here.
        let ring = &mut *self.ring;
        ring.status(self.index)
            .store(libc::TP_STATUS_KERNEL, Ordering::Release);
        ring.next = (self.index + 1) % ring.cfg.block_count;
    }
}

fn read_u32(data: &[u8], off: usize) -> Option<u32> {
    let b = data.get(off..off.checked_add(4)?)?;
    Some(u32::from_ne_bytes(b.try_into().ok()?))
}

fn read_u16(data: &[u8], off: usize) -> Option<u16> {
    let b = data.get(off..off.checked_add(2)?)?;
    Some(u16::from_ne_bytes(b.try_into().ok()?))
}

/// The fields of a `tpacket3_hdr` (and its `sockaddr_ll`) the ring reads.
struct FrameHdr {
    next: u32,
    snaplen: u32,
    len: u32,
    mac: u16,
    pkttype: u8,
    /// The kernel's receive timestamp: seconds and nanoseconds since the
    /// Unix epoch.
    sec: u32,
    nsec: u32,
}

impl FrameHdr {
    fn read(data: &[u8], off: usize) -> Option<FrameHdr> {
        use std::mem::offset_of;
        type H = libc::tpacket3_hdr;
        type L = libc::sockaddr_ll;
        let f = |o: usize| off.checked_add(o);
        Some(FrameHdr {
            next: read_u32(data, f(offset_of!(H, tp_next_offset))?)?,
            snaplen: read_u32(data, f(offset_of!(H, tp_snaplen))?)?,
            len: read_u32(data, f(offset_of!(H, tp_len))?)?,
            mac: read_u16(data, f(offset_of!(H, tp_mac))?)?,
            pkttype: *data.get(f(SLL_OFFSET + offset_of!(L, sll_pkttype))?)?,
            sec: read_u32(data, f(offset_of!(H, tp_sec))?)?,
            nsec: read_u32(data, f(offset_of!(H, tp_nsec))?)?,
        })
    }

    /// The receive timestamp as a realtime instant (a nanosecond field
    /// out of range, which the kernel never writes, is capped).
    fn time(&self) -> SystemTime {
        UNIX_EPOCH
            + Duration::from_secs(u64::from(self.sec))
            + Duration::from_nanos(u64::from(self.nsec.min(999_999_999)))
    }
}

/// A transmit socket bound to one interface, with `PACKET_QDISC_BYPASS`.
pub struct TxPort {
    fd: OwnedFd,
    iface: String,
    iovs: Vec<libc::iovec>,
    msgs: Vec<libc::mmsghdr>,
}

// SAFETY: (19) the raw pointers in `iovs` and `msgs` point into the frames
// and iovecs of one `send_batch` call only: both vectors are cleared and
// refilled at the start of every call and never read outside it, so a
// `TxPort` carries no pointer that is dereferenced after it moves to
// another thread; the socket descriptor is owned and usable from any
// thread.
unsafe impl Send for TxPort {}

impl std::fmt::Debug for TxPort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TxPort")
            .field("iface", &self.iface)
            .finish_non_exhaustive()
    }
}

/// What one [`TxPort::send_batch`] call did.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct SendOutcome {
    /// Frames the kernel accepted.
    pub sent: usize,
    /// Frames refused (each skipped after its error).
    pub failed: usize,
    /// The OS error of the last refused frame.
    pub last_error: Option<i32>,
}

impl TxPort {
    /// A transmit socket on `iface`. It is bound with protocol 0, so it
    /// receives nothing; frames bypass the qdisc layer (straight to the
    /// driver queue; where the kernel lacks the option they go through
    /// the qdisc).
    ///
    /// # Errors
    /// An unknown interface or a failed system call.
    pub fn open(iface: &str) -> Result<TxPort, AfPacketError> {
        let ifindex = if_index(iface)?;
        let fd = packet_socket(iface)?;
        let one: libc::c_int = 1;
        let _ = set_opt(&fd, libc::PACKET_QDISC_BYPASS, &one);
        bind_to(&fd, ifindex, 0).map_err(|source| AfPacketError::Io {
            iface: iface.to_string(),
            op: "bind",
            source,
        })?;
        Ok(TxPort {
            fd,
            iface: iface.to_string(),
            iovs: Vec::with_capacity(TX_BURST),
            msgs: Vec::with_capacity(TX_BURST),
        })
    }

    /// The interface name.
    pub fn iface(&self) -> &str {
        &self.iface
    }

    /// Send every frame of `frames` (whole Ethernet frames), [`TX_BURST`]
    /// per `sendmmsg`. A frame the kernel refuses (too long for the MTU, a
    /// full driver queue, the link down) is counted as failed and skipped;
    /// the rest are still sent.
    pub fn send_batch<F: AsRef<[u8]>>(&mut self, frames: &[F]) -> SendOutcome {
        let mut out = SendOutcome::default();
        for chunk in frames.chunks(TX_BURST) {
            self.iovs.clear();
            self.iovs.extend(chunk.iter().map(|f| {
                let f = f.as_ref();
                libc::iovec {
                    iov_base: f.as_ptr() as *mut libc::c_void,
                    iov_len: f.len(),
                }
            }));
            self.msgs.clear();
            for iov in self.iovs.iter_mut() {
                // SAFETY: (17) mmsghdr is a plain C struct of integers and
                // pointers, for which all-zero bytes are a valid value
                // (null name and control, no flags).
                let mut m: libc::mmsghdr = unsafe { std::mem::zeroed() };
                m.msg_hdr.msg_iov = iov;
                m.msg_hdr.msg_iovlen = 1;
                self.msgs.push(m);
            }
            let mut i = 0;
            while i < self.msgs.len() {
                let rest = &mut self.msgs[i..];
                // SAFETY: (18) `rest` is a live array of `rest.len()`
                // (<= TX_BURST) mmsghdr; each points to one iovec in
                // `self.iovs`, which is not touched during the call, and
                // each iovec to a frame borrowed from `frames` for the whole
                // call. The kernel only reads the buffers and writes
                // `msg_len`.
                let r = unsafe {
                    libc::sendmmsg(
                        self.fd.as_raw_fd(),
                        rest.as_mut_ptr(),
                        rest.len() as libc::c_uint,
                        0,
                    )
                };
                if r > 0 {
                    i += r as usize;
                    out.sent += r as usize;
                } else {
                    let e = io::Error::last_os_error();
                    if e.kind() == io::ErrorKind::Interrupted {
                        continue;
                    }
                    out.failed += 1;
                    out.last_error = e.raw_os_error();
                    i += 1;
                }
            }
            // Do not keep pointers into `frames` past the call.
            self.msgs.clear();
            self.iovs.clear();
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn default_ring_config_is_valid() {
        assert_eq!(RingConfig::default().validate(), Ok(()));
        assert_eq!(RingConfig::default().ring_size(), 16 << 20);
    }

    #[test]
    fn ring_config_rejects_bad_geometry_with_the_value() {
        let d = RingConfig::default();
        let cases = [
            (
                RingConfig {
                    block_size: 3 << 12,
                    ..d
                },
                RingConfigError::BlockSize { got: 3 << 12 },
            ),
            (
                RingConfig {
                    block_size: 2048,
                    frame_size: 1024,
                    ..d
                },
                RingConfigError::BlockSize { got: 2048 },
            ),
            (
                RingConfig {
                    block_count: 1,
                    ..d
                },
                RingConfigError::TooFewBlocks { got: 1 },
            ),
            (
                RingConfig {
                    block_size: 1 << 27,
                    block_count: 16,
                    ..d
                },
                RingConfigError::RingTooLarge {
                    block_size: 1 << 27,
                    block_count: 16,
                },
            ),
            (
                RingConfig {
                    frame_size: 2050,
                    ..d
                },
                RingConfigError::FrameUnaligned { got: 2050 },
            ),
            (
                RingConfig {
                    frame_size: 16,
                    ..d
                },
                RingConfigError::FrameSize {
                    got: 16,
                    min: RingConfig::MIN_FRAME_SIZE,
                    max: (1 << 18) - BLOCK_HDR_LEN,
                },
            ),
            (
                RingConfig {
                    block_timeout_ms: 0,
                    ..d
                },
                RingConfigError::Timeout { got: 0 },
            ),
        ];
        for (cfg, want) in cases {
            assert_eq!(cfg.validate(), Err(want.clone()), "{cfg:?}");
            assert!(!want.to_string().is_empty());
        }
    }

    #[test]
    fn interface_names_are_checked_before_any_system_call() {
        for bad in ["", "a/b", "nul\0x", "sixteen-chars-xx"] {
            assert!(
                matches!(if_index(bad), Err(AfPacketError::BadName { .. })),
                "{bad:?}"
            );
        }
        assert!(matches!(
            if_index("nh-no-such-if0"),
            Err(AfPacketError::NoSuchInterface { .. })
        ));
    }

    #[test]
    fn frame_header_reads_stay_inside_the_block() {
        let data = vec![0u8; 40];
        assert!(FrameHdr::read(&data, 0).is_none());
        assert!(FrameHdr::read(&data, usize::MAX - 2).is_none());
        assert_eq!(read_u32(&data, 38), None);
        assert_eq!(read_u16(&data, 38), Some(0));
    }

    #[test]
    fn frame_header_gives_the_kernel_timestamp_as_a_realtime_instant() {
        use std::mem::offset_of;
        type H = libc::tpacket3_hdr;
        let mut data = vec![0u8; SLL_OFFSET + std::mem::size_of::<libc::sockaddr_ll>()];
        let put =
            |d: &mut Vec<u8>, at: usize, v: u32| d[at..at + 4].copy_from_slice(&v.to_ne_bytes());
        put(&mut data, offset_of!(H, tp_sec), 1_764_000_000);
        put(&mut data, offset_of!(H, tp_nsec), 123_456_789);
        let h = FrameHdr::read(&data, 0).expect("a whole header");
        assert_eq!(
            h.time().duration_since(UNIX_EPOCH).unwrap(),
            Duration::new(1_764_000_000, 123_456_789)
        );
        // Nanoseconds out of range do not overflow into a panic.
        put(&mut data, offset_of!(H, tp_nsec), u32::MAX);
        let h = FrameHdr::read(&data, 0).expect("a whole header");
        assert_eq!(
            h.time().duration_since(UNIX_EPOCH).unwrap(),
            Duration::new(1_764_000_000, 999_999_999)
        );
    }
}
