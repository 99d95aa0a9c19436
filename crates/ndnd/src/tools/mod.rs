//! Traffic tools for the forwarder: a batched UDP [`consumer`] and
//! [`producer`] (what `nexthop ndn bench` and `nexthop ndn lab` run).
//!
//! Both talk to a forwarder over one connected UDP socket ([`UdpFace`]),
//! receiving with `recvmmsg(2)` and sending with `sendmmsg(2)` in batches
//! of up to [`BATCH`] datagrams. The producer registers its prefix with the
//! forwarder's `/localhost/nfd/rib/register` command ([`register_prefix`],
//! encoded with [`crate::mgmt`]) and answers Interests with DigestSha256
//! Data; the consumer keeps a window of Interests outstanding, retransmits
//! on timeout and counts what came back.

pub mod consumer;
pub mod producer;

use std::io;
use std::net::{SocketAddr, UdpSocket};
use std::os::fd::AsRawFd;
use std::time::{Duration, Instant};

use nexthop_wire::ndn::tlv::write_tlv;
use nexthop_wire::ndn::{Data, Interest, LpPacket, Name, NameComponent, NdnError, Packet};
use sha2::{Digest, Sha256};

use crate::mgmt::{self, ControlParameters};
use crate::udp::{self, RecvBatch};

pub use crate::udp::BATCH;

/// What a tool can fail with.
#[derive(Debug)]
#[non_exhaustive]
pub enum ToolError {
    /// A socket call failed.
    Io(io::Error),
    /// The forwarder refused a management command.
    Refused {
        /// ControlResponse StatusCode.
        code: u64,
        /// ControlResponse StatusText.
        text: String,
    },
    /// No answer to a request within its deadline.
    Timeout(&'static str),
    /// A reply that does not decode or does not fit the request.
    BadReply(String),
    /// A parameter out of range.
    Config(String),
}

impl std::fmt::Display for ToolError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            ToolError::Io(e) => write!(f, "socket: {e}"),
            ToolError::Refused { code, text } => write!(f, "refused: {code} {text}"),
            ToolError::Timeout(what) => write!(f, "timed out waiting for {what}"),
            ToolError::BadReply(w) => write!(f, "bad reply: {w}"),
            ToolError::Config(w) => write!(f, "{w}"),
        }
    }
}

impl std::error::Error for ToolError {}

impl From<io::Error> for ToolError {
    fn from(e: io::Error) -> Self {
        ToolError::Io(e)
    }
}

impl From<NdnError> for ToolError {
    fn from(e: NdnError) -> Self {
        ToolError::BadReply(e.to_string())
    }
}

/// One UDP socket connected to a forwarder, moving datagrams in batches
/// ([`crate::udp`]), with UDP GSO/GRO unless turned off.
#[derive(Debug)]
pub struct UdpFace {
    sock: UdpSocket,
    rx: RecvBatch,
    /// The forwarder, for GSO's segment limit (`None`: GSO off).
    gso_peer: Option<SocketAddr>,
}

impl UdpFace {
    /// A socket on the forwarder's address family, connected to it, with
    /// 4 MiB socket buffers (so a window of Interests fits), sending runs
    /// of equal-sized datagrams with GSO and taking coalesced runs with
    /// GRO where the kernel has them.
    pub fn connect(forwarder: SocketAddr) -> io::Result<UdpFace> {
        UdpFace::connect_with(forwarder, true)
    }

    /// [`UdpFace::connect`], with GSO and GRO only when `gso`.
    pub fn connect_with(forwarder: SocketAddr, gso: bool) -> io::Result<UdpFace> {
        let local: SocketAddr = if forwarder.is_ipv4() {
            (std::net::Ipv4Addr::UNSPECIFIED, 0).into()
        } else {
            (std::net::Ipv6Addr::UNSPECIFIED, 0).into()
        };
        let sock = UdpSocket::bind(local)?;
        sock.connect(forwarder)?;
        // A failure leaves the default size, which only costs drops.
        let _ = udp::set_buffers(&sock, 4 << 20);
        let gro = gso && udp::enable_gro(&sock).is_ok();
        Ok(UdpFace {
            sock,
            rx: RecvBatch::new(gro),
            gso_peer: gso.then_some(forwarder),
        })
    }

    /// The local address.
    pub fn local_addr(&self) -> io::Result<SocketAddr> {
        self.sock.local_addr()
    }

    /// Send `pkts` (each at most [`crate::config::MAX_PACKET`] bytes) with as few
    /// `sendmmsg` calls as it takes. Returns how many were sent; the rest
    /// failed with an error the socket reported (e.g. ECONNREFUSED when no
    /// forwarder listens), which is returned when nothing was sent. A
    /// kernel that refuses GSO turns it off for this face.
    pub fn send_batch(&mut self, pkts: &[Vec<u8>]) -> io::Result<usize> {
        let o = match self.gso_peer {
            Some(p) => udp::send_batch_gso(&self.sock, pkts, &[], Some(p)),
            None => udp::send_batch(&self.sock, pkts, &[]),
        };
        if o.gso_refused {
            self.gso_peer = None;
        }
        match o.error {
            Some(e) if o.sent == 0 => Err(e),
            _ => Ok(o.sent),
        }
    }

    /// Wait up to `timeout` for datagrams, then take up to [`BATCH`]
    /// messages (with GRO, each may be a run of datagrams) with one
    /// `recvmmsg`. Returns how many ([`UdpFace::packet`]
    /// reads them); 0 when none came in time.
    pub fn recv_batch(&mut self, timeout: Duration) -> io::Result<usize> {
        let mut pfd = libc::pollfd {
            fd: self.sock.as_raw_fd(),
            events: libc::POLLIN,
            revents: 0,
        };
        let ms = timeout.as_millis().min(i32::MAX as u128) as libc::c_int;
        // SAFETY: `pfd` is one live pollfd; poll writes only its revents.
        let r = unsafe { libc::poll(&mut pfd, 1, ms) };
        if r < 0 {
            let e = io::Error::last_os_error();
            return if e.kind() == io::ErrorKind::Interrupted {
                Ok(0)
            } else {
                Err(e)
            };
        }
        if r == 0 {
            return Ok(0);
        }
        // A datagram longer than MAX_PACKET is cut; it then fails to
        // decode and is counted as bad by the caller.
        self.rx.recv(&self.sock)
    }

    /// Datagram `i` of the last [`UdpFace::recv_batch`] (empty past its count).
    pub fn packet(&self, i: usize) -> &[u8] {
        self.rx.packet(i)
    }
}

/// A network packet a face received, with its NDNLPv2 PitToken.
#[derive(Debug)]
pub enum Received {
    /// An Interest.
    Interest(Interest, Option<Vec<u8>>),
    /// A Data; `wire` is the Data element.
    Data(Data, Option<Vec<u8>>),
    /// A Nack with its reason code (0: none given) for this Interest.
    Nack(Interest, u64),
}

/// Decode what a forwarder sent: a bare Interest or Data, or an LpPacket
/// carrying one (a Nack, or with a PitToken). Fragments and IDLE packets
/// are errors: the tools' packets fit a datagram.
pub fn decode_received(wire: &[u8]) -> Result<Received, NdnError> {
    match Packet::decode(wire)? {
        Packet::Interest(i) => Ok(Received::Interest(i, None)),
        Packet::Data(d) => Ok(Received::Data(d, None)),
        Packet::Lp(lp) => {
            if !lp.is_whole() {
                return Err(NdnError::Malformed("fragmented LpPacket"));
            }
            let Some(frag) = lp.fragment.as_deref() else {
                return Err(NdnError::Malformed("LpPacket without a fragment"));
            };
            if let Some(n) = lp.nack {
                let code = n.reason.map_or(0, |r| r.code());
                return Ok(Received::Nack(Interest::decode(frag)?, code));
            }
            match Packet::decode(frag)? {
                Packet::Interest(i) => Ok(Received::Interest(i, lp.pit_token)),
                Packet::Data(d) => Ok(Received::Data(d, lp.pit_token)),
                Packet::Lp(_) => Err(NdnError::Malformed("LpPacket inside an LpPacket")),
            }
        }
    }
}

/// A `/localhost/nfd/rib/<verb>` command Interest for `prefix`, signed as
/// python-ndn 0.5 signs it (format 0.2: timestamp, nonce, SignatureInfo
/// and SignatureValue components, DigestSha256 over the name before the
/// SignatureValue).
pub fn command_interest(verb: &str, prefix: &Name, nonce: u32) -> Interest {
    let mut n = Name::new();
    for c in ["localhost", "nfd", "rib", verb] {
        n.push(&NameComponent::generic(c.as_bytes().to_vec()));
    }
    let mut cp = Vec::new();
    ControlParameters {
        name: Some(prefix.clone()),
        ..Default::default()
    }
    .encode(&mut cp);
    n.push(&NameComponent::generic(cp));
    let ts = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_millis() as u64);
    n.push(&NameComponent::generic(ts.to_be_bytes().to_vec()));
    n.push(&NameComponent::generic(
        u64::from(nonce).to_be_bytes().to_vec(),
    ));
    // SignatureInfo { SignatureType 0 (DigestSha256) }.
    let mut si = Vec::new();
    write_tlv(&mut si, 0x16, &[0x1b, 0x01, 0x00]);
    n.push(&NameComponent::generic(si));
    let mut h = Sha256::new();
    for c in n.components() {
        h.update(c.tlv());
    }
    let mut sv = Vec::new();
    write_tlv(&mut sv, 0x17, &h.finalize());
    n.push(&NameComponent::generic(sv));
    let mut i = Interest::new(n);
    i.nonce = Some(nonce);
    i.lifetime_ms = Some(4000);
    i
}

/// Register `prefix` for this face with the forwarder's `rib/register`;
/// `Ok` on StatusCode 200. Retries the command every 500 ms until
/// `timeout`.
pub fn register_prefix(
    face: &mut UdpFace,
    prefix: &Name,
    timeout: Duration,
) -> Result<(), ToolError> {
    let end = Instant::now() + timeout;
    let mut nonce = rand_nonce();
    while Instant::now() < end {
        let cmd = command_interest("register", prefix, nonce);
        face.send_batch(&[cmd.to_wire()])?;
        let step = Instant::now() + Duration::from_millis(500);
        while let Some(left) = step.checked_duration_since(Instant::now()) {
            let n = face.recv_batch(left)?;
            for k in 0..n {
                let Ok(Received::Data(d, _)) = decode_received(face.packet(k)) else {
                    continue;
                };
                if d.name != cmd.name {
                    continue;
                }
                let content = d.content.as_deref().unwrap_or(&[]);
                let (code, text, _) =
                    mgmt::decode_response(content).map_err(ToolError::BadReply)?;
                return if code == 200 {
                    Ok(())
                } else {
                    Err(ToolError::Refused { code, text })
                };
            }
        }
        nonce = nonce.wrapping_add(1);
    }
    Err(ToolError::Timeout("the rib/register reply"))
}

/// A nonce from the clock and the process id (the tools need distinct
/// nonces, not secret ones).
pub fn rand_nonce() -> u32 {
    let t = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos() as u64);
    let x = t ^ (u64::from(std::process::id()) << 32);
    // splitmix64 finaliser.
    let mut z = x.wrapping_add(0x9e37_79b9_7f4a_7c15);
    z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
    z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
    (z ^ (z >> 31)) as u32
}

/// Wrap `net` (an Interest or Data element) in an LpPacket with `token`,
/// or leave it bare when there is none.
pub fn with_token(net: Vec<u8>, token: Option<Vec<u8>>) -> Vec<u8> {
    match token {
        Some(t) => LpPacket {
            pit_token: Some(t),
            ..LpPacket::wrap(net)
        }
        .to_wire(),
        None => net,
    }
}

/// Round-trip times in microseconds, in a log-linear histogram (buckets
/// 1/16 of a power of two wide: quantiles within 6.25 %).
#[derive(Debug, Clone)]
pub struct RttHistogram {
    counts: Vec<u64>,
    total: u64,
}

impl Default for RttHistogram {
    fn default() -> Self {
        RttHistogram {
            counts: vec![0; 64 * 16],
            total: 0,
        }
    }
}

impl RttHistogram {
    fn bucket(us: u64) -> usize {
        if us < 16 {
            return us as usize;
        }
        let exp = 63 - us.leading_zeros() as usize; // >= 4
        let mant = ((us >> (exp - 4)) & 15) as usize;
        (exp - 3) * 16 + mant
    }

    fn lower(b: usize) -> u64 {
        if b < 16 {
            return b as u64;
        }
        let exp = b / 16 + 3;
        let mant = (b % 16) as u64;
        (16 + mant) << (exp - 4)
    }

    /// Count one sample.
    pub fn record(&mut self, rtt: Duration) {
        let us = rtt.as_micros().min(u128::from(u64::MAX >> 1)) as u64;
        let b = Self::bucket(us).min(self.counts.len() - 1);
        self.counts[b] += 1;
        self.total += 1;
    }

    /// Samples counted.
    pub fn count(&self) -> u64 {
        self.total
    }

    /// Add another histogram's samples.
    pub fn merge(&mut self, other: &RttHistogram) {
        for (a, b) in self.counts.iter_mut().zip(&other.counts) {
            *a += b;
        }
        self.total += other.total;
    }

    /// The `q` quantile (0..=1) in microseconds: the lower edge of its
    /// bucket; 0 without samples.
    pub fn quantile_us(&self, q: f64) -> u64 {
        if self.total == 0 {
            return 0;
        }
        let rank = ((q.clamp(0.0, 1.0) * self.total as f64).ceil() as u64).max(1);
        let mut seen = 0;
        for (b, &c) in self.counts.iter().enumerate() {
            seen += c;
            if seen >= rank {
                return Self::lower(b);
            }
        }
        Self::lower(self.counts.len() - 1)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn histogram_quantiles_are_within_a_bucket() {
        let mut h = RttHistogram::default();
        for us in 1..=1000u64 {
            h.record(Duration::from_micros(us));
        }
        let p50 = h.quantile_us(0.5);
        let p99 = h.quantile_us(0.99);
        assert!((470..=500).contains(&p50), "{p50}");
        assert!((930..=990).contains(&p99), "{p99}");
        assert_eq!(RttHistogram::default().quantile_us(0.5), 0);
        for us in [0u64, 1, 15, 16, 17, 31, 32, 1000, 123_456_789] {
            let b = RttHistogram::bucket(us);
            assert!(RttHistogram::lower(b) <= us);
            assert!(us - RttHistogram::lower(b) <= us / 16, "{us}");
        }
    }

    #[test]
    fn command_interest_is_what_the_core_accepts() {
        let prefix = Name::from_uri("/a/b").unwrap();
        let i = command_interest("register", &prefix, 7);
        let cmd = mgmt::parse_command(&Interest::decode(&i.to_wire()).unwrap()).unwrap();
        assert!(cmd.localhost);
        assert_eq!(cmd.verb, b"register");
        assert_eq!(cmd.params.name, Some(prefix));
    }

    #[test]
    fn received_packets_keep_their_token_and_nack_reason() {
        let i = Interest::new(Name::from_uri("/x").unwrap());
        match decode_received(&with_token(i.to_wire(), Some(vec![1, 2]))).unwrap() {
            Received::Interest(got, t) => {
                assert_eq!(got.name, i.name);
                assert_eq!(t, Some(vec![1, 2]));
            }
            other => panic!("{other:?}"),
        }
        let nack = LpPacket::nack(&i, Some(nexthop_wire::ndn::NackReason::NoRoute)).to_wire();
        assert!(matches!(
            decode_received(&nack).unwrap(),
            Received::Nack(_, 150)
        ));
        assert!(decode_received(&[0x64, 0x00]).is_err());
        assert!(decode_received(&[0x05]).is_err());
    }
}
