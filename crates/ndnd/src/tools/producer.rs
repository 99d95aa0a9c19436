//! A batched UDP producer: registers a prefix with the forwarder and
//! answers Interests under it with DigestSha256 Data.
//!
//! Two kinds of content:
//! * [`Content::Sized`]: any name under the prefix gets a Data of that name
//!   with a fixed payload. The MetaInfo, Content and SignatureInfo are
//!   encoded once ([`DataTemplate`]); per Interest only the name is copied
//!   and the digest computed.
//! * [`Content::Object`]: a segmented object ([`SegmentedObject`]),
//!   `/prefix/v=VERSION/seg=N` with FinalBlockId on every segment, encoded
//!   and signed once at start. An Interest with CanBePrefix for the prefix
//!   (or the versioned prefix) gets segment 0, as python-ndn's
//!   `segment_fetcher` and ndn-tools' `catchunks` discover the version.

use std::sync::atomic::{AtomicBool, Ordering};
use std::time::Duration;

use nexthop_wire::ndn::tlv::write_tlv;
use nexthop_wire::ndn::{tt, Data, MetaInfo, Name, NameComponent};
use sha2::{Digest, Sha256};

use super::{decode_received, register_prefix, with_token, Received, ToolError, UdpFace};
use crate::config::MAX_PACKET;

/// The encoded part of a Data after its Name (MetaInfo, Content,
/// SignatureInfo of DigestSha256): a Data for any name is this plus the
/// name and a digest.
#[derive(Debug, Clone)]
pub struct DataTemplate {
    tail: Vec<u8>,
}

impl DataTemplate {
    /// A template for `payload` with `freshness_ms` (0: no FreshnessPeriod).
    pub fn new(payload: &[u8], freshness_ms: u64) -> DataTemplate {
        let mut d = Data::new(Name::new(), payload.to_vec());
        if freshness_ms > 0 {
            d.meta_info.freshness_period_ms = Some(freshness_ms);
        }
        d.sign_digest_sha256();
        let signed = d.signed_portion();
        // The empty Name is `07 00`.
        DataTemplate {
            tail: signed[2..].to_vec(),
        }
    }

    /// Append the Data named `name` (its encoding, `07 LEN ...`).
    pub fn encode(&self, name_tlv: &[u8], out: &mut Vec<u8>) {
        let sig = Sha256::new()
            .chain_update(name_tlv)
            .chain_update(&self.tail)
            .finalize();
        let len = name_tlv.len() + self.tail.len() + 2 + sig.len();
        nexthop_wire::ndn::tlv::write_type_length(out, tt::DATA, len);
        out.extend_from_slice(name_tlv);
        out.extend_from_slice(&self.tail);
        write_tlv(out, tt::SIGNATURE_VALUE, &sig);
    }
}

/// A segmented object, encoded and signed once.
#[derive(Debug, Clone)]
pub struct SegmentedObject {
    prefix: Name,
    versioned: Name,
    segments: Vec<Vec<u8>>,
}

impl SegmentedObject {
    /// `bytes` cut into segments of `segment_size` bytes under
    /// `/prefix/v=version/seg=N`. An empty object is one empty segment.
    pub fn new(
        prefix: &Name,
        version: u64,
        bytes: &[u8],
        segment_size: usize,
        freshness_ms: u64,
    ) -> Result<SegmentedObject, ToolError> {
        // Name, MetaInfo, signature and TLV headers stay well within 800 bytes
        // for names under 512 bytes.
        if segment_size == 0 || segment_size + prefix.encoded_len() + 800 > MAX_PACKET {
            return Err(ToolError::Config(format!(
                "segment size {segment_size} must be 1..={} with this prefix",
                MAX_PACKET.saturating_sub(prefix.encoded_len() + 800)
            )));
        }
        let mut versioned = prefix.clone();
        versioned.push(&NameComponent::version(version));
        let chunks: Vec<&[u8]> = if bytes.is_empty() {
            vec![&[]]
        } else {
            bytes.chunks(segment_size).collect()
        };
        let last = NameComponent::segment(chunks.len() as u64 - 1);
        let segments = chunks
            .iter()
            .enumerate()
            .map(|(k, c)| {
                let mut n = versioned.clone();
                n.push(&NameComponent::segment(k as u64));
                let mut d = Data::new(n, c.to_vec());
                d.meta_info = MetaInfo {
                    freshness_period_ms: (freshness_ms > 0).then_some(freshness_ms),
                    final_block_id: Some(last.clone()),
                    ..MetaInfo::default()
                };
                d.sign_digest_sha256();
                d.to_wire()
            })
            .collect();
        Ok(SegmentedObject {
            prefix: prefix.clone(),
            versioned,
            segments,
        })
    }

    /// The versioned name, `/prefix/v=VERSION`.
    pub fn versioned_name(&self) -> &Name {
        &self.versioned
    }

    /// Number of segments.
    pub fn segment_count(&self) -> usize {
        self.segments.len()
    }

    /// The encoded Data answering an Interest for `name`, if any.
    pub fn answer(&self, name: &Name, can_be_prefix: bool) -> Option<&[u8]> {
        let n = self.versioned.len();
        if name.len() == n + 1 && self.versioned.is_prefix_of(name) {
            let seg = name.get(n)?.as_segment()?;
            return self
                .segments
                .get(usize::try_from(seg).ok()?)
                .map(Vec::as_slice);
        }
        if can_be_prefix && (name == &self.prefix || name == &self.versioned) {
            return self.segments.first().map(Vec::as_slice);
        }
        None
    }
}

/// What the producer serves.
#[derive(Debug, Clone)]
pub enum Content {
    /// Any name under the prefix: a Data with this template.
    Sized(DataTemplate),
    /// One segmented object.
    Object(SegmentedObject),
}

/// Producer counters.
#[derive(Debug, Default, Clone, Copy, PartialEq, Eq)]
pub struct ProducerCounters {
    /// Interests received.
    pub interests: u64,
    /// Data sent.
    pub data: u64,
    /// Interests for names it does not serve (not answered).
    pub unanswered: u64,
    /// Datagrams that did not decode as an Interest.
    pub bad: u64,
}

/// A producer on one UDP face.
#[derive(Debug)]
pub struct Producer {
    face: UdpFace,
    prefix: Name,
    content: Content,
    counters: ProducerCounters,
}

impl Producer {
    /// Connect to the forwarder at `forwarder` and register `prefix` (the
    /// object's prefix for [`Content::Object`]).
    pub fn start(
        forwarder: std::net::SocketAddr,
        prefix: Name,
        content: Content,
    ) -> Result<Producer, ToolError> {
        Producer::start_with(forwarder, prefix, content, true)
    }

    /// [`Producer::start`], with UDP GSO and GRO only when `gso`.
    pub fn start_with(
        forwarder: std::net::SocketAddr,
        prefix: Name,
        content: Content,
        gso: bool,
    ) -> Result<Producer, ToolError> {
        let mut face = UdpFace::connect_with(forwarder, gso)?;
        register_prefix(&mut face, &prefix, Duration::from_secs(5))?;
        Ok(Producer {
            face,
            prefix,
            content,
            counters: ProducerCounters::default(),
        })
    }

    /// Answer Interests until `stop` is set (checked every 50 ms at most).
    pub fn run(&mut self, stop: &AtomicBool) -> Result<ProducerCounters, ToolError> {
        let mut out: Vec<Vec<u8>> = Vec::with_capacity(super::BATCH);
        let mut name_tlv = Vec::new();
        while !stop.load(Ordering::Relaxed) {
            let n = self.face.recv_batch(Duration::from_millis(50))?;
            for k in 0..n {
                let (interest, token) = match decode_received(self.face.packet(k)) {
                    Ok(Received::Interest(i, t)) => (i, t),
                    _ => {
                        self.counters.bad += 1;
                        continue;
                    }
                };
                self.counters.interests += 1;
                let reply = match &self.content {
                    Content::Sized(t) if self.prefix.is_prefix_of(&interest.name) => {
                        name_tlv.clear();
                        interest.name.encode(&mut name_tlv);
                        let mut d = Vec::with_capacity(name_tlv.len() + 64);
                        t.encode(&name_tlv, &mut d);
                        Some(d)
                    }
                    Content::Sized(_) => None,
                    Content::Object(o) => o
                        .answer(&interest.name, interest.can_be_prefix)
                        .map(<[u8]>::to_vec),
                };
                match reply {
                    Some(d) => {
                        self.counters.data += 1;
                        out.push(with_token(d, token));
                    }
                    None => self.counters.unanswered += 1,
                }
            }
            if !out.is_empty() {
                // A refused send (the forwarder went away) ends the run.
                self.face.send_batch(&out)?;
                out.clear();
            }
        }
        Ok(self.counters)
    }

    /// The counters so far.
    pub fn counters(&self) -> ProducerCounters {
        self.counters
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use nexthop_wire::ndn::verify_digest_sha256_wire;

    #[test]
    fn template_data_is_a_valid_signed_data_of_the_name() {
        let t = DataTemplate::new(&[7u8; 300], 1000);
        let name = Name::from_uri("/bench/x/123").unwrap();
        let mut out = Vec::new();
        t.encode(&name.to_wire(), &mut out);
        assert!(verify_digest_sha256_wire(&out).unwrap());
        let d = Data::decode(&out).unwrap();
        assert_eq!(d.name, name);
        assert_eq!(d.content.as_deref(), Some(&[7u8; 300][..]));
        assert_eq!(d.meta_info.freshness_period_ms, Some(1000));
    }

    #[test]
    fn segments_carry_final_block_id_and_answer_discovery() {
        let prefix = Name::from_uri("/obj").unwrap();
        let bytes: Vec<u8> = (0..10_000u32).map(|x| x as u8).collect();
        let o = SegmentedObject::new(&prefix, 5, &bytes, 4096, 0).unwrap();
        assert_eq!(o.segment_count(), 3);
        let mut joined = Vec::new();
        for k in 0..3u64 {
            let mut n = o.versioned_name().clone();
            n.push(&NameComponent::segment(k));
            let d = Data::decode(o.answer(&n, false).unwrap()).unwrap();
            assert!(verify_digest_sha256_wire(o.answer(&n, false).unwrap()).unwrap());
            assert_eq!(d.meta_info.final_block_id, Some(NameComponent::segment(2)));
            joined.extend_from_slice(d.content.as_deref().unwrap());
        }
        assert_eq!(joined, bytes);
        let first = Data::decode(o.answer(&prefix, true).unwrap()).unwrap();
        assert_eq!(first.name.get(2).unwrap().as_segment(), Some(0));
        assert!(o.answer(&prefix, false).is_none());
        let mut past = o.versioned_name().clone();
        past.push(&NameComponent::segment(3));
        assert!(o.answer(&past, false).is_none());
        assert!(SegmentedObject::new(&prefix, 5, &bytes, 0, 0).is_err());
        assert!(SegmentedObject::new(&prefix, 5, &bytes, 9000, 0).is_err());
    }
}
