//! AF_XDP live ports (Linux, the `afxdp` feature): one socket per
//! interface queue, through libxdp's xsk API.
//!
//! An [`XskPort`] owns a UMEM (an anonymous mapping cut into
//! [`XskConfig::frame_size`] chunks), its fill and completion rings, and
//! one AF_XDP socket bound to one queue of one interface, with an rx ring
//! (when it receives) and a tx ring. Receiving sockets get libxdp's default
//! XDP program, which redirects every frame of their queue to the socket
//! (so the kernel's stack no longer sees them); transmit-only sockets load
//! no program. The ring operations of `xdp/xsk.h` are inline C, so
//! `afxdp/shim.c` (built by `build.rs`) compiles them into a few batch
//! calls; this module is the safe wrapper.
//!
//! [`XskPort::split`] gives the receive half ([`XskRx`]) and the transmit
//! half ([`XskTx`]), which touch disjoint rings and disjoint chunks, so a
//! port can be an input and an output of the same loop:
//!
//! * receive chunks (`0..rx_frames`) are in the fill ring, in the rx ring,
//!   or lent to the caller by [`XskRx::next_batch`] until the
//!   [`XskBatch`] drops, which gives them back to the fill ring (which has
//!   room for all of them). The frames of a batch are borrowed from it,
//!   so none outlives its chunk's return to the kernel.
//! * transmit chunks (`rx_frames..rx_frames + tx_frames`) are free (owned
//!   by [`XskTx`]), on the tx ring, in the kernel, or on the completion
//!   ring; [`XskTx::send_batch`] copies each frame into a free chunk,
//!   queues the batch, asks the kernel to send it (`sendto`, repeated
//!   while the kernel says it has more to do) and takes completed chunks
//!   back.
//!
//! Modes ([`XdpMode`]): native (driver) mode attaches the program to the
//! driver, generic (SKB) mode runs it on socket buffers and works on any
//! interface; `auto` tries native mode first. On veth both work, in copy
//! mode (the frame is copied into the UMEM chunk). When the rx ring is
//! empty the caller waits with `poll()` on [`XskRx::raw_fd`], as with the
//! AF_PACKET rings (see `live`).
#![allow(unsafe_code)]

use std::ffi::{CStr, CString};
use std::io;
use std::os::fd::RawFd;
use std::ptr::NonNull;
use std::sync::Arc;

use thiserror::Error;

use crate::afpacket::SendOutcome;

mod ffi {
    use std::ffi::{c_char, c_int, c_void};

    /// `struct nh_xsk` of shim.c (opaque).
    #[repr(C)]
    pub struct NhXsk {
        _private: [u8; 0],
    }

    /// `struct nh_xsk_config` of shim.c.
    #[repr(C)]
    pub struct NhXskConfig {
        pub queue: u32,
        pub frame_size: u32,
        pub rx_frames: u32,
        pub tx_frames: u32,
        pub mode: u32,
    }

    pub const MODE_AUTO: u32 = 0;
    pub const MODE_SKB: u32 = 1;
    pub const MODE_NATIVE: u32 = 2;
    pub const MODE_TX_ONLY: u32 = 3;

    extern "C" {
        pub fn nh_xsk_open(
            ifname: *const c_char,
            cfg: *const NhXskConfig,
            out: *mut *mut NhXsk,
            mode_used: *mut u32,
            err: *mut c_char,
            errlen: usize,
        ) -> c_int;
        pub fn nh_xsk_close(s: *mut NhXsk);
        pub fn nh_xsk_fd(s: *const NhXsk) -> c_int;
        pub fn nh_xsk_area(s: *const NhXsk) -> *mut c_void;
        pub fn nh_xsk_rx_peek(s: *mut NhXsk, max: u32, addr: *mut u64, len: *mut u32) -> u32;
        pub fn nh_xsk_rx_release(s: *mut NhXsk) -> c_int;
        pub fn nh_xsk_tx_reclaim(s: *mut NhXsk, addr: *mut u64, max: u32) -> u32;
        pub fn nh_xsk_tx_submit(s: *mut NhXsk, addr: *const u64, len: *const u32, n: u32) -> u32;
        pub fn nh_xsk_tx_pending(s: *const NhXsk) -> u32;
        pub fn nh_xsk_tx_kick(s: *mut NhXsk) -> c_int;
        pub fn nh_xsk_stats(s: *const NhXsk, out: *mut u64) -> c_int;
    }
}

/// Frames taken from the rx ring per [`XskRx::next_batch`].
pub const RX_BATCH: usize = 256;

/// How the XDP program of a receiving socket is attached.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum XdpMode {
    /// Native (driver) mode if the driver has it, else generic (SKB) mode.
    #[default]
    Auto,
    /// Generic mode: runs on socket buffers, any interface, copy mode.
    Skb,
    /// Native (driver) mode only.
    Native,
}

impl XdpMode {
    /// `auto`, `skb` or `native`.
    pub fn name(self) -> &'static str {
        match self {
            XdpMode::Auto => "auto",
            XdpMode::Skb => "skb",
            XdpMode::Native => "native",
        }
    }
}

impl std::str::FromStr for XdpMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "auto" => Ok(XdpMode::Auto),
            "skb" | "generic" => Ok(XdpMode::Skb),
            "native" | "drv" => Ok(XdpMode::Native),
            _ => Err(format!("unknown XDP mode '{s}' (auto, skb or native)")),
        }
    }
}

/// How a socket was set up in the end.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum Attached {
    /// Receives through a program in generic (SKB) mode.
    Skb,
    /// Receives through a program in native (driver) mode.
    Native,
    /// Transmit only: no rx ring, no program.
    TxOnly,
}

impl Attached {
    /// `afxdp-skb`, `afxdp-native` or `afxdp-tx` (for summaries).
    pub fn name(self) -> &'static str {
        match self {
            Attached::Skb => "afxdp-skb",
            Attached::Native => "afxdp-native",
            Attached::TxOnly => "afxdp-tx",
        }
    }
}

/// The shape of one AF_XDP port.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub struct XskConfig {
    /// The interface queue to bind (veth has one, queue 0).
    pub queue: u32,
    /// UMEM chunk size: a power of two from 2048 to 4096. A chunk holds
    /// one frame after the kernel's 256-byte headroom, so received frames
    /// longer than `frame_size - 256` are dropped by the kernel.
    pub frame_size: u32,
    /// Receive chunks (and rx and fill ring size): a power of two, or 0
    /// for a transmit-only socket.
    pub rx_frames: u32,
    /// Transmit chunks (and tx and completion ring size): a power of two.
    pub tx_frames: u32,
    /// How a receiving socket's program is attached.
    pub mode: XdpMode,
}

impl Default for XskConfig {
    fn default() -> Self {
        XskConfig {
            queue: 0,
            frame_size: 2048,
            rx_frames: 4096,
            tx_frames: 2048,
            mode: XdpMode::Auto,
        }
    }
}

/// Why an AF_XDP port could not be opened or configured.
#[derive(Debug, Error)]
#[non_exhaustive]
pub enum XskError {
    /// A configuration value is out of range.
    #[error("AF_XDP {what} {value}: {need}")]
    Config {
        /// The setting.
        what: &'static str,
        /// Its value.
        value: u64,
        /// What is needed.
        need: &'static str,
    },
    /// The interface name cannot be passed to C (contains a NUL byte).
    #[error("interface name {0:?} contains a NUL byte")]
    BadName(String),
    /// libxdp or the kernel refused (the UMEM, the program or the bind).
    #[error("{reason}")]
    Open {
        /// The interface.
        iface: String,
        /// The step and the OS error, e.g. "binding queue 3 of veth0:
        /// Invalid argument".
        reason: String,
        /// The OS error number.
        errno: i32,
    },
}

impl XskConfig {
    /// Check the sizes.
    ///
    /// # Errors
    /// A size that is not a power of two or out of range.
    pub fn validate(&self) -> Result<(), XskError> {
        let bad = |what, value: u32, need| XskError::Config {
            what,
            value: u64::from(value),
            need,
        };
        if !(2048..=4096).contains(&self.frame_size) || !self.frame_size.is_power_of_two() {
            return Err(bad("frame size", self.frame_size, "2048 or 4096"));
        }
        if self.rx_frames != 0 && (!self.rx_frames.is_power_of_two() || self.rx_frames > 1 << 16) {
            return Err(bad(
                "receive frames",
                self.rx_frames,
                "a power of two up to 65536 (or 0)",
            ));
        }
        if !self.tx_frames.is_power_of_two() || self.tx_frames < 64 || self.tx_frames > 1 << 16 {
            return Err(bad(
                "transmit frames",
                self.tx_frames,
                "a power of two from 64 to 65536",
            ));
        }
        Ok(())
    }
}

/// The C socket, shared by the two halves; closed when both dropped.
struct Socket {
    ptr: NonNull<ffi::NhXsk>,
    area: NonNull<u8>,
    area_len: usize,
    fd: RawFd,
    iface: String,
    queue: u32,
    attached: Attached,
}

// SAFETY: (1) the C object is touched through `ptr` by exactly two
// owners: the unique `XskRx` calls only the receive functions (fill and
// rx rings, the rx bookkeeping fields) and the unique `XskTx` only the
// transmit functions (tx and completion rings); shim.c documents that the
// two sets share no mutable state, so they may run on different threads.
// `fd`, `area` and the rest are read-only after `open`. The UMEM chunks
// are split the same way (receive chunks read only by `XskRx`, transmit
// chunks written only by `XskTx`).
unsafe impl Send for Socket {}
// SAFETY: (2) see (1): shared references only reach the read-only fields
// and the disjoint ring sets.
unsafe impl Sync for Socket {}

impl Drop for Socket {
    fn drop(&mut self) {
        // SAFETY: (3) `ptr` came from a successful nh_xsk_open and is
        // closed exactly once: `Socket` is only ever behind the `Arc` of
        // the two halves, so this runs after both are gone and no batch
        // (which borrows a half) is alive.
        unsafe { ffi::nh_xsk_close(self.ptr.as_ptr()) };
    }
}

/// An AF_XDP socket on one queue of one interface, before [`split`](Self::split).
pub struct XskPort {
    sock: Arc<Socket>,
    cfg: XskConfig,
}

impl std::fmt::Debug for XskPort {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("XskPort")
            .field("iface", &self.sock.iface)
            .field("queue", &self.sock.queue)
            .field("attached", &self.sock.attached)
            .finish_non_exhaustive()
    }
}

impl XskPort {
    /// Open a socket on queue `cfg.queue` of `iface`: receiving (with the
    /// XDP program attached as `cfg.mode` says) when `cfg.rx_frames > 0`,
    /// else transmit only. Needs root (CAP_NET_RAW, CAP_BPF and
    /// CAP_NET_ADMIN for the program).
    ///
    /// # Errors
    /// A bad configuration, or libxdp or the kernel refused: the error
    /// says which step (`registering the UMEM`, `binding queue Q of
    /// IFACE`) and the OS reason.
    pub fn open(iface: &str, cfg: &XskConfig) -> Result<XskPort, XskError> {
        cfg.validate()?;
        let name = CString::new(iface).map_err(|_| XskError::BadName(iface.to_string()))?;
        let c = ffi::NhXskConfig {
            queue: cfg.queue,
            frame_size: cfg.frame_size,
            rx_frames: cfg.rx_frames,
            tx_frames: cfg.tx_frames,
            mode: match cfg.mode {
                XdpMode::Auto => ffi::MODE_AUTO,
                XdpMode::Skb => ffi::MODE_SKB,
                XdpMode::Native => ffi::MODE_NATIVE,
            },
        };
        let mut out: *mut ffi::NhXsk = std::ptr::null_mut();
        let mut mode = 0u32;
        let mut err = [0u8; 256];
        // SAFETY: (4) `name` is NUL-terminated and `c` fully initialised,
        // both live for the call; `out`, `mode` and `err` are writable and
        // `err.len()` is the size of `err`; the shim writes at most that
        // many bytes, NUL-terminated.
        let r = unsafe {
            ffi::nh_xsk_open(
                name.as_ptr(),
                &c,
                &mut out,
                &mut mode,
                err.as_mut_ptr().cast(),
                err.len(),
            )
        };
        let Some(ptr) = NonNull::new(out).filter(|_| r == 0) else {
            let reason = CStr::from_bytes_until_nul(&err)
                .map(|s| s.to_string_lossy().into_owned())
                .unwrap_or_default();
            let reason = if reason.is_empty() {
                io::Error::from_raw_os_error(r).to_string()
            } else {
                reason
            };
            return Err(XskError::Open {
                iface: iface.to_string(),
                reason,
                errno: r,
            });
        };
        // SAFETY: (5) `ptr` is a live socket from nh_xsk_open.
        let (fd, area) = unsafe { (ffi::nh_xsk_fd(ptr.as_ptr()), ffi::nh_xsk_area(ptr.as_ptr())) };
        let attached = match mode {
            ffi::MODE_NATIVE => Attached::Native,
            ffi::MODE_TX_ONLY => Attached::TxOnly,
            _ => Attached::Skb,
        };
        let area_len = (cfg.rx_frames as usize + cfg.tx_frames as usize) * cfg.frame_size as usize;
        let Some(area) = NonNull::new(area.cast::<u8>()) else {
            // SAFETY: (6) `ptr` is live and not shared with anyone yet.
            unsafe { ffi::nh_xsk_close(ptr.as_ptr()) };
            return Err(XskError::Open {
                iface: iface.to_string(),
                reason: "libxdp returned no UMEM area".into(),
                errno: libc::EINVAL,
            });
        };
        Ok(XskPort {
            sock: Arc::new(Socket {
                ptr,
                area,
                area_len,
                fd,
                iface: iface.to_string(),
                queue: cfg.queue,
                attached,
            }),
            cfg: *cfg,
        })
    }

    /// How the socket receives (or that it only transmits).
    pub fn attached(&self) -> Attached {
        self.sock.attached
    }

    /// The interface name.
    pub fn iface(&self) -> &str {
        &self.sock.iface
    }

    /// The receive half (none for a transmit-only socket) and the
    /// transmit half.
    pub fn split(self) -> (Option<XskRx>, XskTx) {
        let fs = u64::from(self.cfg.frame_size);
        let rx_frames = u64::from(self.cfg.rx_frames);
        let rx = (self.cfg.rx_frames > 0).then(|| XskRx {
            sock: self.sock.clone(),
            rx_end: rx_frames * fs,
            frame_size: fs,
            addrs: vec![0; RX_BATCH],
            lens: vec![0; RX_BATCH],
            invalid: 0,
            lost: 0,
            kernel_drops: 0,
        });
        let tx = XskTx {
            sock: self.sock,
            frame_size: self.cfg.frame_size,
            free: (0..u64::from(self.cfg.tx_frames))
                .map(|i| (rx_frames + i) * fs)
                .rev()
                .collect(),
            tx_frames: self.cfg.tx_frames as usize,
            addrs: Vec::with_capacity(RX_BATCH),
            lens: Vec::with_capacity(RX_BATCH),
        };
        (rx, tx)
    }
}

/// The receive half of an [`XskPort`].
pub struct XskRx {
    sock: Arc<Socket>,
    /// End of the receive chunks in the UMEM.
    rx_end: u64,
    frame_size: u64,
    addrs: Vec<u64>,
    lens: Vec<u32>,
    invalid: u64,
    lost: u64,
    kernel_drops: u64,
}

impl std::fmt::Debug for XskRx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("XskRx")
            .field("iface", &self.sock.iface)
            .field("queue", &self.sock.queue)
            .finish_non_exhaustive()
    }
}

/// The kernel's counts of one socket (`XDP_STATISTICS`).
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub struct XskStats {
    /// Frames dropped for lack of a fill chunk or too long for a chunk.
    pub rx_dropped: u64,
    /// Frames dropped because the rx ring was full.
    pub rx_ring_full: u64,
    /// Times the fill ring was empty when a frame came.
    pub rx_fill_ring_empty: u64,
    /// Bad descriptors on the tx ring.
    pub tx_invalid: u64,
}

impl XskRx {
    /// The socket descriptor: `poll()` it for `POLLIN` when
    /// [`next_batch`](Self::next_batch) has nothing.
    pub fn raw_fd(&self) -> RawFd {
        self.sock.fd
    }

    /// The interface name.
    pub fn iface(&self) -> &str {
        &self.sock.iface
    }

    /// How the socket receives.
    pub fn attached(&self) -> Attached {
        self.sock.attached
    }

    /// Up to [`RX_BATCH`] received frames, or `None` when the rx ring is
    /// empty. Their chunks go back to the kernel when the batch drops.
    pub fn next_batch(&mut self) -> Option<XskBatch<'_>> {
        // SAFETY: (7) the receive half is the only caller of the receive
        // functions (see (1)); `addrs` and `lens` hold RX_BATCH entries,
        // the most the shim writes; no batch is alive (it would borrow
        // `self`), so nothing is peeked.
        let n = unsafe {
            ffi::nh_xsk_rx_peek(
                self.sock.ptr.as_ptr(),
                RX_BATCH as u32,
                self.addrs.as_mut_ptr(),
                self.lens.as_mut_ptr(),
            )
        } as usize;
        (n > 0).then_some(XskBatch { rx: self, n })
    }

    /// The kernel's counts for this socket.
    ///
    /// # Errors
    /// `getsockopt(XDP_STATISTICS)` failed.
    pub fn stats(&self) -> io::Result<XskStats> {
        let mut s = [0u64; 6];
        // SAFETY: (8) `s` has the 6 entries the shim writes; the call only
        // reads the socket descriptor.
        let r = unsafe { ffi::nh_xsk_stats(self.sock.ptr.as_ptr(), s.as_mut_ptr()) };
        if r != 0 {
            return Err(io::Error::from_raw_os_error(r));
        }
        Ok(XskStats {
            rx_dropped: s[0],
            rx_ring_full: s[3],
            rx_fill_ring_empty: s[4],
            tx_invalid: s[2],
        })
    }

    /// Frames lost on this socket's way in so far: dropped by the kernel
    /// (no fill chunk, too long for a chunk, rx ring full) plus
    /// descriptors skipped as invalid. A failed statistics read keeps the
    /// kernel's last figure.
    pub fn drops_so_far(&mut self) -> u64 {
        if let Ok(s) = self.stats() {
            self.kernel_drops = s.rx_dropped + s.rx_ring_full;
        }
        self.kernel_drops + self.invalid()
    }

    /// Descriptors that pointed outside the receive chunks (skipped; a
    /// kernel bug if ever non-zero) and chunks that could not be given
    /// back to the fill ring.
    pub fn invalid(&self) -> u64 {
        self.invalid + self.lost
    }
}

/// Frames lent by [`XskRx::next_batch`]; dropping it gives their chunks
/// back to the kernel.
pub struct XskBatch<'a> {
    rx: &'a mut XskRx,
    n: usize,
}

impl std::fmt::Debug for XskBatch<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("XskBatch").field("n", &self.n).finish()
    }
}

/// Whether a descriptor `(addr, len)` lies inside the receive chunks
/// `0..rx_end` and inside one chunk of `frame_size` bytes.
fn rx_desc_ok(addr: u64, len: u32, rx_end: u64, frame_size: u64) -> bool {
    let end = addr.checked_add(u64::from(len));
    match end {
        Some(end) => end <= rx_end && len > 0 && (addr / frame_size) == ((end - 1) / frame_size),
        None => false,
    }
}

impl XskBatch<'_> {
    /// Frames in the batch.
    pub fn len(&self) -> usize {
        self.n
    }

    /// Whether the batch is empty (never, as handed out).
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// Append the batch's frames to `out`. A descriptor outside the
    /// receive chunks is skipped and counted ([`XskRx::invalid`]).
    pub fn frames_into<'b>(&'b mut self, out: &mut Vec<&'b [u8]>) {
        let rx = &mut *self.rx;
        let base = rx.sock.area.as_ptr();
        for i in 0..self.n {
            let (addr, len) = (rx.addrs[i], rx.lens[i]);
            if !rx_desc_ok(addr, len, rx.rx_end, rx.frame_size) {
                rx.invalid += 1;
                continue;
            }
            // SAFETY: (9) `addr..addr + len` lies inside one receive chunk
            // of the UMEM mapping (checked just above; the mapping is
            // `area_len >= rx_end` bytes and lives as long as `rx.sock`).
            // The kernel handed this chunk over on the rx ring and gets it
            // back only when this batch drops; the returned slices borrow
            // the batch for `'b`, so they are gone by then, and nothing
            // writes the chunk meanwhile (the transmit half writes only
            // transmit chunks).
            let f = unsafe { std::slice::from_raw_parts(base.add(addr as usize), len as usize) };
            out.push(f);
        }
    }
}

impl Drop for XskBatch<'_> {
    fn drop(&mut self) {
        // SAFETY: (10) the receive half is the only caller of the receive
        // functions (see (1)); the peeked frames are no longer borrowed
        // (their slices borrowed this batch).
        let r = unsafe { ffi::nh_xsk_rx_release(self.rx.sock.ptr.as_ptr()) };
        if r != 0 {
            self.rx.lost += self.n as u64;
        }
    }
}

/// The transmit half of an [`XskPort`].
pub struct XskTx {
    sock: Arc<Socket>,
    frame_size: u32,
    /// Free transmit chunks (UMEM offsets).
    free: Vec<u64>,
    tx_frames: usize,
    addrs: Vec<u64>,
    lens: Vec<u32>,
}

impl std::fmt::Debug for XskTx {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("XskTx")
            .field("iface", &self.sock.iface)
            .field("queue", &self.sock.queue)
            .field("free", &self.free.len())
            .finish_non_exhaustive()
    }
}

/// `sendto` rounds per frame queued before [`XskTx::send_batch`] gives up
/// on a kernel that keeps answering "again" (it sends up to 32 frames per
/// round in copy mode).
const KICK_ROUNDS_MIN: usize = 16;

impl XskTx {
    /// The interface name.
    pub fn iface(&self) -> &str {
        &self.sock.iface
    }

    /// How the socket was set up.
    pub fn attached(&self) -> Attached {
        self.sock.attached
    }

    /// Transmit chunks not in the kernel's hands.
    pub fn free_chunks(&self) -> usize {
        self.free.len()
    }

    fn reclaim(&mut self) {
        let have = self.free.len();
        let room = self.tx_frames - have;
        if room == 0 {
            return;
        }
        self.free.resize(self.tx_frames, 0);
        // SAFETY: (11) the transmit half is the only caller of the
        // transmit functions (see (1)); `free[have..]` has `room` writable
        // entries, the most the shim writes.
        let n = unsafe {
            ffi::nh_xsk_tx_reclaim(
                self.sock.ptr.as_ptr(),
                self.free.as_mut_ptr().add(have),
                room as u32,
            )
        } as usize;
        self.free.truncate(have + n);
    }

    /// Ask the kernel to send what is queued, until the tx ring is empty
    /// or it refuses; the frames it dropped (`EBUSY`, one per answer) and
    /// the last error.
    fn kick(&mut self, queued: usize) -> (usize, Option<i32>) {
        let mut dropped = 0;
        let mut last = None;
        for _ in 0..(queued / 8 + KICK_ROUNDS_MIN) {
            // SAFETY: (12) transmit functions from the transmit half only.
            if unsafe { ffi::nh_xsk_tx_pending(self.sock.ptr.as_ptr()) } == 0 {
                break;
            }
            // SAFETY: (13) as (12); sendto with no buffer only wakes the
            // kernel's transmit path.
            match unsafe { ffi::nh_xsk_tx_kick(self.sock.ptr.as_ptr()) } {
                0 => {}
                libc::EAGAIN | libc::EINTR | libc::ENOBUFS => {}
                libc::EBUSY => {
                    dropped += 1;
                    last = Some(libc::EBUSY);
                }
                e => {
                    last = Some(e);
                    break;
                }
            }
        }
        self.reclaim();
        (dropped, last)
    }

    /// Send every frame of `frames` (whole Ethernet frames): copy each
    /// into a free transmit chunk, queue them on the tx ring and have the
    /// kernel send them. A frame that is empty or longer than a chunk, or
    /// that finds no free chunk even after the kernel was asked to send
    /// and completions were taken back, is counted as failed; so is each
    /// frame the device dropped (`EBUSY`). Frames still on the tx ring
    /// when the kernel refuses with another error (the link down) stay
    /// queued and go out with a later call, or hold their chunks until
    /// then, so later frames fail for lack of a chunk.
    pub fn send_batch<F: AsRef<[u8]>>(&mut self, frames: &[F]) -> SendOutcome {
        let mut out = SendOutcome::default();
        self.reclaim();
        let base = self.sock.area.as_ptr();
        for chunk in frames.chunks(RX_BATCH) {
            self.addrs.clear();
            self.lens.clear();
            for f in chunk {
                let f = f.as_ref();
                if f.is_empty() || f.len() > self.frame_size as usize {
                    out.failed += 1;
                    out.last_error = Some(libc::EMSGSIZE);
                    continue;
                }
                if self.free.is_empty() {
                    // Everything is in flight: queue what we have, let the
                    // kernel send it, take the chunks back.
                    let queued = self.submit();
                    let (dropped, err) = self.kick(queued);
                    out.sent += queued - dropped.min(queued);
                    out.failed += dropped.min(queued);
                    if err.is_some() {
                        out.last_error = err;
                    }
                }
                let Some(addr) = self
                    .free
                    .pop()
                    .filter(|&a| a as usize + f.len() <= self.sock.area_len)
                else {
                    out.failed += 1;
                    out.last_error = Some(libc::ENOBUFS);
                    continue;
                };
                // SAFETY: (14) `addr` is a free transmit chunk: it came
                // from the initial list or the completion ring, so the
                // kernel is done with it, and the receive half never
                // touches transmit chunks. `addr + f.len() <= area_len`
                // (checked when it was taken), so the copy stays inside
                // the mapping, which lives as long as `self.sock`; `f` is
                // a separate Rust slice, so the ranges do not overlap.
                unsafe {
                    std::ptr::copy_nonoverlapping(f.as_ptr(), base.add(addr as usize), f.len());
                }
                self.addrs.push(addr);
                self.lens.push(f.len() as u32);
            }
            let queued = self.submit();
            let (dropped, err) = self.kick(queued);
            out.sent += queued - dropped.min(queued);
            out.failed += dropped.min(queued);
            if err.is_some() {
                out.last_error = err;
            }
        }
        out
    }

    /// Queue `addrs`/`lens` on the tx ring; their number. The ring has
    /// room for every transmit chunk, so it takes them all.
    fn submit(&mut self) -> usize {
        let n = self.addrs.len();
        if n == 0 {
            return 0;
        }
        // SAFETY: (15) transmit functions from the transmit half only;
        // `addrs` and `lens` hold `n` entries each, read by the shim.
        let got = unsafe {
            ffi::nh_xsk_tx_submit(
                self.sock.ptr.as_ptr(),
                self.addrs.as_ptr(),
                self.lens.as_ptr(),
                n as u32,
            )
        } as usize;
        if got != n {
            // Cannot happen while the chunk accounting holds (the ring has
            // a slot per chunk); keep the chunks rather than lose them.
            self.free.extend_from_slice(&self.addrs);
        }
        self.addrs.clear();
        self.lens.clear();
        got
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn configs_are_checked() {
        assert!(XskConfig::default().validate().is_ok());
        for bad in [
            XskConfig {
                frame_size: 3000,
                ..XskConfig::default()
            },
            XskConfig {
                frame_size: 8192,
                ..XskConfig::default()
            },
            XskConfig {
                rx_frames: 1000,
                ..XskConfig::default()
            },
            XskConfig {
                tx_frames: 32,
                ..XskConfig::default()
            },
            XskConfig {
                tx_frames: 1 << 17,
                ..XskConfig::default()
            },
        ] {
            let e = bad.validate().unwrap_err().to_string();
            assert!(e.starts_with("AF_XDP "), "{e}");
        }
        assert!(XskConfig {
            rx_frames: 0,
            ..XskConfig::default()
        }
        .validate()
        .is_ok());
    }

    #[test]
    fn modes_parse() {
        for m in [XdpMode::Auto, XdpMode::Skb, XdpMode::Native] {
            assert_eq!(m.name().parse::<XdpMode>(), Ok(m));
        }
        assert!("zero".parse::<XdpMode>().unwrap_err().contains("zero"));
    }

    #[test]
    fn rx_descriptors_must_stay_in_one_receive_chunk() {
        let (end, fs) = (4 * 2048, 2048);
        assert!(rx_desc_ok(0, 60, end, fs));
        assert!(rx_desc_ok(2048 + 256, 1792, end, fs));
        assert!(!rx_desc_ok(2048 + 256, 1793, end, fs), "crosses a chunk");
        assert!(!rx_desc_ok(3 * 2048 + 256, 1793, end, fs), "past the end");
        assert!(!rx_desc_ok(end, 60, end, fs), "a transmit chunk");
        assert!(!rx_desc_ok(u64::MAX - 10, 60, end, fs), "overflow");
        assert!(!rx_desc_ok(0, 0, end, fs), "empty");
    }

    #[test]
    fn a_missing_interface_is_a_clear_error() {
        let e = XskPort::open("nh-none-xsk0", &XskConfig::default()).unwrap_err();
        let msg = e.to_string();
        assert!(msg.contains("nh-none-xsk0"), "{msg}");
        let e = XskPort::open("a\0b", &XskConfig::default()).unwrap_err();
        assert!(matches!(e, XskError::BadName(_)), "{e}");
    }

    use crate::afpacket::{poll_fds, RingConfig, RxRing, TxPort};
    use crate::netns::{enter, is_root, Namespaces};
    use std::collections::BTreeMap;
    use std::time::{Duration, Instant};

    /// Two namespaces joined by a veth pair `xa` (in `a`) -- `xb` (in
    /// `b`); `None` (the test passes, saying why) without root.
    fn veth_pair(tag: &str) -> Option<(Namespaces, String, String)> {
        let base = format!("nh-xsk-{tag}-{}", std::process::id());
        let (a, b) = (format!("{base}-a"), format!("{base}-b"));
        let mut ns = Namespaces::new();
        match ns.create(&a) {
            Ok(()) => {}
            Err(e) if !is_root() => {
                eprintln!("skipping: {e}");
                return None;
            }
            Err(e) => panic!("{e}"),
        }
        ns.create(&b).unwrap();
        ns.veth(&a, "xa", &b, "xb", None).unwrap();
        Some((ns, a, b))
    }

    /// Run `f` on a thread inside namespace `ns` (sockets keep the
    /// namespace they were opened in).
    fn in_ns<T: Send + 'static>(ns: &str, f: impl FnOnce() -> T + Send + 'static) -> T {
        let ns = ns.to_string();
        std::thread::spawn(move || {
            enter(&ns).unwrap();
            f()
        })
        .join()
        .unwrap()
    }

    /// Frame `i`: broadcast, experimental ethertype, a magic and `i`,
    /// 60 to 1,460 bytes.
    fn frame(i: u32) -> Vec<u8> {
        let mut f = vec![0xff; 6];
        f.extend_from_slice(&[0x02, 0, 0, 0, 0, 0x42, 0x88, 0xb5]);
        f.extend_from_slice(b"NHXS");
        f.extend_from_slice(&i.to_be_bytes());
        let len = 60 + (i as usize * 97) % 1400;
        while f.len() < len {
            f.push(f.len() as u8 ^ i as u8);
        }
        f
    }

    /// The index of a test frame, if `f` is one.
    fn index_of(f: &[u8]) -> Option<u32> {
        (f.len() >= 22 && f[12..18] == [0x88, 0xb5, b'N', b'H', b'X', b'S'])
            .then(|| u32::from_be_bytes([f[18], f[19], f[20], f[21]]))
    }

    fn small(mode: XdpMode) -> XskConfig {
        // Few chunks, so that every chunk is reused many times.
        XskConfig {
            rx_frames: 64,
            tx_frames: 64,
            mode,
            ..XskConfig::default()
        }
    }

    /// In both attach modes: frames sent by the peer arrive once each,
    /// byte for byte, on the socket's rx ring (more frames than chunks,
    /// so the fill ring is refilled); frames sent on its tx ring (more per
    /// call than chunks, so completions are taken back mid-call) arrive
    /// once each at the peer; an oversized frame is refused and counted.
    #[test]
    fn xsk_receives_and_sends_every_frame_on_veth() {
        const N: u32 = 600;
        for (mode, want) in [
            (XdpMode::Skb, Attached::Skb),
            (XdpMode::Native, Attached::Native),
        ] {
            let Some((_ns, a, b)) = veth_pair(mode.name()) else {
                return;
            };
            let port = in_ns(&a, move || XskPort::open("xa", &small(mode))).unwrap();
            assert_eq!(port.attached(), want);
            let (rx, mut tx) = port.split();
            let mut rx = rx.expect("a receiving socket");
            let (mut peer_tx, mut peer_rx) = in_ns(&b, || {
                let cfg = RingConfig {
                    block_size: 1 << 16,
                    block_count: 64,
                    ..RingConfig::default()
                };
                (
                    TxPort::open("xb").unwrap(),
                    RxRing::open("xb", &cfg).unwrap(),
                )
            });

            // Peer -> XSK, 32 at a time, draining in between.
            let mut seen: BTreeMap<u32, usize> = BTreeMap::new();
            let frames: Vec<Vec<u8>> = (0..N).map(frame).collect();
            for chunk in frames.chunks(32) {
                let o = peer_tx.send_batch(chunk);
                assert_eq!((o.sent, o.failed), (chunk.len(), 0), "{mode:?}");
                let end = Instant::now() + Duration::from_secs(5);
                let want_total: usize = seen.values().sum::<usize>() + chunk.len();
                while seen.values().sum::<usize>() < want_total && Instant::now() < end {
                    let Some(mut batch) = rx.next_batch() else {
                        poll_fds(&[rx.raw_fd()], 50).unwrap();
                        continue;
                    };
                    let mut got = Vec::new();
                    batch.frames_into(&mut got);
                    for f in got {
                        if let Some(i) = index_of(f) {
                            assert_eq!(f, &frames[i as usize][..], "{mode:?}: frame {i} altered");
                            *seen.entry(i).or_default() += 1;
                        }
                    }
                }
            }
            assert_eq!(seen.len(), N as usize, "{mode:?}: frames missing");
            assert!(seen.values().all(|&n| n == 1), "{mode:?}: duplicates");
            assert_eq!(rx.drops_so_far(), 0, "{mode:?}");

            // XSK -> peer: 200 per call through 64 chunks.
            let mut sent = 0;
            for chunk in frames.chunks(200) {
                let o = tx.send_batch(chunk);
                assert_eq!((o.failed, o.last_error), (0, None), "{mode:?}");
                sent += o.sent;
                // Let the peer's ring take them.
                let mut got: BTreeMap<u32, usize> = BTreeMap::new();
                let end = Instant::now() + Duration::from_secs(5);
                while got.values().sum::<usize>() < chunk.len() && Instant::now() < end {
                    if !peer_rx.wait(50).unwrap() {
                        continue;
                    }
                    let Some(mut block) = peer_rx.next_block() else {
                        continue;
                    };
                    let mut fs = Vec::new();
                    block.frames_into(&mut fs);
                    for f in fs {
                        if let Some(i) = index_of(f) {
                            assert_eq!(f, &frames[i as usize][..], "{mode:?}: frame {i} altered");
                            *got.entry(i).or_default() += 1;
                        }
                    }
                }
                let first = index_of(&chunk[0]).unwrap();
                let want: BTreeMap<u32, usize> = (first..first + chunk.len() as u32)
                    .map(|i| (i, 1))
                    .collect();
                assert_eq!(got, want, "{mode:?}: frames {first}.. at the peer");
            }
            assert_eq!(sent, N as usize);
            assert_eq!(tx.free_chunks(), 64, "{mode:?}: every chunk came back");

            let too_long = vec![0u8; 2049];
            let o = tx.send_batch(&[&too_long[..], &frames[0][..]]);
            assert_eq!(
                (o.sent, o.failed, o.last_error),
                (1, 1, Some(libc::EMSGSIZE))
            );
        }
    }

    /// A queue the interface does not have: the error names the step, the
    /// queue and the interface.
    #[test]
    fn binding_a_missing_queue_says_so() {
        let Some((_ns, a, _b)) = veth_pair("q") else {
            return;
        };
        let e = in_ns(&a, || {
            XskPort::open(
                "xa",
                &XskConfig {
                    queue: 3,
                    ..XskConfig::default()
                },
            )
        })
        .unwrap_err();
        assert!(e.to_string().contains("binding queue 3 of xa"), "{e}");
        // Transmit-only sockets bind too.
        let p = in_ns(&a, || {
            XskPort::open(
                "xa",
                &XskConfig {
                    rx_frames: 0,
                    ..XskConfig::default()
                },
            )
        })
        .unwrap();
        assert_eq!(p.attached(), Attached::TxOnly);
        let (rx, tx) = p.split();
        assert!(rx.is_none());
        assert_eq!(tx.free_chunks(), XskConfig::default().tx_frames as usize);
    }
}
