//! Batched UDP: `recvmmsg(2)` and `sendmmsg(2)` over a [`UdpSocket`], and
//! the socket buffer sizes. The forwarder's UDP listener
//! ([`crate::daemon::Daemon`]) and the tools' connected face
//! ([`crate::tools::UdpFace`]) both move datagrams through here.

use std::io;
use std::mem::size_of;
use std::net::{Ipv4Addr, Ipv6Addr, SocketAddr, SocketAddrV4, SocketAddrV6, UdpSocket};
use std::os::fd::AsRawFd;

use crate::config::MAX_PACKET;

/// Most datagrams one `recvmmsg`/`sendmmsg` call moves.
pub const BATCH: usize = 64;

/// Bytes of one receive slot: a datagram longer than [`MAX_PACKET`] is
/// truncated to `MAX_PACKET + 1` bytes, so the caller still sees that it
/// was too long (and counts it as oversized) without a 64 KiB slot.
const SLOT: usize = MAX_PACKET + 1;

/// Ask for `bytes` of receive and send buffer on `sock` (`SO_RCVBUF`,
/// `SO_SNDBUF`) and return what the kernel granted, `(receive, send)`:
/// Linux doubles the request for its bookkeeping and caps it at
/// `net.core.rmem_max`/`wmem_max` (root processes may exceed the cap with
/// the `*BUFFORCE` options, which are tried first).
pub fn set_buffers(sock: &UdpSocket, bytes: usize) -> io::Result<(usize, usize)> {
    let v = libc::c_int::try_from(bytes)
        .map_err(|_| io::Error::new(io::ErrorKind::InvalidInput, "socket buffer over 2 GiB"))?;
    for (force, plain) in [
        (libc::SO_RCVBUFFORCE, libc::SO_RCVBUF),
        (libc::SO_SNDBUFFORCE, libc::SO_SNDBUF),
    ] {
        let fd = sock.as_raw_fd();
        if setsockopt_int(fd, libc::SOL_SOCKET, force, v).is_err() {
            setsockopt_int(fd, libc::SOL_SOCKET, plain, v)?;
        }
    }
    Ok((
        getsockopt_int(sock, libc::SO_RCVBUF)?,
        getsockopt_int(sock, libc::SO_SNDBUF)?,
    ))
}

/// Set the `int` socket option `level`/`opt` of the open socket `fd`.
pub(crate) fn setsockopt_int(
    fd: std::os::fd::RawFd,
    level: libc::c_int,
    opt: libc::c_int,
    v: libc::c_int,
) -> io::Result<()> {
    // SAFETY: (1) setsockopt on a descriptor that is not an open socket
    // fails with EBADF/ENOTSOCK, nothing else; (2) the option value points
    // at a live c_int and its exact size is given; the kernel only reads
    // it.
    let r = unsafe {
        libc::setsockopt(
            fd,
            level,
            opt,
            (&v as *const libc::c_int).cast(),
            size_of::<libc::c_int>() as libc::socklen_t,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(())
}

fn getsockopt_int(sock: &UdpSocket, opt: libc::c_int) -> io::Result<usize> {
    let mut v: libc::c_int = 0;
    let mut len = size_of::<libc::c_int>() as libc::socklen_t;
    // SAFETY: (1) the fd is an open socket owned by `sock`; (2) `v` and
    // `len` are live and writable, `len` holds `v`'s size.
    let r = unsafe {
        libc::getsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
            opt,
            (&mut v as *mut libc::c_int).cast(),
            &mut len,
        )
    };
    if r < 0 {
        return Err(io::Error::last_os_error());
    }
    Ok(usize::try_from(v).unwrap_or(0))
}

/// `a` as a C socket address and its length.
pub(crate) fn to_sockaddr(a: &SocketAddr) -> (libc::sockaddr_storage, libc::socklen_t) {
    // SAFETY: sockaddr_storage is plain old data; all-zero is valid.
    let mut ss: libc::sockaddr_storage = unsafe { std::mem::zeroed() };
    let len = match a {
        SocketAddr::V4(a) => {
            let sin = libc::sockaddr_in {
                sin_family: libc::AF_INET as libc::sa_family_t,
                sin_port: a.port().to_be(),
                sin_addr: libc::in_addr {
                    s_addr: u32::from_ne_bytes(a.ip().octets()),
                },
                sin_zero: [0; 8],
            };
            // SAFETY: sockaddr_storage is larger than and aligned at least
            // as strictly as sockaddr_in; `ss` is a live local.
            unsafe { std::ptr::write((&mut ss as *mut libc::sockaddr_storage).cast(), sin) };
            size_of::<libc::sockaddr_in>()
        }
        SocketAddr::V6(a) => {
            let sin6 = libc::sockaddr_in6 {
                sin6_family: libc::AF_INET6 as libc::sa_family_t,
                sin6_port: a.port().to_be(),
                sin6_flowinfo: a.flowinfo(),
                sin6_addr: libc::in6_addr {
                    s6_addr: a.ip().octets(),
                },
                sin6_scope_id: a.scope_id(),
            };
            // SAFETY: sockaddr_storage is larger than and aligned at least
            // as strictly as sockaddr_in6; `ss` is a live local.
            unsafe { std::ptr::write((&mut ss as *mut libc::sockaddr_storage).cast(), sin6) };
            size_of::<libc::sockaddr_in6>()
        }
    };
    (ss, len as libc::socklen_t)
}

/// The address the kernel wrote into `ss` (`len` bytes), if it is IPv4 or
/// IPv6 and long enough.
fn from_sockaddr(ss: &libc::sockaddr_storage, len: libc::socklen_t) -> Option<SocketAddr> {
    let len = len as usize;
    match i32::from(ss.ss_family) {
        libc::AF_INET if len >= size_of::<libc::sockaddr_in>() => {
            // SAFETY: the family says the storage holds a sockaddr_in, the
            // kernel wrote at least its size, and the storage's alignment
            // suffices for it.
            let sin: &libc::sockaddr_in = unsafe { &*(ss as *const libc::sockaddr_storage).cast() };
            let ip = Ipv4Addr::from(sin.sin_addr.s_addr.to_ne_bytes());
            Some(SocketAddrV4::new(ip, u16::from_be(sin.sin_port)).into())
        }
        libc::AF_INET6 if len >= size_of::<libc::sockaddr_in6>() => {
            // SAFETY: as above, for sockaddr_in6.
            let sin6: &libc::sockaddr_in6 =
                unsafe { &*(ss as *const libc::sockaddr_storage).cast() };
            let ip = Ipv6Addr::from(sin6.sin6_addr.s6_addr);
            Some(
                SocketAddrV6::new(
                    ip,
                    u16::from_be(sin6.sin6_port),
                    sin6.sin6_flowinfo,
                    sin6.sin6_scope_id,
                )
                .into(),
            )
        }
        _ => None,
    }
}

/// Bytes of one receive slot with UDP GRO on: the kernel hands a run of
/// coalesced datagrams over as one message of up to 64 KiB, which must
/// not be cut. (The buffer is allocated zeroed, so only the pages a
/// message touches become resident.)
const GRO_SLOT: usize = 1 << 16;

/// Bytes of control buffer per message: room for one `int` cmsg (the GRO
/// segment size), 8-byte aligned.
const CMSG_BUF: usize = 32;

/// Ask the kernel to hand runs of datagrams from one sender that arrive
/// as one GSO packet (or that a NIC coalesced) to `sock` as one message
/// (`UDP_GRO`, Linux 5.0): [`RecvBatch::new`]`(true)` splits them again.
/// Errors when the kernel lacks the option; the socket then gets one
/// datagram per message as before.
pub fn enable_gro(sock: &UdpSocket) -> io::Result<()> {
    setsockopt_int(sock.as_raw_fd(), libc::SOL_UDP, libc::UDP_GRO, 1)
}

/// One datagram of a [`RecvBatch`]: where its bytes are and which message
/// (and so which source) it came in.
#[derive(Clone, Copy, Debug)]
struct Seg {
    start: u32,
    len: u32,
    msg: u16,
}

/// Buffers for up to [`BATCH`] received messages and their sources; each
/// message is one datagram, or with GRO ([`RecvBatch::new`]) a run of up to
/// 64 that the kernel coalesced, split again here.
pub struct RecvBatch {
    buf: Vec<u8>,
    slot: usize,
    /// One control buffer per message with GRO; empty without.
    ctrl: Vec<[u64; CMSG_BUF / 8]>,
    from: [Option<SocketAddr>; BATCH],
    segs: Vec<Seg>,
    /// Messages the last [`RecvBatch::recv`] took.
    messages: usize,
    /// Messages that arrived as a coalesced run (counted since creation).
    coalesced: u64,
}

impl std::fmt::Debug for RecvBatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecvBatch")
            .field("n", &self.segs.len())
            .field("gro", &!self.ctrl.is_empty())
            .finish()
    }
}

impl Default for RecvBatch {
    fn default() -> Self {
        RecvBatch::new(false)
    }
}

impl RecvBatch {
    /// Buffers for a socket with UDP GRO on ([`enable_gro`]) when `gro`:
    /// 64 KiB slots and the segment size read from each message's control
    /// data; else [`RecvBatch::default`].
    pub fn new(gro: bool) -> Self {
        let slot = if gro { GRO_SLOT } else { SLOT };
        RecvBatch {
            buf: vec![0u8; BATCH * slot],
            slot,
            ctrl: vec![[0u64; CMSG_BUF / 8]; if gro { BATCH } else { 0 }],
            from: [None; BATCH],
            segs: Vec::with_capacity(if gro { BATCH * GSO_SEGMENTS } else { BATCH }),
            messages: 0,
            coalesced: 0,
        }
    }

    /// Messages that arrived as a run of coalesced datagrams since this
    /// batch was made.
    pub fn coalesced(&self) -> u64 {
        self.coalesced
    }

    /// Messages the last [`RecvBatch::recv`] took (each one datagram, or
    /// with GRO a coalesced run of them).
    pub fn messages(&self) -> usize {
        self.messages
    }

    /// Take up to [`BATCH`] messages waiting on `sock` with one `recvmmsg`
    /// that does not block. Returns how many datagrams they held (0 when
    /// none waited); [`RecvBatch::packet`] and [`RecvBatch::source`] read
    /// them.
    pub fn recv(&mut self, sock: &UdpSocket) -> io::Result<usize> {
        self.segs.clear();
        self.messages = 0;
        let slot = self.slot;
        let mut iov: [libc::iovec; BATCH] = [libc::iovec {
            iov_base: std::ptr::null_mut(),
            iov_len: 0,
        }; BATCH];
        // SAFETY: sockaddr_storage is plain old data; all-zero is valid.
        let mut names: [libc::sockaddr_storage; BATCH] = unsafe { std::mem::zeroed() };
        // SAFETY: mmsghdr is plain old data; all-zero is a valid value
        // (null pointers, zero lengths).
        let mut hdrs: [libc::mmsghdr; BATCH] = unsafe { std::mem::zeroed() };
        // One pointer for every message's control buffer (`self.ctrl` is
        // not touched again until the call returns).
        let (ctrl_base, ctrl_len) = (self.ctrl.as_mut_ptr(), self.ctrl.len());
        for (k, chunk) in self.buf.chunks_exact_mut(slot).enumerate() {
            iov[k].iov_base = chunk.as_mut_ptr().cast();
            iov[k].iov_len = slot;
            hdrs[k].msg_hdr.msg_iov = &mut iov[k];
            hdrs[k].msg_hdr.msg_iovlen = 1;
            hdrs[k].msg_hdr.msg_name = (&mut names[k] as *mut libc::sockaddr_storage).cast();
            hdrs[k].msg_hdr.msg_namelen = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
            if k < ctrl_len {
                hdrs[k].msg_hdr.msg_control = ctrl_base.wrapping_add(k).cast();
                hdrs[k].msg_hdr.msg_controllen = CMSG_BUF as _;
            }
        }
        let r = loop {
            // SAFETY: (1) each of the BATCH headers points at its own
            // iovec, which points at a distinct `slot`-byte slice of
            // `self.buf`, at its own sockaddr_storage with that size and
            // (GRO) at its own CMSG_BUF-byte, 8-aligned control buffer,
            // all alive and not otherwise borrowed during the call; (2)
            // MSG_DONTWAIT keeps the call from blocking; (3) a null
            // timeout is allowed.
            let r = unsafe {
                libc::recvmmsg(
                    sock.as_raw_fd(),
                    hdrs.as_mut_ptr(),
                    BATCH as libc::c_uint,
                    libc::MSG_DONTWAIT,
                    std::ptr::null_mut(),
                )
            };
            if r >= 0 {
                break r;
            }
            let e = io::Error::last_os_error();
            match e.kind() {
                io::ErrorKind::Interrupted => continue,
                io::ErrorKind::WouldBlock => return Ok(0),
                _ => return Err(e),
            }
        };
        let n = r as usize;
        self.messages = n;
        for (k, h) in hdrs.iter().take(n).enumerate() {
            let len = (h.msg_len as usize).min(slot);
            self.from[k] = from_sockaddr(&names[k], h.msg_hdr.msg_namelen);
            let seg = gro_segment(&h.msg_hdr);
            let base = k * slot;
            if seg == 0 || seg >= len {
                self.segs.push(Seg {
                    start: base as u32,
                    len: len as u32,
                    msg: k as u16,
                });
                continue;
            }
            self.coalesced += 1;
            let mut at = 0;
            while at < len {
                let l = seg.min(len - at);
                self.segs.push(Seg {
                    start: (base + at) as u32,
                    len: l as u32,
                    msg: k as u16,
                });
                at += l;
            }
        }
        Ok(self.segs.len())
    }

    /// How many datagrams the last [`RecvBatch::recv`] took.
    pub fn len(&self) -> usize {
        self.segs.len()
    }

    /// Whether the last [`RecvBatch::recv`] took none.
    pub fn is_empty(&self) -> bool {
        self.segs.is_empty()
    }

    /// Datagram `i` of the last [`RecvBatch::recv`] (empty past its count).
    /// Without GRO one longer than [`MAX_PACKET`] is cut to
    /// `MAX_PACKET + 1` bytes; the caller sees either way that it is too
    /// long.
    pub fn packet(&self, i: usize) -> &[u8] {
        match self.segs.get(i) {
            Some(s) => &self.buf[s.start as usize..(s.start + s.len) as usize],
            None => &[],
        }
    }

    /// The sender of datagram `i` (`None` past the count or for an address
    /// family other than IPv4 and IPv6).
    pub fn source(&self, i: usize) -> Option<SocketAddr> {
        self.segs.get(i).and_then(|s| self.from[s.msg as usize])
    }
}

/// The `UDP_GRO` segment size in a received message's control data (0:
/// none, one datagram).
fn gro_segment(h: &libc::msghdr) -> usize {
    if h.msg_control.is_null() {
        return 0;
    }
    // SAFETY: `h` is a header recvmmsg filled: msg_control points at a
    // live control buffer of msg_controllen bytes (the kernel shrank the
    // length to what it wrote), which the CMSG macros walk within.
    unsafe {
        let mut c = libc::CMSG_FIRSTHDR(h);
        while !c.is_null() {
            if (*c).cmsg_level == libc::SOL_UDP && (*c).cmsg_type == libc::UDP_GRO {
                let v = std::ptr::read_unaligned(libc::CMSG_DATA(c).cast::<libc::c_int>());
                return usize::try_from(v).unwrap_or(0);
            }
            c = libc::CMSG_NXTHDR(h, c);
        }
    }
    0
}

/// What [`send_batch`] did.
#[derive(Debug, Default)]
pub struct SendOutcome {
    /// Datagrams the socket took.
    pub sent: usize,
    /// Datagrams it refused (each skipped; the others still go).
    pub failed: usize,
    /// The first error it refused one with.
    pub error: Option<io::Error>,
    /// Messages the kernel took ([`send_batch_gso`]: a message may carry
    /// several datagrams; [`send_batch`]: one each).
    pub messages: usize,
    /// [`send_batch_gso`] only: the kernel refused a GSO message (sent
    /// again as single datagrams); the caller should stop using GSO on
    /// this socket.
    pub gso_refused: bool,
}

/// Send `pkts`, datagram `k` to `to[k]` (`to` empty: the socket is
/// connected), with one `sendmmsg` per [`BATCH`] datagrams. A datagram the
/// socket refuses (a full buffer, ECONNREFUSED from an earlier ICMP
/// error, a size over 64 KiB) is skipped and counted; the rest still go.
/// `to` must be empty or as long as `pkts`, else nothing is sent and the
/// outcome holds an `InvalidInput` error.
pub fn send_batch<P: AsRef<[u8]>>(sock: &UdpSocket, pkts: &[P], to: &[SocketAddr]) -> SendOutcome {
    send(sock, pkts, to, None, false)
}

/// Most datagrams one GSO message carries (the kernel's
/// `UDP_MAX_SEGMENTS`).
const GSO_SEGMENTS: usize = 64;

/// Most bytes one GSO message carries (under the 65,507-byte UDP payload
/// limit of IPv4).
const GSO_BYTES: usize = 60 << 10;

/// Longest datagram sent as a GSO segment to `dest`: the segment size
/// plus headers must fit the route's MTU or the kernel refuses the whole
/// message. Loopback's MTU is 64 KiB; anything else is held to a
/// 1500-byte Ethernet frame (a smaller MTU makes the kernel refuse, and
/// the sender falls back, [`SendOutcome::gso_refused`]).
pub fn gso_segment_max(dest: &SocketAddr) -> usize {
    match dest {
        _ if dest.ip().is_loopback() => MAX_PACKET,
        SocketAddr::V4(_) => 1500 - 20 - 8,
        SocketAddr::V6(_) => 1500 - 40 - 8,
    }
}

/// One message of [`send_batch_gso`]: `count` datagrams from position
/// `first` of the send order, `seg` bytes each but the last (0: one
/// datagram, no GSO).
#[derive(Clone, Copy, Debug)]
struct Run {
    first: usize,
    count: usize,
    seg: usize,
}

/// Group `pkts` into GSO runs: datagrams to one destination back to back
/// (`order` sorted by destination, stable, so each destination keeps its
/// order), each run of equal sizes with at most a shorter last one, at
/// most [`GSO_SEGMENTS`] datagrams and [`GSO_BYTES`] bytes.
fn gso_runs<P: AsRef<[u8]>>(
    pkts: &[P],
    to: &[SocketAddr],
    peer: Option<SocketAddr>,
    order: &[usize],
) -> Vec<Run> {
    let dest = |i: usize| to.get(i).copied().or(peer);
    let mut runs = Vec::new();
    let mut at = 0;
    while at < order.len() {
        let i = order[at];
        let seg = pkts[i].as_ref().len();
        let max = dest(i).map_or(0, |d| gso_segment_max(&d));
        let mut count = 1;
        if seg > 0 && seg <= max {
            let mut total = seg;
            while at + count < order.len() && count < GSO_SEGMENTS {
                let j = order[at + count];
                let l = pkts[j].as_ref().len();
                if dest(j) != dest(i) || l == 0 || l > seg || total + l > GSO_BYTES {
                    break;
                }
                count += 1;
                total += l;
                if l < seg {
                    break;
                }
            }
        }
        runs.push(Run {
            first: at,
            count,
            seg: if count > 1 { seg } else { 0 },
        });
        at += count;
    }
    runs
}

/// [`send_batch`] with UDP generic segmentation offload (`UDP_SEGMENT`,
/// Linux 4.18): the datagrams to one destination go as few messages of up
/// to 64 equal-sized segments, each of which the kernel
/// carries as one packet as far as it can (over loopback to a receiver
/// with [`enable_gro`], all the way) and splits into the same datagrams
/// otherwise, so receivers see exactly what [`send_batch`] sends.
/// Datagrams to different destinations may leave in another order than
/// given; to each destination the order is kept. `peer` is the connected
/// destination when `to` is empty (it sets the segment limit,
/// [`gso_segment_max`]; `None`: no GSO). A message the kernel refuses
/// for GSO (EIO, EINVAL: no checksum offload on the route, an MTU below
/// the segment) goes again as single datagrams and sets
/// [`SendOutcome::gso_refused`], so the caller can stop asking.
pub fn send_batch_gso<P: AsRef<[u8]>>(
    sock: &UdpSocket,
    pkts: &[P],
    to: &[SocketAddr],
    peer: Option<SocketAddr>,
) -> SendOutcome {
    send(sock, pkts, to, peer, true)
}

/// [`send_batch_gso`] when `gso`, else [`send_batch`] (in the order given,
/// a message per datagram).
fn send<P: AsRef<[u8]>>(
    sock: &UdpSocket,
    pkts: &[P],
    to: &[SocketAddr],
    peer: Option<SocketAddr>,
    gso: bool,
) -> SendOutcome {
    let mut out = SendOutcome::default();
    if !to.is_empty() && to.len() != pkts.len() {
        out.failed = pkts.len();
        out.error = Some(io::Error::new(
            io::ErrorKind::InvalidInput,
            "one address per datagram",
        ));
        return out;
    }
    let mut order: Vec<usize> = (0..pkts.len()).collect();
    let runs = if gso {
        if !to.is_empty() {
            order.sort_by_key(|&i| to[i]);
        }
        gso_runs(pkts, to, peer, &order)
    } else {
        (0..pkts.len())
            .map(|first| Run {
                first,
                count: 1,
                seg: 0,
            })
            .collect()
    };
    let mut iov: Vec<libc::iovec> = order
        .iter()
        .map(|&i| {
            let p = pkts[i].as_ref();
            libc::iovec {
                iov_base: p.as_ptr() as *mut libc::c_void,
                iov_len: p.len(),
            }
        })
        .collect();
    // One pointer for every header's iovec range (`iov` is not touched
    // again): each run's `first < iov.len()`, so the ranges lie inside it.
    let iov_base = iov.as_mut_ptr();
    let mut at = 0;
    while at < runs.len() {
        let chunk = &runs[at..runs.len().min(at + BATCH)];
        // SAFETY: sockaddr_storage is plain old data; all-zero is valid.
        let mut names: [libc::sockaddr_storage; BATCH] = unsafe { std::mem::zeroed() };
        // SAFETY: mmsghdr is plain old data; all-zero is a valid value
        // (null pointers, zero lengths).
        let mut hdrs: [libc::mmsghdr; BATCH] = unsafe { std::mem::zeroed() };
        let mut ctrl = [[0u64; CMSG_BUF / 8]; BATCH];
        for (k, run) in chunk.iter().enumerate() {
            let h = &mut hdrs[k].msg_hdr;
            h.msg_iov = iov_base.wrapping_add(run.first);
            h.msg_iovlen = run.count as _;
            if let Some(a) = to.get(order[run.first]) {
                let (ss, len) = to_sockaddr(a);
                names[k] = ss;
                h.msg_name = (&mut names[k] as *mut libc::sockaddr_storage).cast();
                h.msg_namelen = len;
            }
            if run.seg > 0 {
                h.msg_control = ctrl[k].as_mut_ptr().cast();
                h.msg_controllen = CMSG_BUF as _;
                // SAFETY: msg_control points at this message's own live,
                // 8-aligned CMSG_BUF-byte buffer, which holds
                // CMSG_SPACE(2) bytes; the first header and its data lie
                // inside it, and msg_controllen is then cut to exactly
                // that one message.
                unsafe {
                    let c = libc::CMSG_FIRSTHDR(h);
                    (*c).cmsg_level = libc::SOL_UDP;
                    (*c).cmsg_type = libc::UDP_SEGMENT;
                    (*c).cmsg_len = libc::CMSG_LEN(size_of::<u16>() as u32) as _;
                    std::ptr::write_unaligned(libc::CMSG_DATA(c).cast::<u16>(), run.seg as u16);
                    h.msg_controllen = libc::CMSG_SPACE(size_of::<u16>() as u32) as _;
                }
            }
        }
        // SAFETY: (1) `hdrs[..chunk.len()]` are initialised headers whose
        // iovec ranges lie inside `iov` (each run's `count` entries from
        // `first`), pointing into `pkts`' buffers, whose names point into
        // `names` and whose control data into `ctrl`, all alive and
        // unmoved for the call; (2) the kernel only reads them (it writes
        // `msg_len`, inside `hdrs`).
        let r = unsafe {
            libc::sendmmsg(
                sock.as_raw_fd(),
                hdrs.as_mut_ptr(),
                chunk.len() as libc::c_uint,
                0,
            )
        };
        if r > 0 {
            out.sent += chunk[..r as usize].iter().map(|r| r.count).sum::<usize>();
            out.messages += r as usize;
            at += r as usize;
            continue;
        }
        let e = if r < 0 {
            io::Error::last_os_error()
        } else {
            io::Error::new(io::ErrorKind::WriteZero, "sendmmsg sent nothing")
        };
        if e.kind() == io::ErrorKind::Interrupted {
            continue;
        }
        let run = chunk[0];
        let refused = matches!(e.raw_os_error(), Some(libc::EIO | libc::EINVAL));
        if run.seg > 0 && refused {
            // Not for GSO: the same datagrams one by one.
            out.gso_refused = true;
            let one: Vec<&[u8]> = order[run.first..run.first + run.count]
                .iter()
                .map(|&i| pkts[i].as_ref())
                .collect();
            let dests: Vec<SocketAddr> = order[run.first..run.first + run.count]
                .iter()
                .filter_map(|&i| to.get(i).copied())
                .collect();
            let o = send(sock, &one, &dests, None, false);
            out.sent += o.sent;
            out.messages += o.sent;
            out.failed += o.failed;
            if let Some(e) = o.error {
                out.error.get_or_insert(e);
            }
        } else {
            // The first message of the chunk was refused (a full buffer,
            // ECONNREFUSED, EMSGSIZE): skip its datagrams.
            out.failed += run.count;
            out.error.get_or_insert(e);
        }
        at += 1;
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn pair() -> (UdpSocket, UdpSocket) {
        let a = UdpSocket::bind("127.0.0.1:0").unwrap();
        let b = UdpSocket::bind("127.0.0.1:0").unwrap();
        (a, b)
    }

    fn recv_all(sock: &UdpSocket, want: usize) -> Vec<(Vec<u8>, Option<SocketAddr>)> {
        let mut rb = RecvBatch::default();
        let mut got = Vec::new();
        let end = std::time::Instant::now() + std::time::Duration::from_secs(5);
        while got.len() < want && std::time::Instant::now() < end {
            let n = rb.recv(sock).unwrap();
            for k in 0..n {
                got.push((rb.packet(k).to_vec(), rb.source(k)));
            }
            if n == 0 {
                std::thread::sleep(std::time::Duration::from_millis(1));
            }
        }
        got
    }

    #[test]
    fn datagrams_to_several_addresses_arrive_with_their_source() {
        let (tx, rx1) = pair();
        let rx2 = UdpSocket::bind("127.0.0.1:0").unwrap();
        set_buffers(&rx1, 1 << 20).unwrap();
        let (a1, a2) = (rx1.local_addr().unwrap(), rx2.local_addr().unwrap());
        // More than one batch, alternating destinations.
        let pkts: Vec<Vec<u8>> = (0..150u32).map(|i| i.to_be_bytes().to_vec()).collect();
        let to: Vec<SocketAddr> = (0..150).map(|i| if i % 2 == 0 { a1 } else { a2 }).collect();
        let o = send_batch(&tx, &pkts, &to);
        assert_eq!((o.sent, o.failed), (150, 0), "{:?}", o.error);
        let me = tx.local_addr().unwrap();
        let g1 = recv_all(&rx1, 75);
        let g2 = recv_all(&rx2, 75);
        assert_eq!(g1.len(), 75);
        assert_eq!(g2.len(), 75);
        for (k, (p, from)) in g1.iter().enumerate() {
            assert_eq!(p, &((2 * k) as u32).to_be_bytes());
            assert_eq!(*from, Some(me));
        }
        for (k, (p, _)) in g2.iter().enumerate() {
            assert_eq!(p, &((2 * k + 1) as u32).to_be_bytes());
        }
    }

    #[test]
    fn ipv6_sources_round_trip() {
        let Ok(rx) = UdpSocket::bind("[::1]:0") else {
            return; // no IPv6 loopback on this host
        };
        let tx = UdpSocket::bind("[::1]:0").unwrap();
        let o = send_batch(&tx, &[b"six".to_vec()], &[rx.local_addr().unwrap()]);
        assert_eq!(o.sent, 1, "{:?}", o.error);
        let g = recv_all(&rx, 1);
        assert_eq!(g, vec![(b"six".to_vec(), Some(tx.local_addr().unwrap()))]);
    }

    #[test]
    fn a_datagram_over_max_packet_is_cut_one_byte_past_it() {
        let (tx, rx) = pair();
        let big = vec![7u8; MAX_PACKET + 500];
        let o = send_batch(&tx, &[big], &[rx.local_addr().unwrap()]);
        assert_eq!(o.sent, 1, "{:?}", o.error);
        let g = recv_all(&rx, 1);
        assert_eq!(g[0].0.len(), MAX_PACKET + 1);
    }

    #[test]
    fn a_refused_datagram_is_skipped_and_the_rest_still_go() {
        let (tx, rx) = pair();
        let a = rx.local_addr().unwrap();
        // 70000 bytes is over UDP's limit: EMSGSIZE for that one only.
        let pkts = vec![b"one".to_vec(), vec![0u8; 70000], b"three".to_vec()];
        let o = send_batch(&tx, &pkts, &[a, a, a]);
        assert_eq!((o.sent, o.failed), (2, 1));
        assert!(o.error.is_some());
        let g = recv_all(&rx, 2);
        let got: Vec<&[u8]> = g.iter().map(|(p, _)| p.as_slice()).collect();
        assert_eq!(got, vec![&b"one"[..], &b"three"[..]]);
        let o = send_batch(&tx, &pkts, &[a]);
        assert_eq!((o.sent, o.failed), (0, 3));
        assert_eq!(o.error.map(|e| e.kind()), Some(io::ErrorKind::InvalidInput));
    }

    /// Sizes 40..=43 in runs, so the GSO path builds equal-sized runs,
    /// shorter last ones and breaks.
    fn mixed(n: u32) -> Vec<Vec<u8>> {
        (0..n)
            .map(|i| {
                let mut p = i.to_be_bytes().to_vec();
                p.resize(40 + (i as usize / 20) % 4, 0xab);
                p
            })
            .collect()
    }

    #[test]
    fn gso_runs_group_by_destination_equal_sizes_and_caps() {
        let a: SocketAddr = "127.0.0.1:1".parse().unwrap();
        let b: SocketAddr = "127.0.0.1:2".parse().unwrap();
        let far: SocketAddr = "192.0.2.1:6363".parse().unwrap();
        let pkts: Vec<Vec<u8>> = [10, 10, 10, 7, 10, 12, 12, 3, 3]
            .iter()
            .map(|&l| vec![0u8; l])
            .collect();
        let to = [a, b, a, a, a, b, b, far, far];
        let mut order: Vec<usize> = (0..pkts.len()).collect();
        order.sort_by_key(|&i| to[i]);
        let runs = gso_runs(&pkts, &to, None, &order);
        let got: Vec<(Vec<usize>, usize)> = runs
            .iter()
            .map(|r| (order[r.first..r.first + r.count].to_vec(), r.seg))
            .collect();
        // a: 10,10,7 (shorter last ends the run), then 10 alone; b: 10,
        // then 12,12; the far address: 3,3 (under its 1472-byte limit).
        assert_eq!(
            got,
            vec![
                (vec![0, 2, 3], 10),
                (vec![4], 0),
                (vec![1], 0),
                (vec![5, 6], 12),
                (vec![7, 8], 3),
            ]
        );
        // At most 64 segments per message; a segment over the far limit
        // goes alone.
        let many = vec![vec![1u8; 100]; 130];
        let order: Vec<usize> = (0..130).collect();
        let runs = gso_runs(&many, &[], Some(a), &order);
        assert_eq!(
            runs.iter().map(|r| r.count).collect::<Vec<_>>(),
            vec![64, 64, 2]
        );
        let big = vec![vec![1u8; 1500]; 3];
        let runs = gso_runs(&big, &[far; 3], None, &[0, 1, 2]);
        assert!(runs.iter().all(|r| r.count == 1 && r.seg == 0));
        // No destination known: no GSO.
        let runs = gso_runs(&many[..3], &[], None, &[0, 1, 2]);
        assert_eq!(runs.len(), 3);
    }

    /// Send `pkts` with GSO to `rx1`/`rx2` alternately and check that each
    /// receiver gets its datagrams, whole and in order.
    fn gso_round_trip(tx: &UdpSocket, rx: [&UdpSocket; 2], gro: bool) -> [u64; 2] {
        let pkts = mixed(300);
        let addrs = [rx[0].local_addr().unwrap(), rx[1].local_addr().unwrap()];
        let to: Vec<SocketAddr> = (0..pkts.len()).map(|i| addrs[i % 2]).collect();
        let o = send_batch_gso(tx, &pkts, &to, None);
        assert_eq!((o.sent, o.failed), (300, 0), "{:?}", o.error);
        let mut coalesced = [0; 2];
        for (k, r) in rx.iter().enumerate() {
            let mut rb = RecvBatch::new(gro);
            let mut got = Vec::new();
            let end = std::time::Instant::now() + std::time::Duration::from_secs(5);
            while got.len() < 150 && std::time::Instant::now() < end {
                let n = rb.recv(r).unwrap();
                for i in 0..n {
                    assert_eq!(rb.source(i), Some(tx.local_addr().unwrap()));
                    got.push(rb.packet(i).to_vec());
                }
            }
            let want: Vec<Vec<u8>> = pkts.iter().skip(k).step_by(2).cloned().collect();
            assert_eq!(got, want, "receiver {k}");
            coalesced[k] = rb.coalesced();
        }
        coalesced
    }

    #[test]
    fn gso_datagrams_arrive_whole_and_in_order_with_and_without_gro() {
        let tx = UdpSocket::bind("127.0.0.1:0").unwrap();
        let (r1, r2) = pair();
        set_buffers(&r1, 1 << 20).unwrap();
        set_buffers(&r2, 1 << 20).unwrap();
        // Plain receivers: the kernel splits each GSO packet.
        assert_eq!(gso_round_trip(&tx, [&r1, &r2], false), [0, 0]);
        // GRO receivers: runs arrive as one message each and are split
        // here (where the kernel has UDP_GRO).
        if enable_gro(&r1).is_ok() && enable_gro(&r2).is_ok() {
            let c = gso_round_trip(&tx, [&r1, &r2], true);
            assert!(c[0] > 0 && c[1] > 0, "no coalesced message: {c:?}");
        }
    }

    #[test]
    fn a_gso_message_the_kernel_refuses_goes_again_one_by_one() {
        let (tx, rx) = pair();
        // SO_NO_CHECK (no UDP checksum) makes the kernel refuse GSO with
        // EINVAL.
        setsockopt_int(tx.as_raw_fd(), libc::SOL_SOCKET, libc::SO_NO_CHECK, 1).unwrap();
        let a = rx.local_addr().unwrap();
        let pkts = vec![vec![5u8; 50]; 10];
        let o = send_batch_gso(&tx, &pkts, &[a; 10], None);
        assert_eq!((o.sent, o.failed), (10, 0), "{:?}", o.error);
        assert!(o.gso_refused);
        assert_eq!(recv_all(&rx, 10).len(), 10);
        // An oversized datagram alone is refused (EMSGSIZE), not a GSO
        // refusal; the others still go.
        let (tx, rx) = pair();
        let a = rx.local_addr().unwrap();
        let pkts = vec![
            vec![1u8; 20],
            vec![1u8; 20],
            vec![0u8; 70000],
            vec![2u8; 20],
        ];
        let o = send_batch_gso(&tx, &pkts, &[a; 4], None);
        assert_eq!((o.sent, o.failed), (3, 1), "{:?}", o.error);
        assert!(!o.gso_refused);
        assert_eq!(recv_all(&rx, 3).len(), 3);
    }

    #[test]
    fn buffers_granted_are_at_least_the_request() {
        let (s, _) = pair();
        let (r, w) = set_buffers(&s, 4 << 20).unwrap();
        // Root (the tests' setting) may force past rmem_max; Linux
        // reports twice the request.
        if r >= 4 << 20 {
            assert!(w >= 4 << 20, "{r} {w}");
        }
        assert!(r > 0 && w > 0);
        assert!(RecvBatch::default().is_empty());
        assert_eq!(RecvBatch::default().packet(3), &[] as &[u8]);
    }
}
