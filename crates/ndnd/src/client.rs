//! A management client for a running forwarder (ours or NFD), in the
//! spirit of `nfdc`: signed command Interests (`rib/register`, ...) and
//! status datasets fetched by segments, over the forwarder's Unix socket
//! or UDP. `nexthop ndn route|face|status` are glue over it.

use std::fmt;
use std::io::{self, Read, Write};
use std::net::{SocketAddr, UdpSocket};
use std::os::unix::net::UnixStream;
use std::path::PathBuf;
use std::time::{Duration, Instant, SystemTime, UNIX_EPOCH};

use nexthop_wire::ndn::name::component_type;
use nexthop_wire::ndn::tlv;
use nexthop_wire::ndn::{Data, Interest, Name, NameComponent, Packet};

use crate::dataset::{FaceStatus, FibEntry, GeneralStatus, StrategyChoiceEntry};
use crate::mgmt::{self, ControlParameters};

/// Most segments fetched for one dataset.
pub const MAX_SEGMENTS: u64 = 4096;

/// Where the forwarder listens.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Target {
    /// A Unix stream socket (NFD's default: `/run/nfd/nfd.sock`).
    Unix(PathBuf),
    /// A UDP address.
    Udp(SocketAddr),
}

/// What went wrong talking to the forwarder.
#[derive(Debug)]
#[non_exhaustive]
pub enum ClientError {
    /// Connecting, sending or receiving failed.
    Io(io::Error),
    /// No answer within the timeout.
    Timeout,
    /// The forwarder answered with a Nack of this reason code.
    Nack(u64),
    /// An answer that does not decode.
    Malformed(String),
    /// A dataset of more than [`MAX_SEGMENTS`] segments.
    TooLarge,
}

impl fmt::Display for ClientError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self {
            ClientError::Io(e) => write!(f, "{e}"),
            ClientError::Timeout => write!(f, "no answer from the forwarder"),
            ClientError::Nack(r) => write!(f, "Nack (reason {r})"),
            ClientError::Malformed(e) => write!(f, "malformed answer: {e}"),
            ClientError::TooLarge => write!(f, "dataset over {MAX_SEGMENTS} segments"),
        }
    }
}

impl std::error::Error for ClientError {}

impl From<io::Error> for ClientError {
    fn from(e: io::Error) -> Self {
        if matches!(
            e.kind(),
            io::ErrorKind::WouldBlock | io::ErrorKind::TimedOut
        ) {
            ClientError::Timeout
        } else {
            ClientError::Io(e)
        }
    }
}

#[derive(Debug)]
enum Conn {
    Unix(UnixStream, Vec<u8>),
    Udp(UdpSocket),
}

/// A connection to a forwarder's management.
#[derive(Debug)]
pub struct Client {
    conn: Conn,
    timeout: Duration,
    nonce: u64,
}

fn malformed(e: impl fmt::Display) -> ClientError {
    ClientError::Malformed(e.to_string())
}

impl Client {
    /// Connect; every request waits at most `timeout` for its answer.
    pub fn connect(target: &Target, timeout: Duration) -> Result<Client, ClientError> {
        let conn = match target {
            Target::Unix(p) => Conn::Unix(UnixStream::connect(p)?, Vec::new()),
            Target::Udp(a) => {
                let bind: SocketAddr = if a.is_ipv4() {
                    "0.0.0.0:0".parse().map_err(malformed)?
                } else {
                    "[::]:0".parse().map_err(malformed)?
                };
                let s = UdpSocket::bind(bind)?;
                s.connect(a)?;
                Conn::Udp(s)
            }
        };
        let seed = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_nanos() as u64)
            .unwrap_or(1);
        Ok(Client {
            conn,
            timeout,
            nonce: seed ^ u64::from(std::process::id()).rotate_left(32),
        })
    }

    fn next_nonce(&mut self) -> u64 {
        // splitmix64: distinct nonces for the commands of one client.
        self.nonce = self.nonce.wrapping_add(0x9e37_79b9_7f4a_7c15);
        let mut z = self.nonce;
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        z ^ (z >> 31)
    }

    /// Send one packet (wire bytes) on this face, e.g. a Data an
    /// application face answers with.
    pub fn send(&mut self, wire: &[u8]) -> Result<(), ClientError> {
        match &mut self.conn {
            Conn::Unix(s, _) => s.write_all(wire)?,
            Conn::Udp(s) => {
                s.send(wire)?;
            }
        }
        Ok(())
    }

    /// The next whole packet received on this face, before `deadline`.
    pub fn recv(&mut self, deadline: Instant) -> Result<Vec<u8>, ClientError> {
        let left = deadline
            .checked_duration_since(Instant::now())
            .filter(|d| !d.is_zero())
            .ok_or(ClientError::Timeout)?;
        match &mut self.conn {
            Conn::Udp(s) => {
                s.set_read_timeout(Some(left))?;
                let mut buf = vec![0u8; 65536];
                let n = s.recv(&mut buf)?;
                buf.truncate(n);
                Ok(buf)
            }
            Conn::Unix(s, rbuf) => loop {
                if let Some(total) = frame_len(rbuf)? {
                    if rbuf.len() >= total {
                        return Ok(rbuf.drain(..total).collect());
                    }
                }
                let left = deadline
                    .checked_duration_since(Instant::now())
                    .filter(|d| !d.is_zero())
                    .ok_or(ClientError::Timeout)?;
                s.set_read_timeout(Some(left))?;
                let mut buf = [0u8; 16384];
                let n = s.read(&mut buf)?;
                if n == 0 {
                    return Err(ClientError::Io(io::ErrorKind::UnexpectedEof.into()));
                }
                rbuf.extend_from_slice(&buf[..n]);
            },
        }
    }

    /// Send `interest` and wait for the Data it asks for (packets that do
    /// not answer it are skipped).
    pub fn express(&mut self, interest: &Interest) -> Result<Data, ClientError> {
        self.send(&interest.to_wire())?;
        let deadline = Instant::now() + self.timeout;
        loop {
            let wire = self.recv(deadline)?;
            let Ok(p) = Packet::decode(&wire) else {
                continue;
            };
            let (data, nack) = match p {
                Packet::Data(d) => (Some(d), None),
                Packet::Lp(lp) => {
                    let Some(frag) = lp.fragment.as_deref() else {
                        continue;
                    };
                    match lp.nack {
                        Some(n) => {
                            let i = Interest::decode(frag).map_err(malformed)?;
                            if i.name == interest.name {
                                return Err(ClientError::Nack(n.reason.map_or(0, |r| r.code())));
                            }
                            (None, Some(()))
                        }
                        None => (Data::decode(frag).ok(), None),
                    }
                }
                _ => (None, None),
            };
            if nack.is_some() {
                continue;
            }
            if let Some(d) = data {
                let answers = if interest.can_be_prefix {
                    interest.name.is_prefix_of(&d.name)
                } else {
                    d.name == interest.name
                };
                if answers {
                    return Ok(d);
                }
            }
        }
    }

    /// Send a signed command `/localhost/nfd/<module>/<verb>`; its
    /// ControlResponse (status code, text, body).
    pub fn command(
        &mut self,
        module: &str,
        verb: &str,
        params: &ControlParameters,
    ) -> Result<(u64, String, Option<ControlParameters>), ClientError> {
        let ts = SystemTime::now()
            .duration_since(UNIX_EPOCH)
            .map(|d| d.as_millis() as u64)
            .unwrap_or(0);
        let nonce = self.next_nonce();
        let mut i = Interest::new(mgmt::command_name(module, verb, params, ts, nonce));
        i.nonce = Some(self.next_nonce() as u32);
        i.lifetime_ms = Some(self.timeout.as_millis() as u64);
        let d = self.express(&i)?;
        mgmt::decode_response(d.content.as_deref().unwrap_or_default()).map_err(malformed)
    }

    /// Fetch the status dataset `/localhost/nfd/<module>/<dataset>`: its
    /// newest version, all segments concatenated.
    pub fn dataset(&mut self, module: &str, dataset: &str) -> Result<Vec<u8>, ClientError> {
        let prefix = Name::from_components(
            [
                b"localhost".as_slice(),
                b"nfd",
                module.as_bytes(),
                dataset.as_bytes(),
            ]
            .into_iter()
            .map(NameComponent::generic),
        );
        let mut i = Interest::new(prefix.clone());
        i.can_be_prefix = true;
        i.must_be_fresh = true;
        i.nonce = Some(self.next_nonce() as u32);
        i.lifetime_ms = Some(self.timeout.as_millis() as u64);
        let first = self.express(&i)?;
        let n = &first.name;
        let version = n
            .get(prefix.len())
            .filter(|c| c.as_version().is_some())
            .ok_or_else(|| malformed("dataset Data without a version"))?
            .to_owned();
        let last = first
            .meta_info
            .final_block_id
            .as_ref()
            .filter(|c| c.typ() == component_type::SEGMENT)
            .and_then(|c| tlv::read_nni(c.value()).ok())
            .ok_or_else(|| malformed("dataset Data without a FinalBlockId"))?;
        if n.get(prefix.len() + 1).and_then(|c| c.as_segment()) != Some(0) {
            return Err(malformed("first dataset Data is not segment 0"));
        }
        if last >= MAX_SEGMENTS {
            return Err(ClientError::TooLarge);
        }
        let mut content = first.content.unwrap_or_default();
        for seg in 1..=last {
            let mut name = prefix.clone();
            name.push(&version);
            name.push(&NameComponent::segment(seg));
            let mut i = Interest::new(name);
            i.nonce = Some(self.next_nonce() as u32);
            i.lifetime_ms = Some(self.timeout.as_millis() as u64);
            let d = self.express(&i)?;
            content.extend(d.content.unwrap_or_default());
        }
        Ok(content)
    }

    /// `status/general`.
    pub fn general_status(&mut self) -> Result<GeneralStatus, ClientError> {
        GeneralStatus::decode(&self.dataset("status", "general")?).map_err(malformed)
    }

    /// `faces/list`.
    pub fn faces(&mut self) -> Result<Vec<FaceStatus>, ClientError> {
        FaceStatus::decode_list(&self.dataset("faces", "list")?).map_err(malformed)
    }

    /// `fib/list`.
    pub fn fib(&mut self) -> Result<Vec<FibEntry>, ClientError> {
        FibEntry::decode_list(&self.dataset("fib", "list")?).map_err(malformed)
    }

    /// `strategy-choice/list`.
    pub fn strategy_choices(&mut self) -> Result<Vec<StrategyChoiceEntry>, ClientError> {
        StrategyChoiceEntry::decode_list(&self.dataset("strategy-choice", "list")?)
            .map_err(malformed)
    }
}

/// The length of the TLV packet at the start of `buf`, once its header is
/// there; an error for a length over
/// [`MAX_PACKET`](crate::config::MAX_PACKET).
fn frame_len(buf: &[u8]) -> Result<Option<usize>, ClientError> {
    crate::stream::frame_len(buf).map_err(|total| malformed(format!("a {total}-byte packet")))
}
