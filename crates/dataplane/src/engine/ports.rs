//! Opening every worker's live ports ([`open_ports`]): an AF_PACKET
//! receive ring per worker on every input (one `PACKET_FANOUT` group per
//! input when there are several workers) and a transmit socket per worker
//! on every port, or, where asked and where it binds, an AF_XDP socket per
//! worker and port (worker `W` on queue `xdp_queue + W`).

use std::collections::{BTreeMap, BTreeSet};
use std::str::FromStr;

use crate::afpacket::{AfPacketError, FanoutMode, RingConfig, RxRing, TxPort};
#[cfg(feature = "afxdp")]
use crate::afxdp::{XdpMode, XskConfig, XskPort, XskRx, XskTx};
use crate::live::LivePorts;

/// Which kernel interface a run's ports use.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum IoMode {
    /// AF_XDP on every port where a socket binds; AF_PACKET (with a
    /// one-line message saying why) where not.
    Auto,
    /// AF_XDP on every port, or an error.
    Afxdp,
    /// AF_PACKET: `TPACKET_V3` receive rings, `sendmmsg` transmit. The
    /// default: on veth (copy mode) it costs less CPU per frame than AF_XDP
    /// (docs/benchmarks.md); `Auto` is for NICs with zero-copy AF_XDP.
    #[default]
    Afpacket,
}

impl FromStr for IoMode {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "auto" => Ok(IoMode::Auto),
            "afxdp" => Ok(IoMode::Afxdp),
            "afpacket" => Ok(IoMode::Afpacket),
            _ => Err(format!("unknown I/O '{s}' (auto, afxdp or afpacket)")),
        }
    }
}

/// How AF_XDP receive sockets attach their XDP program.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq)]
pub enum XdpAttach {
    /// Native (driver) mode where the driver has it, else generic.
    #[default]
    Auto,
    /// Generic (SKB) mode.
    Skb,
    /// Native (driver) mode only.
    Native,
}

impl FromStr for XdpAttach {
    type Err = String;
    fn from_str(s: &str) -> Result<Self, Self::Err> {
        match s {
            "auto" => Ok(XdpAttach::Auto),
            "skb" => Ok(XdpAttach::Skb),
            "native" => Ok(XdpAttach::Native),
            _ => Err(format!("unknown XDP mode '{s}' (auto, skb or native)")),
        }
    }
}

/// How [`open_ports`] opens a run's ports.
#[derive(Clone, Debug)]
pub struct PortsConfig {
    /// Workers: one set of ports each.
    pub workers: usize,
    /// AF_PACKET, AF_XDP, or AF_XDP where it binds.
    pub io: IoMode,
    /// How AF_XDP receive sockets attach their program.
    pub xdp_attach: XdpAttach,
    /// The interface queue of worker 0's AF_XDP sockets (worker `W` binds
    /// `xdp_queue + W`).
    pub xdp_queue: u32,
    /// The AF_PACKET receive rings.
    pub ring: RingConfig,
    /// How the kernel splits an input's frames among the workers' rings.
    pub fanout: FanoutMode,
    /// Input port `P`'s fanout group is `fanout_group_base + P` (wrapping):
    /// distinct per process (derive it from the process id), so two
    /// forwarders never share a group.
    pub fanout_group_base: u16,
}

/// Why [`open_ports`] failed.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum PortsError {
    /// [`IoMode::Afxdp`]: a port's AF_XDP sockets could not be opened.
    #[error("port {port} ({iface}): AF_XDP unavailable: {why}")]
    Xdp {
        /// The port.
        port: u16,
        /// Its interface.
        iface: String,
        /// Why, in one line.
        why: String,
    },
    /// An AF_PACKET socket or ring could not be opened or joined to its
    /// fanout group.
    #[error(transparent)]
    AfPacket(#[from] AfPacketError),
}

/// Open the ports of every worker: port `P` is interface `ifaces[P]`,
/// receiving when `P` is in `inputs`. Under [`IoMode::Auto`] a port whose
/// AF_XDP sockets do not all bind uses AF_PACKET for every worker, and a
/// log warning says why. One [`LivePorts`] per worker, in worker order.
///
/// # Errors
/// [`PortsError::Xdp`] under [`IoMode::Afxdp`] where AF_XDP does not
/// bind; [`PortsError::AfPacket`] where an AF_PACKET socket fails (the
/// sockets already opened are closed).
pub fn open_ports(
    ifaces: &BTreeMap<u16, &str>,
    inputs: &BTreeSet<u16>,
    cfg: &PortsConfig,
) -> Result<Vec<LivePorts>, PortsError> {
    let mut xdp: BTreeMap<u16, Vec<XdpHalves>> = BTreeMap::new();
    if cfg.io != IoMode::Afpacket {
        for (&port, &iface) in ifaces {
            let is_input = inputs.contains(&port);
            match open_xdp(iface, is_input, cfg) {
                Ok(socks) => {
                    xdp.insert(port, socks);
                }
                Err(why) if cfg.io == IoMode::Auto => tracing::warn!(
                    "port {port} ({iface}): AF_XDP unavailable ({why}); using AF_PACKET {}",
                    if is_input { "TPACKET_V3" } else { "sendmmsg" }
                ),
                Err(why) => {
                    return Err(PortsError::Xdp {
                        port,
                        iface: iface.to_string(),
                        why,
                    })
                }
            }
        }
    }
    let mut all = Vec::with_capacity(cfg.workers);
    for w in 0..cfg.workers {
        let mut ports = LivePorts::new();
        for (&port, &iface) in ifaces {
            if let Some(socks) = xdp.get_mut(&port) {
                if let Some(halves) = socks.get_mut(w) {
                    add_xdp(&mut ports, port, halves);
                }
                continue;
            }
            ports.add_output(port, TxPort::open(iface)?);
            if inputs.contains(&port) {
                let ring = RxRing::open(iface, &cfg.ring)?;
                if cfg.workers > 1 {
                    ring.join_fanout(cfg.fanout_group_base.wrapping_add(port), cfg.fanout)?;
                }
                ports.add_input(port, ring);
            }
        }
        all.push(ports);
    }
    Ok(all)
}

/// One worker's AF_XDP socket on a port, taken by [`add_xdp`].
#[cfg(feature = "afxdp")]
type XdpHalves = Option<(Option<XskRx>, XskTx)>;
/// Without the `afxdp` feature no port has AF_XDP sockets.
#[cfg(not(feature = "afxdp"))]
type XdpHalves = std::convert::Infallible;

/// Open one AF_XDP socket per worker on `iface` (worker W on queue
/// `--xdp-queue + W`), receiving when it is an input; why not, as one
/// line, when any fails (the sockets already opened are closed).
#[cfg(feature = "afxdp")]
fn open_xdp(iface: &str, is_input: bool, st: &PortsConfig) -> Result<Vec<XdpHalves>, String> {
    let d = XskConfig::default();
    let mut socks = Vec::with_capacity(st.workers);
    for w in 0..st.workers as u32 {
        let cfg = XskConfig {
            queue: st.xdp_queue + w,
            rx_frames: if is_input { d.rx_frames } else { 0 },
            mode: match st.xdp_attach {
                XdpAttach::Auto => XdpMode::Auto,
                XdpAttach::Skb => XdpMode::Skb,
                XdpAttach::Native => XdpMode::Native,
            },
            ..d
        };
        match XskPort::open(iface, &cfg) {
            Ok(p) => socks.push(Some(p.split())),
            Err(e) if w > 0 => {
                return Err(format!(
                    "{e}; --workers {} needs queues {}..={} (one AF_XDP socket per worker and \
                     queue)",
                    st.workers,
                    st.xdp_queue,
                    st.xdp_queue + st.workers as u32 - 1
                ))
            }
            Err(e) => return Err(e.to_string()),
        }
    }
    Ok(socks)
}

#[cfg(not(feature = "afxdp"))]
fn open_xdp(_iface: &str, _is_input: bool, _st: &PortsConfig) -> Result<Vec<XdpHalves>, String> {
    Err("this nexthop was built without the afxdp feature".to_string())
}

/// Give worker's socket `halves` to `ports` as port `port`.
#[cfg(feature = "afxdp")]
fn add_xdp(ports: &mut LivePorts, port: u16, halves: &mut XdpHalves) {
    if let Some((rx, tx)) = halves.take() {
        if let Some(rx) = rx {
            ports.add_input(port, rx);
        }
        ports.add_output(port, tx);
    }
}

#[cfg(not(feature = "afxdp"))]
fn add_xdp(_ports: &mut LivePorts, _port: u16, halves: &mut XdpHalves) {
    match *halves {}
}

/// `PORT:IO,...` for the ports `all`: each port's I/O as the loop has it
/// (its receive side for an input, else its transmit side; `-`: none).
pub fn io_list(ports: &LivePorts, all: impl Iterator<Item = u16>) -> String {
    all.map(|p| {
        let io = ports
            .input_io(p)
            .or_else(|| ports.output_io(p))
            .unwrap_or("-");
        format!("{p}:{io}")
    })
    .collect::<Vec<_>>()
    .join(",")
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::live::{MemoryQueue, MemoryRx, MemoryTx};

    #[test]
    fn io_modes_and_xdp_attach_parse_their_names_only() {
        assert_eq!("auto".parse::<IoMode>(), Ok(IoMode::Auto));
        assert_eq!("afxdp".parse::<IoMode>(), Ok(IoMode::Afxdp));
        assert_eq!("afpacket".parse::<IoMode>(), Ok(IoMode::Afpacket));
        assert!("xdp".parse::<IoMode>().unwrap_err().contains("'xdp'"));
        assert_eq!(IoMode::default(), IoMode::Afpacket);
        assert_eq!("skb".parse::<XdpAttach>(), Ok(XdpAttach::Skb));
        assert_eq!("native".parse::<XdpAttach>(), Ok(XdpAttach::Native));
        assert!("zc".parse::<XdpAttach>().unwrap_err().contains("'zc'"));
    }

    #[test]
    fn io_list_names_each_ports_receive_or_transmit_side() {
        let mut ports = LivePorts::new();
        ports.add_input(0, MemoryRx::new(MemoryQueue::new()));
        ports.add_output(0, MemoryTx::new(MemoryQueue::new()));
        ports.add_output(2, MemoryTx::new(MemoryQueue::new()));
        assert_eq!(
            io_list(&ports, [0, 1, 2].into_iter()),
            "0:memory,1:-,2:memory"
        );
    }
}
