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
        if setsockopt_int(sock, force, v).is_err() {
            setsockopt_int(sock, plain, v)?;
        }
    }
    Ok((
        getsockopt_int(sock, libc::SO_RCVBUF)?,
        getsockopt_int(sock, libc::SO_SNDBUF)?,
    ))
}

fn setsockopt_int(sock: &UdpSocket, opt: libc::c_int, v: libc::c_int) -> io::Result<()> {
    // SAFETY: (1) the fd is an open socket owned by `sock`; (2) the option
    // value points at a live c_int and its exact size is given.
    let r = unsafe {
        libc::setsockopt(
            sock.as_raw_fd(),
            libc::SOL_SOCKET,
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

/// Buffers for up to [`BATCH`] received datagrams and their sources.
pub struct RecvBatch {
    buf: Vec<u8>,
    lens: [usize; BATCH],
    from: [Option<SocketAddr>; BATCH],
    n: usize,
}

impl std::fmt::Debug for RecvBatch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("RecvBatch").field("n", &self.n).finish()
    }
}

impl Default for RecvBatch {
    fn default() -> Self {
        RecvBatch {
            buf: vec![0u8; BATCH * SLOT],
            lens: [0; BATCH],
            from: [None; BATCH],
            n: 0,
        }
    }
}

impl RecvBatch {
    /// Take up to [`BATCH`] datagrams waiting on `sock` with one
    /// `recvmmsg` that does not block. Returns how many (0 when none
    /// waited); [`RecvBatch::packet`] and [`RecvBatch::source`] read them.
    pub fn recv(&mut self, sock: &UdpSocket) -> io::Result<usize> {
        self.n = 0;
        let mut iov: [libc::iovec; BATCH] = [libc::iovec {
            iov_base: std::ptr::null_mut(),
            iov_len: 0,
        }; BATCH];
        // SAFETY: sockaddr_storage is plain old data; all-zero is valid.
        let mut names: [libc::sockaddr_storage; BATCH] = unsafe { std::mem::zeroed() };
        // SAFETY: mmsghdr is plain old data; all-zero is a valid value
        // (null pointers, zero lengths).
        let mut hdrs: [libc::mmsghdr; BATCH] = unsafe { std::mem::zeroed() };
        for (k, chunk) in self.buf.chunks_exact_mut(SLOT).enumerate() {
            iov[k].iov_base = chunk.as_mut_ptr().cast();
            iov[k].iov_len = SLOT;
            hdrs[k].msg_hdr.msg_iov = &mut iov[k];
            hdrs[k].msg_hdr.msg_iovlen = 1;
            hdrs[k].msg_hdr.msg_name = (&mut names[k] as *mut libc::sockaddr_storage).cast();
            hdrs[k].msg_hdr.msg_namelen = size_of::<libc::sockaddr_storage>() as libc::socklen_t;
        }
        let r = loop {
            // SAFETY: (1) each of the BATCH headers points at its own
            // iovec, which points at a distinct SLOT-byte slice of
            // `self.buf`, and at its own sockaddr_storage with that size,
            // all alive and not otherwise borrowed during the call; (2) no
            // control buffer is given; (3) MSG_DONTWAIT keeps the call
            // from blocking; (4) a null timeout is allowed.
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
        for (k, h) in hdrs.iter().take(n).enumerate() {
            self.lens[k] = (h.msg_len as usize).min(SLOT);
            self.from[k] = from_sockaddr(&names[k], h.msg_hdr.msg_namelen);
        }
        self.n = n;
        Ok(n)
    }

    /// How many datagrams the last [`RecvBatch::recv`] took.
    pub fn len(&self) -> usize {
        self.n
    }

    /// Whether the last [`RecvBatch::recv`] took none.
    pub fn is_empty(&self) -> bool {
        self.n == 0
    }

    /// Datagram `i` of the last [`RecvBatch::recv`] (empty past its count).
    /// One longer than [`MAX_PACKET`] is cut to `MAX_PACKET + 1` bytes.
    pub fn packet(&self, i: usize) -> &[u8] {
        if i >= self.n {
            return &[];
        }
        &self.buf[i * SLOT..i * SLOT + self.lens[i]]
    }

    /// The sender of datagram `i` (`None` past the count or for an address
    /// family other than IPv4 and IPv6).
    pub fn source(&self, i: usize) -> Option<SocketAddr> {
        if i >= self.n {
            return None;
        }
        self.from[i]
    }
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
}

/// Send `pkts`, datagram `k` to `to[k]` (`to` empty: the socket is
/// connected), with one `sendmmsg` per [`BATCH`] datagrams. A datagram the
/// socket refuses (a full buffer, ECONNREFUSED from an earlier ICMP
/// error, a size over 64 KiB) is skipped and counted; the rest still go.
/// `to` must be empty or as long as `pkts`, else nothing is sent and the
/// outcome holds an `InvalidInput` error.
pub fn send_batch<P: AsRef<[u8]>>(sock: &UdpSocket, pkts: &[P], to: &[SocketAddr]) -> SendOutcome {
    let mut out = SendOutcome::default();
    if !to.is_empty() && to.len() != pkts.len() {
        out.failed = pkts.len();
        out.error = Some(io::Error::new(
            io::ErrorKind::InvalidInput,
            "one address per datagram",
        ));
        return out;
    }
    let mut at = 0;
    while at < pkts.len() {
        let chunk = &pkts[at..pkts.len().min(at + BATCH)];
        let mut iov: [libc::iovec; BATCH] = [libc::iovec {
            iov_base: std::ptr::null_mut(),
            iov_len: 0,
        }; BATCH];
        // SAFETY: sockaddr_storage is plain old data; all-zero is valid.
        let mut names: [libc::sockaddr_storage; BATCH] = unsafe { std::mem::zeroed() };
        // SAFETY: mmsghdr is plain old data; all-zero is a valid value
        // (null pointers, zero lengths).
        let mut hdrs: [libc::mmsghdr; BATCH] = unsafe { std::mem::zeroed() };
        for (k, p) in chunk.iter().enumerate() {
            let p = p.as_ref();
            iov[k].iov_base = p.as_ptr() as *mut libc::c_void;
            iov[k].iov_len = p.len();
            hdrs[k].msg_hdr.msg_iov = &mut iov[k];
            hdrs[k].msg_hdr.msg_iovlen = 1;
            if let Some(a) = to.get(at + k) {
                let (ss, len) = to_sockaddr(a);
                names[k] = ss;
                hdrs[k].msg_hdr.msg_name = (&mut names[k] as *mut libc::sockaddr_storage).cast();
                hdrs[k].msg_hdr.msg_namelen = len;
            }
        }
        // SAFETY: (1) `hdrs[..chunk.len()]` are initialised headers whose
        // iovecs point into `chunk`'s buffers and whose names point into
        // `names`, all alive and unmoved for the call; (2) the kernel only
        // reads them (it writes `msg_len`, inside `hdrs`).
        let r = unsafe {
            libc::sendmmsg(
                sock.as_raw_fd(),
                hdrs.as_mut_ptr(),
                chunk.len() as libc::c_uint,
                0,
            )
        };
        if r > 0 {
            out.sent += r as usize;
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
        // The first datagram of the chunk was refused: skip it.
        out.failed += 1;
        out.error.get_or_insert(e);
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
