//! NFD status datasets: ForwarderStatus (`status/general`), FaceStatus
//! (`faces/list`), FibEntry (`fib/list`) and StrategyChoice
//! (`strategy-choice/list`), their encoders (the forwarder) and decoders
//! (`nexthop ndn status|face list|route list`), and the segmentation NFD
//! serves them with: `/<dataset>/<version>/<segment>`, FinalBlockId,
//! FreshnessPeriod 1 s, DigestSha256.
//!
//! TLV types and field order are NFD's management protocol (ndn-cxx
//! `tlv-nfd.hpp`), the ones python-ndn's `ndn.app_support.nfd_mgmt` decodes.

use nexthop_wire::ndn::tlv::{self, TlvReader};
use nexthop_wire::ndn::{Data, Name, NameComponent};

/// Content bytes per segment (NFD's: half the largest packet).
pub const SEGMENT_CONTENT: usize = 4400;
/// FreshnessPeriod of dataset segments, as NFD sets it.
pub const FRESHNESS_MS: u64 = 1000;

const ENTRY: u32 = 0x80;
const NAME: u32 = 7;
const FACE_ID: u32 = 0x69;
const COST: u32 = 0x6a;
const STRATEGY: u32 = 0x6b;
const FLAGS: u32 = 0x6c;
const URI: u32 = 0x72;
const LOCAL_URI: u32 = 0x81;
const NEXT_HOP_RECORD: u32 = 0x81;
const FACE_SCOPE: u32 = 0x84;
const FACE_PERSISTENCY: u32 = 0x85;
const LINK_TYPE: u32 = 0x86;
const MTU: u32 = 0x89;

/// FaceFlags bit: NDNLPv2 local fields (IncomingFaceId, NextHopFaceId) on.
pub const FLAG_LOCAL_FIELDS: u64 = 1;

/// ForwarderStatus (`/localhost/nfd/status/general`).
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct GeneralStatus {
    /// NfdVersion: this forwarder's name and version.
    pub version: String,
    /// StartTimestamp, ms since the Unix epoch.
    pub start_ms: u64,
    /// CurrentTimestamp, ms since the Unix epoch.
    pub current_ms: u64,
    /// NNameTreeEntries (here: FIB plus strategy-choice prefixes).
    pub name_tree_entries: u64,
    /// NFibEntries.
    pub fib_entries: u64,
    /// NPitEntries.
    pub pit_entries: u64,
    /// NMeasurementsEntries (none here).
    pub measurement_entries: u64,
    /// NCsEntries.
    pub cs_entries: u64,
    /// NInInterests, NInData, NInNacks.
    pub in_interests: u64,
    /// NInData.
    pub in_data: u64,
    /// NInNacks.
    pub in_nacks: u64,
    /// NOutInterests.
    pub out_interests: u64,
    /// NOutData.
    pub out_data: u64,
    /// NOutNacks.
    pub out_nacks: u64,
    /// NSatisfiedInterests.
    pub satisfied: u64,
    /// NUnsatisfiedInterests (PIT entries that expired).
    pub unsatisfied: u64,
}

const GENERAL_NNI: [u32; 15] = [
    0x81, 0x82, 0x83, 0x84, 0x85, 0x86, 0x87, 0x90, 0x91, 0x97, 0x92, 0x93, 0x98, 0x99, 0x9a,
];

impl GeneralStatus {
    fn nni_fields(&self) -> [u64; 15] {
        [
            self.start_ms,
            self.current_ms,
            self.name_tree_entries,
            self.fib_entries,
            self.pit_entries,
            self.measurement_entries,
            self.cs_entries,
            self.in_interests,
            self.in_data,
            self.in_nacks,
            self.out_interests,
            self.out_data,
            self.out_nacks,
            self.satisfied,
            self.unsatisfied,
        ]
    }

    /// The dataset's content.
    pub fn encode(&self) -> Vec<u8> {
        let mut v = Vec::new();
        tlv::write_tlv(&mut v, 0x80, self.version.as_bytes());
        for (typ, x) in GENERAL_NNI.iter().zip(self.nni_fields()) {
            tlv::write_nni_tlv(&mut v, *typ, x);
        }
        v
    }

    /// Decode the dataset's content (unknown fields skipped).
    pub fn decode(content: &[u8]) -> Result<GeneralStatus, String> {
        let mut s = GeneralStatus::default();
        let mut nni = [0u64; 15];
        for (typ, value) in fields(content)? {
            if typ == 0x80 {
                s.version = String::from_utf8_lossy(value).into_owned();
            } else if let Some(k) = GENERAL_NNI.iter().position(|&t| t == typ) {
                nni[k] = tlv::read_nni(value).map_err(|e| e.to_string())?;
            }
        }
        [
            s.start_ms,
            s.current_ms,
            s.name_tree_entries,
            s.fib_entries,
            s.pit_entries,
            s.measurement_entries,
            s.cs_entries,
            s.in_interests,
            s.in_data,
            s.in_nacks,
            s.out_interests,
            s.out_data,
            s.out_nacks,
            s.satisfied,
            s.unsatisfied,
        ] = nni;
        Ok(s)
    }
}

/// One FaceStatus of `/localhost/nfd/faces/list`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FaceStatus {
    /// FaceId.
    pub face_id: u64,
    /// Uri (the remote end: `udp4://IP:PORT`, `tcp4://...`, `fd://N`).
    pub uri: String,
    /// LocalUri (our end).
    pub local_uri: String,
    /// FaceScope: 0 non-local, 1 local.
    pub scope: u64,
    /// FacePersistency: 0 persistent, 1 on-demand, 2 permanent.
    pub persistency: u64,
    /// LinkType: 0 point-to-point.
    pub link_type: u64,
    /// Mtu (datagram faces).
    pub mtu: Option<u64>,
    /// NInInterests.
    pub in_interests: u64,
    /// NInData.
    pub in_data: u64,
    /// NInNacks.
    pub in_nacks: u64,
    /// NOutInterests.
    pub out_interests: u64,
    /// NOutData.
    pub out_data: u64,
    /// NOutNacks.
    pub out_nacks: u64,
    /// NInBytes.
    pub in_bytes: u64,
    /// NOutBytes.
    pub out_bytes: u64,
    /// Flags ([`FLAG_LOCAL_FIELDS`]).
    pub flags: u64,
}

const FACE_COUNTERS: [u32; 8] = [0x90, 0x91, 0x97, 0x92, 0x93, 0x98, 0x94, 0x95];

impl FaceStatus {
    fn counters(&self) -> [u64; 8] {
        [
            self.in_interests,
            self.in_data,
            self.in_nacks,
            self.out_interests,
            self.out_data,
            self.out_nacks,
            self.in_bytes,
            self.out_bytes,
        ]
    }

    /// Append this FaceStatus element.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let mut v = Vec::new();
        tlv::write_nni_tlv(&mut v, FACE_ID, self.face_id);
        tlv::write_tlv(&mut v, URI, self.uri.as_bytes());
        tlv::write_tlv(&mut v, LOCAL_URI, self.local_uri.as_bytes());
        tlv::write_nni_tlv(&mut v, FACE_SCOPE, self.scope);
        tlv::write_nni_tlv(&mut v, FACE_PERSISTENCY, self.persistency);
        tlv::write_nni_tlv(&mut v, LINK_TYPE, self.link_type);
        if let Some(m) = self.mtu {
            tlv::write_nni_tlv(&mut v, MTU, m);
        }
        for (typ, x) in FACE_COUNTERS.iter().zip(self.counters()) {
            tlv::write_nni_tlv(&mut v, *typ, x);
        }
        tlv::write_nni_tlv(&mut v, FLAGS, self.flags);
        tlv::write_tlv(out, ENTRY, &v);
    }

    /// Decode a `faces/list` content.
    pub fn decode_list(content: &[u8]) -> Result<Vec<FaceStatus>, String> {
        entries(content)?
            .into_iter()
            .map(|value| {
                let mut f = FaceStatus::default();
                let mut c = [0u64; 8];
                for (typ, v) in fields(value)? {
                    let n = || tlv::read_nni(v).map_err(|e| e.to_string());
                    let s = || String::from_utf8_lossy(v).into_owned();
                    match typ {
                        FACE_ID => f.face_id = n()?,
                        URI => f.uri = s(),
                        LOCAL_URI => f.local_uri = s(),
                        FACE_SCOPE => f.scope = n()?,
                        FACE_PERSISTENCY => f.persistency = n()?,
                        LINK_TYPE => f.link_type = n()?,
                        MTU => f.mtu = Some(n()?),
                        FLAGS => f.flags = n()?,
                        t => {
                            if let Some(k) = FACE_COUNTERS.iter().position(|&x| x == t) {
                                c[k] = n()?;
                            }
                        }
                    }
                }
                [
                    f.in_interests,
                    f.in_data,
                    f.in_nacks,
                    f.out_interests,
                    f.out_data,
                    f.out_nacks,
                    f.in_bytes,
                    f.out_bytes,
                ] = c;
                Ok(f)
            })
            .collect()
    }
}

/// One FibEntry of `/localhost/nfd/fib/list`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct FibEntry {
    /// The prefix.
    pub name: Name,
    /// NextHopRecords `(face, cost)`, in cost order.
    pub next_hops: Vec<(u64, u64)>,
}

impl FibEntry {
    /// Append this FibEntry element.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let mut v = Vec::new();
        self.name.encode(&mut v);
        for &(face, cost) in &self.next_hops {
            let mut r = Vec::new();
            tlv::write_nni_tlv(&mut r, FACE_ID, face);
            tlv::write_nni_tlv(&mut r, COST, cost);
            tlv::write_tlv(&mut v, NEXT_HOP_RECORD, &r);
        }
        tlv::write_tlv(out, ENTRY, &v);
    }

    /// Decode a `fib/list` content.
    pub fn decode_list(content: &[u8]) -> Result<Vec<FibEntry>, String> {
        entries(content)?
            .into_iter()
            .map(|value| {
                let mut e = FibEntry::default();
                for (typ, v) in fields(value)? {
                    match typ {
                        NAME => e.name = Name::from_value(v).map_err(|e| e.to_string())?,
                        NEXT_HOP_RECORD => {
                            let (mut face, mut cost) = (0, 0);
                            for (t, x) in fields(v)? {
                                let n = tlv::read_nni(x).map_err(|e| e.to_string())?;
                                match t {
                                    FACE_ID => face = n,
                                    COST => cost = n,
                                    _ => {}
                                }
                            }
                            e.next_hops.push((face, cost));
                        }
                        _ => {}
                    }
                }
                Ok(e)
            })
            .collect()
    }
}

/// One StrategyChoice of `/localhost/nfd/strategy-choice/list`.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct StrategyChoiceEntry {
    /// The prefix.
    pub name: Name,
    /// The strategy's name (`/localhost/nfd/strategy/best-route/v=5`).
    pub strategy: Name,
}

impl StrategyChoiceEntry {
    /// Append this StrategyChoice element.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let mut v = Vec::new();
        self.name.encode(&mut v);
        let mut s = Vec::new();
        self.strategy.encode(&mut s);
        tlv::write_tlv(&mut v, STRATEGY, &s);
        tlv::write_tlv(out, ENTRY, &v);
    }

    /// Decode a `strategy-choice/list` content.
    pub fn decode_list(content: &[u8]) -> Result<Vec<StrategyChoiceEntry>, String> {
        entries(content)?
            .into_iter()
            .map(|value| {
                let mut e = StrategyChoiceEntry::default();
                for (typ, v) in fields(value)? {
                    match typ {
                        NAME => e.name = Name::from_value(v).map_err(|e| e.to_string())?,
                        STRATEGY => {
                            let n = tlv::read_single(v, NAME).map_err(|e| e.to_string())?;
                            e.strategy = Name::from_value(n.value).map_err(|e| e.to_string())?;
                        }
                        _ => {}
                    }
                }
                Ok(e)
            })
            .collect()
    }
}

/// The `(type, value)` pairs of a TLV sequence.
fn fields(buf: &[u8]) -> Result<Vec<(u32, &[u8])>, String> {
    let mut r = TlvReader::new(buf);
    let mut out = Vec::new();
    while !r.is_empty() {
        let e = r.read().map_err(|e| e.to_string())?;
        out.push((e.typ, e.value));
    }
    Ok(out)
}

/// The values of the top-level entry elements (type 0x80) of a dataset.
fn entries(buf: &[u8]) -> Result<Vec<&[u8]>, String> {
    Ok(fields(buf)?
        .into_iter()
        .filter(|&(t, _)| t == ENTRY)
        .map(|(_, v)| v)
        .collect())
}

/// The segments of a dataset: Data `<prefix>/<version>/<seg=i>` with
/// FinalBlockId (on every segment), FreshnessPeriod [`FRESHNESS_MS`] and a
/// DigestSha256 signature. An empty dataset is one empty segment.
pub fn segment(prefix: &Name, version: u64, content: &[u8]) -> Vec<Vec<u8>> {
    let chunks: Vec<&[u8]> = if content.is_empty() {
        vec![&[][..]]
    } else {
        content.chunks(SEGMENT_CONTENT).collect()
    };
    let last = NameComponent::segment(chunks.len() as u64 - 1);
    let mut base = prefix.clone();
    base.push(&NameComponent::version(version));
    chunks
        .iter()
        .enumerate()
        .map(|(i, c)| {
            let mut n = base.clone();
            n.push(&NameComponent::segment(i as u64));
            let mut d = Data::new(n, c.to_vec());
            d.meta_info.freshness_period_ms = Some(FRESHNESS_MS);
            d.meta_info.final_block_id = Some(last.clone());
            d.sign_digest_sha256();
            d.to_wire()
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn general_status_round_trips_in_nfd_field_order() {
        let s = GeneralStatus {
            version: "nexthop 1".into(),
            start_ms: 1,
            current_ms: 2,
            fib_entries: 3,
            pit_entries: 4,
            in_interests: 5,
            out_nacks: 6,
            unsatisfied: 7,
            ..GeneralStatus::default()
        };
        let wire = s.encode();
        // NfdVersion first, then StartTimestamp.
        assert_eq!(&wire[..11], b"\x80\x09nexthop 1");
        assert_eq!(&wire[11..14], &[0x81, 0x01, 0x01]);
        assert_eq!(GeneralStatus::decode(&wire).unwrap(), s);
    }

    #[test]
    fn face_fib_and_strategy_lists_round_trip() {
        let f = FaceStatus {
            face_id: 3,
            uri: "udp4://127.0.0.1:5000".into(),
            local_uri: "udp4://127.0.0.1:6363".into(),
            scope: 1,
            persistency: 1,
            mtu: Some(8800),
            in_interests: 9,
            out_bytes: 100,
            flags: FLAG_LOCAL_FIELDS,
            ..FaceStatus::default()
        };
        let mut v = Vec::new();
        f.encode(&mut v);
        f.encode(&mut v);
        assert_eq!(FaceStatus::decode_list(&v).unwrap(), vec![f.clone(), f]);

        let e = FibEntry {
            name: Name::from_uri("/a/b").unwrap(),
            next_hops: vec![(2, 0), (5, 10)],
        };
        let mut v = Vec::new();
        e.encode(&mut v);
        assert_eq!(FibEntry::decode_list(&v).unwrap(), vec![e]);

        let s = StrategyChoiceEntry {
            name: Name::from_uri("/").unwrap(),
            strategy: Name::from_uri("/localhost/nfd/strategy/multicast").unwrap(),
        };
        let mut v = Vec::new();
        s.encode(&mut v);
        assert_eq!(StrategyChoiceEntry::decode_list(&v).unwrap(), vec![s]);
        assert!(FibEntry::decode_list(&[0x80, 0x05, 0x07]).is_err());
    }

    #[test]
    fn segments_carry_version_segment_and_final_block_id() {
        let prefix = Name::from_uri("/localhost/nfd/faces/list").unwrap();
        let content = vec![7u8; SEGMENT_CONTENT * 2 + 1];
        let segs = segment(&prefix, 42, &content);
        assert_eq!(segs.len(), 3);
        let mut back = Vec::new();
        for (i, s) in segs.iter().enumerate() {
            let d = Data::decode(s).unwrap();
            assert_eq!(d.name.len(), 6);
            assert_eq!(d.name.get(4).unwrap().as_version(), Some(42));
            assert_eq!(d.name.get(5).unwrap().as_segment(), Some(i as u64));
            assert_eq!(d.meta_info.final_block_id, Some(NameComponent::segment(2)));
            assert_eq!(d.meta_info.freshness_period_ms, Some(FRESHNESS_MS));
            back.extend(d.content.unwrap());
        }
        assert_eq!(back, content);
        assert_eq!(segment(&prefix, 1, &[]).len(), 1);
    }
}
