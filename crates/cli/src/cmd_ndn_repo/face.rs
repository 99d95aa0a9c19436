//! A batched application face on the forwarder for the Repo and its bench:
//! every packet waiting on the socket is taken in one call
//! ([`Face::recv_batch`]), and the answers go out in one write
//! ([`Face::send_all`]). A Unix stream carries TLV-framed packets (one
//! `read` of up to [`READ_CHUNK`] bytes yields all the whole packets in
//! it); a UDP socket carries one packet per datagram (the first waited for,
//! then up to [`UDP_BATCH`] more taken without waiting).

use std::io::{self, Read, Write};
use std::net::{SocketAddr, UdpSocket};
use std::os::unix::net::UnixStream;
use std::time::{Duration, Instant};

use anyhow::{anyhow, Result};
use nexthop_ndnd::client::Target;
use nexthop_ndnd::config::MAX_PACKET;
use nexthop_ndnd::mgmt;
use nexthop_ndnd::tools::{command_interest, rand_nonce};
use nexthop_wire::ndn::tlv::read_var_number;
use nexthop_wire::ndn::{Name, NetPacket, Packet};

/// Bytes read from a Unix stream at once.
pub const READ_CHUNK: usize = 256 << 10;
/// Datagrams taken from a UDP socket per [`Face::recv_batch`].
pub const UDP_BATCH: usize = 256;

#[derive(Debug)]
enum Conn {
    Unix(UnixStream),
    Udp(UdpSocket),
}

/// One face on the forwarder (see the module docs).
#[derive(Debug)]
pub struct Face {
    conn: Conn,
    /// Bytes read from the stream and not yet taken as packets.
    rbuf: Vec<u8>,
    chunk: Vec<u8>,
}

/// The length of the TLV at the start of `buf` once its header is whole;
/// an error for a packet over [`MAX_PACKET`] (the stream cannot be
/// resynchronised after it).
fn frame_len(buf: &[u8]) -> io::Result<Option<usize>> {
    let Ok((_, tl)) = read_var_number(buf, 0) else {
        return Ok(None);
    };
    let Ok((len, ll)) = read_var_number(buf, tl) else {
        return Ok(None);
    };
    let total = (tl + ll) as u64 + len;
    if total > MAX_PACKET as u64 {
        return Err(io::Error::new(
            io::ErrorKind::InvalidData,
            format!("a {total}-byte packet on the face"),
        ));
    }
    Ok(Some(total as usize))
}

/// Move the whole packets at the front of `rbuf` to `out`.
fn take_frames(rbuf: &mut Vec<u8>, out: &mut Vec<Vec<u8>>) -> io::Result<()> {
    let mut at = 0;
    while let Some(total) = frame_len(&rbuf[at..])? {
        if rbuf.len() - at < total {
            break;
        }
        out.push(rbuf[at..at + total].to_vec());
        at += total;
    }
    rbuf.drain(..at);
    Ok(())
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
        Ok(Face {
            conn,
            rbuf: Vec::new(),
            chunk: vec![0; READ_CHUNK],
        })
    }

    /// Append to `out` the packets received before `deadline`: all that are
    /// waiting, or the first to arrive. Returns with none at the deadline;
    /// an error when the forwarder closed the face or the socket failed.
    pub fn recv_batch(&mut self, deadline: Instant, out: &mut Vec<Vec<u8>>) -> io::Result<()> {
        let before = out.len();
        let Face { conn, rbuf, chunk } = self;
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
        match conn {
            Conn::Unix(s) => {
                take_frames(rbuf, out)?;
                while out.len() == before {
                    let Some(wait) = left() else { return Ok(()) };
                    s.set_read_timeout(Some(wait))?;
                    let n = match s.read(chunk) {
                        Ok(0) => return Err(io::ErrorKind::UnexpectedEof.into()),
                        Ok(n) => n,
                        Err(e) if timed_out(&e) => return Ok(()),
                        Err(e) if e.kind() == io::ErrorKind::Interrupted => continue,
                        Err(e) => return Err(e),
                    };
                    rbuf.extend_from_slice(&chunk[..n]);
                    take_frames(rbuf, out)?;
                }
                Ok(())
            }
            Conn::Udp(s) => {
                let Some(wait) = left() else { return Ok(()) };
                s.set_read_timeout(Some(wait))?;
                match s.recv(chunk) {
                    Ok(n) => out.push(chunk[..n].to_vec()),
                    Err(e) if timed_out(&e) => return Ok(()),
                    Err(e) => return Err(e),
                }
                s.set_nonblocking(true)?;
                let mut r = Ok(());
                for _ in 1..UDP_BATCH {
                    match s.recv(chunk) {
                        Ok(n) => out.push(chunk[..n].to_vec()),
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

    /// Send `packets` (wire bytes): one write on a stream, a datagram each
    /// on UDP.
    pub fn send_all(&mut self, packets: &[Vec<u8>]) -> io::Result<()> {
        if packets.is_empty() {
            return Ok(());
        }
        match &mut self.conn {
            Conn::Unix(s) => {
                if let [one] = packets {
                    return s.write_all(one);
                }
                let mut all = Vec::with_capacity(packets.iter().map(Vec::len).sum());
                for p in packets {
                    all.extend_from_slice(p);
                }
                s.write_all(&all)
            }
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
        let f = Face {
            conn: Conn::Unix(a),
            rbuf: Vec::new(),
            chunk: vec![0; READ_CHUNK],
        };
        (f, b)
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
}
