//! A batched application face on the forwarder for the Repo and its bench:
//! every packet waiting on the socket is taken in one call
//! ([`Face::recv_batch`]), and the answers go out in one write
//! ([`Face::send_all`], a `writev` of the packets as they are, without
//! joining them first). A Unix stream carries TLV-framed packets: one
//! `read` of up to [`READ_CHUNK`] bytes, straight into the face's buffer,
//! yields all the whole packets in it, and only a partial packet at its
//! end is moved (to the front) before the next read. A UDP socket carries
//! one packet per datagram (the first waited for, then up to
//! [`UDP_BATCH`] more taken without waiting).
//!
//! The socket's read timeout is set only when the wait asked for is
//! shorter than the one set, or more than twice as long (it is then set to
//! three quarters of the wait), not before every read: a read that times
//! out early returns no packets, as at the deadline, and callers loop on
//! their own deadlines.

use std::io::{self, IoSlice, Read, Write};
use std::net::{SocketAddr, UdpSocket};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Result};
use nexthop_ndnd::client::Target;
use nexthop_ndnd::config::MAX_PACKET;
use nexthop_ndnd::mgmt;
use nexthop_ndnd::tools::{command_interest, rand_nonce};
use nexthop_wire::ndn::{Name, NetPacket, Packet};

/// Bytes read from a Unix stream at once (the face's buffer; a partial
/// packet left at its end always fits again with room to spare).
pub const READ_CHUNK: usize = 256 << 10;
const _: () = assert!(READ_CHUNK >= 2 * MAX_PACKET);
/// Datagrams taken from a UDP socket per [`Face::recv_batch`].
pub const UDP_BATCH: usize = 256;
/// Most packets handed to one `writev` (Linux's `IOV_MAX` is 1024).
const MAX_IOV: usize = 1024;

#[derive(Debug)]
enum Conn {
    Unix(UnixStream),
    Udp(UdpSocket),
}

/// One face on the forwarder (see the module docs).
#[derive(Debug)]
pub struct Face {
    conn: Conn,
    /// [`READ_CHUNK`] bytes: `buf[start..end]` was read from the stream
    /// and not yet taken as packets; a UDP datagram is received into it.
    buf: Vec<u8>,
    start: usize,
    end: usize,
    /// The read timeout set on the socket (`None`: none set yet).
    timeout: Option<Duration>,
}

/// The length of the TLV at the start of `buf` once its header is whole;
/// an error for a packet over [`MAX_PACKET`] (the stream cannot be
/// resynchronised after it).
fn frame_len(buf: &[u8]) -> io::Result<Option<usize>> {
    nexthop_ndnd::stream::frame_len(buf).map_err(|total| {
        io::Error::new(
            io::ErrorKind::InvalidData,
            format!("a {total}-byte packet on the face"),
        )
    })
}

/// Push to `out` the whole packets at the front of `bytes`; returns how
/// many bytes they took.
fn take_frames(bytes: &[u8], out: &mut Vec<Vec<u8>>) -> io::Result<usize> {
    let mut at = 0;
    while let Some(total) = frame_len(&bytes[at..])? {
        if bytes.len() - at < total {
            break;
        }
        out.push(bytes[at..at + total].to_vec());
        at += total;
    }
    Ok(at)
}

/// The read timeout to set for a wait of `wait` when `set` is set (see the
/// module docs); `None` when `set` will do.
fn new_timeout(set: Option<Duration>, wait: Duration) -> Option<Duration> {
    match set {
        Some(t) if t <= wait && wait <= t * 2 => None,
        _ if wait < Duration::from_millis(2) => Some(wait),
        _ => Some(wait * 3 / 4),
    }
}

/// Write all of `packets` to `w`, back to back, in as few `writev` calls
/// as the socket takes.
fn write_packets(w: &mut impl Write, packets: &[Vec<u8>]) -> io::Result<()> {
    // The first packet not wholly written, how much of it was, and the
    // bytes the last call took that are not counted yet.
    let (mut i, mut off, mut n) = (0, 0, 0);
    let mut iov: Vec<IoSlice<'_>> = Vec::with_capacity(packets.len().min(MAX_IOV));
    loop {
        while i < packets.len() && n >= packets[i].len() - off {
            n -= packets[i].len() - off;
            i += 1;
            off = 0;
        }
        off += n;
        if i == packets.len() {
            return Ok(());
        }
        iov.clear();
        iov.push(IoSlice::new(&packets[i][off..]));
        iov.extend(
            packets[i + 1..]
                .iter()
                .take(MAX_IOV - 1)
                .map(|p| IoSlice::new(p)),
        );
        n = match w.write_vectored(&iov) {
            Ok(0) => return Err(io::ErrorKind::WriteZero.into()),
            Ok(n) => n,
            Err(e) if e.kind() == io::ErrorKind::Interrupted => 0,
            Err(e) => return Err(e),
        };
    }
}

/// The network packet in a received packet and its wire bytes (a Data is
/// kept as received); Nacks, fragments and what does not decode are `None`.
pub fn net_packet(wire: Vec<u8>) -> Option<(NetPacket, Vec<u8>)> {
    match Packet::decode(&wire).ok()? {
        Packet::Interest(i) => Some((NetPacket::Interest(i), wire)),
        Packet::Data(d) => Some((NetPacket::Data(d), wire)),
        Packet::Lp(lp) if lp.nack.is_none() && lp.is_whole() => {
            let frag = lp.fragment?;
            let p = NetPacket::decode(&frag).ok()?;
            Some((p, frag))
        }
        Packet::Lp(_) => None,
    }
}

impl Face {
    /// Connect to the forwarder at `t`.
    pub fn connect(t: &Target) -> io::Result<Face> {
        let conn = match t {
            Target::Unix(p) => Conn::Unix(UnixStream::connect(p)?),
            Target::Udp(a) => {
                let bind: SocketAddr = if a.is_ipv4() {
                    SocketAddr::from(([0, 0, 0, 0], 0))
                } else {
                    SocketAddr::from(([0u16; 8], 0))
                };
                let s = UdpSocket::bind(bind)?;
                s.connect(a)?;
                Conn::Udp(s)
            }
        };
        Ok(Face::new(conn))
    }

    fn new(conn: Conn) -> Face {
        Face {
            conn,
            buf: vec![0; READ_CHUNK],
            start: 0,
            end: 0,
            timeout: None,
        }
    }

    /// Append to `out` the packets received before `deadline`: all that are
    /// waiting, or the first to arrive. Returns with none at the deadline
    /// (or a little before it, see the module docs); an error when the
    /// forwarder closed the face or the socket failed.
    pub fn recv_batch(&mut self, deadline: Instant, out: &mut Vec<Vec<u8>>) -> io::Result<()> {
        let before = out.len();
        let Face {
            conn,
            buf,
            start,
            end,
            timeout,
        } = self;
        let left = || {
            deadline
                .checked_duration_since(Instant::now())
                .filter(|d| !d.is_zero())
        };
        let timed_out = |e: &io::Error| {
            matches!(
                e.kind(),
                io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
            )
        };
        let mut set_wait = |s: &dyn Fn(Option<Duration>) -> io::Result<()>, wait| {
            if let Some(t) = new_timeout(*timeout, wait) {
                s(Some(t))?;
                *timeout = Some(t);
            }
            io::Result::Ok(())
        };
        match conn {
            Conn::Unix(s) => {
                *start += take_frames(&buf[*start..*end], out)?;
                while out.len() == before {
                    let Some(wait) = left() else { return Ok(()) };
                    set_wait(&|t| s.set_read_timeout(t), wait)?;
                    // Only a partial packet is left: move it to the front.
                    buf.copy_within(*start..*end, 0);
                    *end -= *start;
                    *start = 0;
                    let n = match s.read(&mut buf[*end..]) {
                        Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
                        Ok(n) => n,
                        Err(e) if timed_out(&e) => return Ok(()),
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                        Err(e) => return Err(e),
                    };
                    *end += n;
                    *start += take_frames(&buf[..*end], out)?;
                }
                Ok(())
            }
            Conn::Udp(s) => {
                let Some(wait) = left() else { return Ok(()) };
                set_wait(&|t| s.set_read_timeout(t), wait)?;
                match s.recv(buf) {
                    Ok(n) => out.push(buf[..n].to_vec()),
                    Err(e) if timed_out(&e) => return Ok(()),
                    Err(e) => return Err(e),
                }
                s.set_nonblocking(true)?;
                let mut r = Ok(());
                for _ in 1..UDP_BATCH {
                    match s.recv(buf) {
                        Ok(n) => out.push(buf[..n].to_vec()),
                        Err(e) => {
                            if e.kind() != io::ErrorKind::WouldBlock {
                                r = Err(e);
                            }
                            break;
                        }
                    }
                }
                s.set_nonblocking(false)?;
                r
            }
        }
    }

    /// Send `packets` (wire bytes): one `writev` on a stream (more only
    /// when the socket takes part of them), a datagram each on UDP.
    pub fn send_all(&mut self, packets: &[Vec<u8>]) -> io::Result<()> {
        if packets.is_empty() {
            return Ok(());
        }
        match &mut self.conn {
            Conn::Unix(s) => write_packets(s, packets),
            Conn::Udp(s) => {
                for p in packets {
                    s.send(p)?;
                }
                Ok(())
            }
        }
    }

    /// Register (`verb` "register") or unregister `prefix` for this face
    /// with the forwarder's `rib` module and wait up to `timeout` for the
    /// answer; packets that are not the answer are dropped, so call it
    /// before traffic flows.
    pub fn rib(&mut self, verb: &str, prefix: &Name, timeout: Duration) -> Result<()> {
        let cmd = command_interest(verb, prefix, rand_nonce());
        self.send_all(&[cmd.to_wire()])?;
        let end = Instant::now() + timeout;
        let mut got = Vec::new();
        while Instant::now() < end {
            got.clear();
            self.recv_batch(end, &mut got)?;
            for w in got.drain(..) {
                let Some((NetPacket::Data(d), _)) = net_packet(w) else {
                    continue;
                };
                if d.name != cmd.name {
                    continue;
                }
                return check_rib_answer(verb, prefix, d.content.as_deref().unwrap_or_default());
            }
        }
        Err(anyhow!("rib/{verb} {prefix}: no answer from the forwarder"))
    }
}

/// `Ok` when a `rib/<verb>` ControlResponse says 200.
pub fn check_rib_answer(verb: &str, prefix: &Name, content: &[u8]) -> Result<()> {
    let (code, text, _) =
        mgmt::decode_response(content).map_err(|e| anyhow!("rib/{verb} {prefix}: {e}"))?;
    if code == 200 {
        Ok(())
    } else {
        Err(anyhow!("rib/{verb} {prefix} refused: {code} {text}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nexthop_wire::ndn::{Data, Interest};

    fn pair() -> (Face, UnixStream) {
        let (a, b) = UnixStream::pair().unwrap();
        (Face::new(Conn::Unix(a)), b)
    }

    #[test]
    fn stream_batches_split_and_joined_packets() {
        let (mut f, mut peer) = pair();
        let i = Interest::new(Name::from_uri("/a/b").unwrap()).to_wire();
        let d = Data::new(Name::from_uri("/a/c").unwrap(), vec![7; 300]).to_wire();
        let mut bytes = i.clone();
        bytes.extend_from_slice(&d);
        // Two whole packets and the first 5 bytes of a third.
        peer.write_all(&bytes).unwrap();
        peer.write_all(&i[..5]).unwrap();
        let mut out = Vec::new();
        let soon = Instant::now() + Duration::from_secs(2);
        f.recv_batch(soon, &mut out).unwrap();
        assert_eq!(out, vec![i.clone(), d]);
        out.clear();
        f.recv_batch(Instant::now() + Duration::from_millis(50), &mut out)
            .unwrap();
        assert!(out.is_empty(), "a partial packet is not handed out");
        peer.write_all(&i[5..]).unwrap();
        f.recv_batch(soon, &mut out).unwrap();
        assert_eq!(out, vec![i]);
        drop(peer);
        out.clear();
        assert!(f.recv_batch(soon, &mut out).is_err(), "EOF ends the face");
    }

    #[test]
    fn oversized_frame_is_an_error_not_an_allocation() {
        let (mut f, mut peer) = pair();
        // TLV type 6, length 0xFFFFFFFF (5-byte length).
        peer.write_all(&[6, 254, 0xFF, 0xFF, 0xFF, 0xFF]).unwrap();
        let mut out = Vec::new();
        let e = f
            .recv_batch(Instant::now() + Duration::from_secs(2), &mut out)
            .unwrap_err();
        assert_eq!(e.kind(), io::ErrorKind::InvalidData);
    }

    #[test]
    fn send_all_writes_packets_back_to_back() {
        let (mut f, mut peer) = pair();
        f.send_all(&[vec![1, 2], vec![3], vec![4, 5, 6]]).unwrap();
        let mut got = [0u8; 6];
        peer.read_exact(&mut got).unwrap();
        assert_eq!(got, [1, 2, 3, 4, 5, 6]);
    }

    fn packets() -> Vec<Vec<u8>> {
        (0..40)
            .map(|k| {
                let n = Name::from_uri(&format!("/a/{k}")).unwrap();
                if k % 3 == 0 {
                    Interest::new(n).to_wire()
                } else {
                    Data::new(n, vec![k as u8; 37 * k]).to_wire()
                }
            })
            .collect()
    }

    #[test]
    fn a_batch_split_at_any_byte_is_received_as_sent_one_at_a_time() {
        let sent = packets();
        let all: Vec<u8> = sent.concat();
        let (mut f, mut peer) = pair();
        for cut in (1..all.len()).step_by(97) {
            peer.write_all(&all[..cut]).unwrap();
            let mut out = Vec::new();
            let soon = Instant::now() + Duration::from_secs(2);
            if all[..cut].len() >= sent[0].len() {
                f.recv_batch(soon, &mut out).unwrap();
            }
            peer.write_all(&all[cut..]).unwrap();
            while out.len() < sent.len() {
                f.recv_batch(soon, &mut out).unwrap();
            }
            assert_eq!(out, sent, "cut at byte {cut}");
        }
    }

    #[test]
    fn more_than_a_buffer_of_packets_arrives_whole_across_reads() {
        let sent: Vec<Vec<u8>> = (0..3 * READ_CHUNK / 1000)
            .map(|k| Data::new(Name::from_uri(&format!("/b/{k}")).unwrap(), vec![9; 977]).to_wire())
            .collect();
        let (mut f, mut peer) = pair();
        let all = sent.concat();
        let writer = std::thread::spawn(move || peer.write_all(&all).map(|()| peer));
        let mut out = Vec::new();
        let end = Instant::now() + Duration::from_secs(10);
        while out.len() < sent.len() && Instant::now() < end {
            f.recv_batch(end, &mut out).unwrap();
        }
        let _peer = writer.join().unwrap().unwrap();
        assert_eq!(out, sent);
    }

    /// A writer that takes at most `max` bytes per call, across slices.
    struct Trickle {
        got: Vec<u8>,
        max: usize,
        calls: usize,
    }

    impl Write for Trickle {
        fn write(&mut self, b: &[u8]) -> io::Result<usize> {
            self.write_vectored(&[IoSlice::new(b)])
        }
        fn write_vectored(&mut self, bufs: &[IoSlice<'_>]) -> io::Result<usize> {
            assert!(bufs.len() <= MAX_IOV);
            self.calls += 1;
            let mut n = 0;
            for b in bufs {
                let k = b.len().min(self.max - n);
                self.got.extend_from_slice(&b[..k]);
                n += k;
                if n == self.max {
                    break;
                }
            }
            Ok(n)
        }
        fn flush(&mut self) -> io::Result<()> {
            Ok(())
        }
    }

    #[test]
    fn writev_taken_in_parts_is_byte_identical_to_one_at_a_time() {
        let mut sent = packets();
        sent.insert(5, Vec::new());
        let all = sent.concat();
        for max in [1, 2, 7, 64, 1000, all.len()] {
            let mut w = Trickle {
                got: Vec::new(),
                max,
                calls: 0,
            };
            write_packets(&mut w, &sent).unwrap();
            assert_eq!(w.got, all, "at most {max} bytes a call");
            if max == all.len() {
                assert_eq!(w.calls, 1, "one writev when the socket takes it all");
            }
        }
        // More packets than one writev may carry.
        let many: Vec<Vec<u8>> = (0..2 * MAX_IOV + 3).map(|k| vec![k as u8; 3]).collect();
        let mut w = Trickle {
            got: Vec::new(),
            max: usize::MAX,
            calls: 0,
        };
        write_packets(&mut w, &many).unwrap();
        assert_eq!(w.got, many.concat());
        assert_eq!(w.calls, 3);
        // Empty packets alone: nothing to write, no call, no error.
        write_packets(&mut w, &[Vec::new(), Vec::new()]).unwrap();
        assert_eq!(w.calls, 3);
    }

    #[test]
    fn read_timeout_is_set_again_only_when_the_wait_leaves_its_range() {
        let ms = Duration::from_millis;
        assert_eq!(new_timeout(None, ms(100)), Some(ms(75)));
        assert_eq!(new_timeout(Some(ms(75)), ms(99)), None);
        assert_eq!(new_timeout(Some(ms(75)), ms(150)), None);
        assert_eq!(new_timeout(Some(ms(75)), ms(151)), Some(ms(151) * 3 / 4));
        assert_eq!(new_timeout(Some(ms(75)), ms(74)), Some(ms(74) * 3 / 4));
        assert_eq!(new_timeout(Some(ms(75)), ms(1)), Some(ms(1)));
    }

    #[test]
    fn an_early_timeout_returns_no_packets_and_the_next_call_gets_them() {
        let (mut f, mut peer) = pair();
        let t = Duration::from_millis(20);
        if let Conn::Unix(s) = &f.conn {
            s.set_read_timeout(Some(t)).unwrap();
        }
        f.timeout = Some(t);
        let mut out = Vec::new();
        f.recv_batch(Instant::now() + Duration::from_millis(30), &mut out)
            .unwrap();
        assert!(out.is_empty());
        let i = Interest::new(Name::from_uri("/late").unwrap()).to_wire();
        peer.write_all(&i).unwrap();
        let mut out = Vec::new();
        f.recv_batch(Instant::now() + Duration::from_secs(2), &mut out)
            .unwrap();
        assert_eq!(out, vec![i]);
    }
}
