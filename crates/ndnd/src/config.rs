//! The forwarder's configuration (flags or a TOML file).

use std::net::SocketAddr;
use std::path::PathBuf;

use serde::Deserialize;

/// Largest network-layer packet accepted on any face (NFD's MAX_NDN_PACKET_SIZE).
pub const MAX_PACKET: usize = 8800;

/// Which PIT the forwarder runs.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum PitKind {
    /// Edge router (NFD's): names, aggregation, nonces, per-downstream PIT
    /// tokens.
    #[default]
    Exact,
    /// Core router (dissertation §5.4): fingerprint-only entries with a
    /// face bit-vector; no PIT tokens are kept, so it suits forwarders
    /// between forwarders, not NDNts clients. Needs `max_faces <= 32`
    /// (a 64-bit entry: 2 flag bits, a 16-bit fingerprint, a 12-bit
    /// timer and the face bit-vector).
    Fingerprint,
}

/// The Content Store's replacement policy.
#[derive(Debug, Clone, Copy, Default, PartialEq, Eq, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum CsPolicy {
    /// Least recently used among the local candidates.
    #[default]
    Lru,
    /// Least frequently used among the local candidates.
    Lfu,
}

/// Everything `nexthop ndn run` can set. Unknown TOML keys are refused.
#[derive(Debug, Clone, Deserialize)]
#[serde(deny_unknown_fields, default)]
pub struct NdndConfig {
    /// UDP unicast listen address (`None`: no UDP).
    pub udp: Option<SocketAddr>,
    /// TCP listen address (`None`: no TCP).
    pub tcp: Option<SocketAddr>,
    /// Unix stream socket path (`None`: none).
    pub unix: Option<PathBuf>,
    /// Interfaces to open an NDN Ethernet face on (ethertype 0x8624, the
    /// multicast group 01:00:5e:00:17:aa; needs CAP_NET_RAW).
    pub ether: Vec<String>,
    /// Content Store capacity in packets (0: no Content Store).
    pub cs_packets: usize,
    /// Content Store replacement policy (`lru` or `lfu`).
    pub cs_policy: CsPolicy,
    /// Selective caching: a Data is stored once its name was asked this
    /// many times (`0` or `1`: always; up to 255).
    pub cs_admit_after: u32,
    /// The PIT (`exact` or `fingerprint`).
    pub pit: PitKind,
    /// Most faces open at once (listeners excluded), `2..=4096`.
    pub max_faces: u32,
    /// A UDP face with nothing received for this long is closed.
    pub udp_idle_secs: u64,
    /// Bytes queued for sending on one stream face before packets are dropped.
    pub stream_out_cap: usize,
    /// Packets being reassembled at once, all faces together.
    pub reasm_max_partial: usize,
    /// A partial packet older than this is dropped.
    pub reasm_timeout_ms: u64,
    /// Serve the counters (Prometheus `/metrics`, `/stats.json`) here;
    /// loopback only (`None`: no endpoint). Read by `nexthop ndn run`.
    pub metrics: Option<SocketAddr>,
    /// Largest datagram sent on a UDP face (NFD's default 8800); larger
    /// packets go out as NDNLPv2 fragments. `256..=65507`.
    pub udp_mtu: usize,
    /// Bytes of receive and send buffer asked for the UDP socket
    /// (`SO_RCVBUF`/`SO_SNDBUF`, forced past `net.core.rmem_max` when
    /// root), `65536..=1 GiB`: a window of Interests arriving at once must
    /// fit. The granted size is in the metrics and the exit summary.
    pub udp_socket_buffer: usize,
    /// Forwarding threads, `1..=64`. With 1 (the default) one thread does
    /// everything; with more, the polling thread dispatches packets to
    /// forwarding threads (see the crate README's threading contract).
    pub threads: usize,
    /// Name components hashed to pick an Interest's forwarding thread
    /// (NDN-DPDK's NDT prefix length), `1..=32`.
    pub ndt_prefix: usize,
    /// The NDT has `2^ndt_bits` entries mapping a hash to a thread, `0..=16`.
    pub ndt_bits: u32,
    /// Packet batches queued towards one forwarding thread (and towards
    /// the polling thread from all of them) before batches are dropped
    /// and counted, `1..=65536`.
    pub thread_queue: usize,
    /// Sockets bound to the UDP listen address with `SO_REUSEPORT`,
    /// `1..=64`: the polling thread reads the first, an input thread each
    /// of the others (see the crate README's threading contract).
    pub udp_input_threads: usize,
    /// UDP segmentation offload (default on): datagrams of equal size to
    /// one endpoint leave in one `sendmmsg` message with `UDP_SEGMENT`,
    /// and the listening sockets take coalesced runs with `UDP_GRO`
    /// (split again before decoding). Receivers see the same datagrams
    /// either way; over loopback each run costs the kernel one packet
    /// instead of one per datagram. Turned off for a socket whose route
    /// refuses it (counted, `udp_gso_refused`).
    pub udp_gso: bool,
}

impl Default for NdndConfig {
    fn default() -> Self {
        NdndConfig {
            udp: None,
            tcp: None,
            unix: None,
            ether: Vec::new(),
            cs_packets: 65536,
            cs_policy: CsPolicy::Lru,
            cs_admit_after: 0,
            pit: PitKind::Exact,
            max_faces: 1024,
            udp_idle_secs: 600,
            stream_out_cap: 1 << 20,
            reasm_max_partial: 256,
            reasm_timeout_ms: 1000,
            udp_mtu: MAX_PACKET,
            udp_socket_buffer: 4 << 20,
            metrics: None,
            threads: 1,
            ndt_prefix: 2,
            ndt_bits: 8,
            thread_queue: 1024,
            udp_input_threads: 1,
            udp_gso: true,
        }
    }
}

impl NdndConfig {
    /// Read a TOML file. A UTF-8 byte-order mark at the start is skipped,
    /// as by every nexthop text parser.
    pub fn from_toml(text: &str) -> Result<NdndConfig, String> {
        let text = text.strip_prefix('\u{feff}').unwrap_or(text);
        toml::from_str(text).map_err(|e| e.to_string())
    }

    /// Check the ranges.
    pub fn validate(&self) -> Result<(), String> {
        if !(2..=4096).contains(&self.max_faces) {
            return Err(format!("max_faces {} not in 2..=4096", self.max_faces));
        }
        if self.cs_admit_after > 255 {
            return Err(format!(
                "cs_admit_after {} not in 0..=255",
                self.cs_admit_after
            ));
        }
        if self.pit == PitKind::Fingerprint && self.max_faces > 32 {
            return Err(format!(
                "the fingerprint PIT's entries hold a 32-face bit-vector: max_faces {} must be at most 32",
                self.max_faces
            ));
        }
        if self.udp_idle_secs == 0 {
            return Err("udp_idle_secs must be at least 1".into());
        }
        if self.stream_out_cap < MAX_PACKET {
            return Err(format!("stream_out_cap must be at least {MAX_PACKET}"));
        }
        if self.reasm_max_partial == 0 || self.reasm_timeout_ms == 0 {
            return Err("reasm_max_partial and reasm_timeout_ms must be at least 1".into());
        }
        if !(crate::frag::MIN_MTU..=65507).contains(&self.udp_mtu) {
            return Err(format!(
                "udp_mtu {} not in {}..=65507",
                self.udp_mtu,
                crate::frag::MIN_MTU
            ));
        }
        if !(65536..=1 << 30).contains(&self.udp_socket_buffer) {
            return Err(format!(
                "udp_socket_buffer {} not in 65536..=1073741824",
                self.udp_socket_buffer
            ));
        }
        if !(1..=64).contains(&self.threads) {
            return Err(format!("threads {} not in 1..=64", self.threads));
        }
        if !(1..=32).contains(&self.ndt_prefix) {
            return Err(format!("ndt_prefix {} not in 1..=32", self.ndt_prefix));
        }
        if self.ndt_bits > 16 {
            return Err(format!("ndt_bits {} not in 0..=16", self.ndt_bits));
        }
        if !(1..=65536).contains(&self.thread_queue) {
            return Err(format!(
                "thread_queue {} not in 1..=65536",
                self.thread_queue
            ));
        }
        if !(1..=64).contains(&self.udp_input_threads) {
            return Err(format!(
                "udp_input_threads {} not in 1..=64",
                self.udp_input_threads
            ));
        }
        if self.ether.len() > 64 {
            return Err(format!("{} Ethernet faces: at most 64", self.ether.len()));
        }
        for (k, i) in self.ether.iter().enumerate() {
            crate::ether::check_ifname(i)?;
            if self.ether[..k].contains(i) {
                return Err(format!("Ethernet interface {i} given twice"));
            }
        }
        if self.udp.is_none() && self.tcp.is_none() && self.unix.is_none() && self.ether.is_empty()
        {
            return Err("no face listener: give --udp, --tcp, --unix or --ether".into());
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::core::Core;
    use nexthop_ndn::cs::Policy;
    use nexthop_ndn::fw::PitMode;

    #[test]
    fn pit_mode_and_cs_policy_reach_the_forwarder() {
        let base = NdndConfig {
            udp: Some("127.0.0.1:0".parse().unwrap()),
            ..NdndConfig::default()
        };
        let core = Core::new(&base).unwrap();
        let fw = core.fw_config();
        assert!(matches!(fw.pit, PitMode::Exact(_)));
        let cs = fw.cs.unwrap();
        assert_eq!((cs.policy, cs.admit_after), (Policy::Lru, 0));

        let text = "udp = \"127.0.0.1:0\"\npit = \"fingerprint\"\nmax_faces = 32\n\
                    cs_policy = \"lfu\"\ncs_admit_after = 3\n";
        let cfg = NdndConfig::from_toml(text).unwrap();
        cfg.validate().unwrap();
        let core = Core::new(&cfg).unwrap();
        let fw = core.fw_config();
        match fw.pit {
            PitMode::Fingerprint(p) => assert_eq!(p.faces, 32),
            PitMode::Exact(_) => panic!("exact PIT for pit = \"fingerprint\""),
        }
        let cs = fw.cs.unwrap();
        assert_eq!((cs.policy, cs.admit_after), (Policy::Lfu, 3));

        for bad in ["pit = \"fuzzy\"\n", "cs_policy = \"fifo\"\n"] {
            assert!(NdndConfig::from_toml(bad).is_err(), "{bad}");
        }
        let wide = NdndConfig {
            pit: PitKind::Fingerprint,
            ..base.clone()
        };
        assert!(wide.validate().unwrap_err().contains("max_faces 1024"));
        let k = NdndConfig {
            cs_admit_after: 256,
            ..base
        };
        assert!(k.validate().unwrap_err().contains("cs_admit_after 256"));
        let cfg = NdndConfig::from_toml("threads = 4\nndt_prefix = 1\nndt_bits = 4\n").unwrap();
        assert_eq!((cfg.threads, cfg.ndt_prefix, cfg.ndt_bits), (4, 1, 4));
        for (bad, msg) in [
            ("threads = 0\n", "threads 0"),
            ("threads = 65\n", "threads 65"),
            ("ndt_prefix = 0\n", "ndt_prefix 0"),
            ("ndt_bits = 17\n", "ndt_bits 17"),
            ("thread_queue = 0\n", "thread_queue 0"),
        ] {
            let mut c = NdndConfig::from_toml(bad).unwrap();
            c.udp = Some("127.0.0.1:0".parse().unwrap());
            assert!(c.validate().unwrap_err().contains(msg), "{bad}");
        }
    }

    #[test]
    fn a_byte_order_mark_before_the_config_is_skipped() {
        let text = "udp = \"127.0.0.1:6363\"\ncs_packets = 7\n";
        let plain = NdndConfig::from_toml(text).unwrap();
        let bom = NdndConfig::from_toml(&format!("\u{feff}{text}")).unwrap();
        assert_eq!(bom.udp, plain.udp);
        assert_eq!((bom.cs_packets, plain.cs_packets), (7, 7));
        // Only at the start: elsewhere it is not TOML.
        let inner = NdndConfig::from_toml("cs_packets = 7\n\u{feff}max_faces = 3\n");
        assert!(inner.is_err());
    }
}
