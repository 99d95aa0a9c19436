//! Data packets (NDN packet format v0.3) and DigestSha256 signatures.
//!
//! ```text
//! Data = DATA-TYPE TLV-LENGTH Name [MetaInfo] [Content] SignatureInfo SignatureValue
//! MetaInfo = META-INFO-TYPE TLV-LENGTH [ContentType] [FreshnessPeriod] [FinalBlockId]
//! SignatureInfo = SIGNATURE-INFO-TYPE TLV-LENGTH SignatureType [KeyLocator] *OtherFields
//! ```

use sha2::{Digest, Sha256};

use super::error::NdnError;
use super::name::{Name, NameComponent};
use super::tlv;
use super::tt;
use super::view::DataView;

/// SignatureType numbers.
pub mod signature_type {
    /// DigestSha256: SignatureValue is the SHA-256 of the signed portion.
    pub const DIGEST_SHA256: u64 = 0;
    /// SignatureSha256WithRsa.
    pub const SHA256_WITH_RSA: u64 = 1;
    /// SignatureSha256WithEcdsa.
    pub const SHA256_WITH_ECDSA: u64 = 3;
    /// SignatureHmacWithSha256.
    pub const HMAC_WITH_SHA256: u64 = 4;
    /// SignatureEd25519.
    pub const ED25519: u64 = 5;
    /// NullSignature (value empty).
    pub const NULL: u64 = 200;
}

/// ContentType numbers.
pub mod content_type {
    /// BLOB (the default when absent).
    pub const BLOB: u64 = 0;
    /// LINK.
    pub const LINK: u64 = 1;
    /// KEY.
    pub const KEY: u64 = 2;
    /// NACK (application-level).
    pub const NACK: u64 = 3;
}

/// MetaInfo. All-`None` means absent (it is then not encoded), unless
/// `keep_empty` is set: then an empty MetaInfo element (`14 00`) is
/// written, as some encoders (python-ndn) do, so that decode→encode is
/// byte-exact.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct MetaInfo {
    /// ContentType (absent: BLOB).
    pub content_type: Option<u64>,
    /// FreshnessPeriod in milliseconds (absent: 0).
    pub freshness_period_ms: Option<u64>,
    /// FinalBlockId: one name component.
    pub final_block_id: Option<NameComponent>,
    /// Encode an empty MetaInfo element when every field above is `None`
    /// (ignored otherwise). Decoding sets it exactly when the packet held
    /// a MetaInfo element with none of these fields.
    pub keep_empty: bool,
}

impl MetaInfo {
    fn is_empty(&self) -> bool {
        self.content_type.is_none()
            && self.freshness_period_ms.is_none()
            && self.final_block_id.is_none()
    }

    fn encode(&self, out: &mut Vec<u8>) {
        if self.is_empty() && !self.keep_empty {
            return;
        }
        let mut v = Vec::new();
        if let Some(t) = self.content_type {
            tlv::write_nni_tlv(&mut v, tt::CONTENT_TYPE, t);
        }
        if let Some(f) = self.freshness_period_ms {
            tlv::write_nni_tlv(&mut v, tt::FRESHNESS_PERIOD, f);
        }
        if let Some(c) = &self.final_block_id {
            let mut cv = Vec::new();
            c.encode(&mut cv);
            tlv::write_tlv(&mut v, tt::FINAL_BLOCK_ID, &cv);
        }
        tlv::write_tlv(out, tt::META_INFO, &v);
    }
}

/// KeyLocator.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeyLocator {
    /// The name of the key (or certificate).
    Name(Name),
    /// KeyDigest bytes.
    KeyDigest(Vec<u8>),
}

/// SignatureInfo: the type and key locator are decoded; the fields after
/// them (ValidityPeriod, SignatureNonce, SignatureTime, ...) are kept as
/// their TLV bytes, checked to be well-formed TLV but not interpreted (they
/// matter to the signer's verifier, not to a forwarder).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct SignatureInfo {
    /// SignatureType (see [`signature_type`]).
    pub signature_type: u64,
    /// KeyLocator.
    pub key_locator: Option<KeyLocator>,
    /// The remaining fields, as TLV bytes.
    pub other: Vec<u8>,
}

impl SignatureInfo {
    /// SignatureInfo of a DigestSha256 signature.
    pub fn digest_sha256() -> Self {
        SignatureInfo {
            signature_type: signature_type::DIGEST_SHA256,
            key_locator: None,
            other: Vec::new(),
        }
    }

    fn encode(&self, out: &mut Vec<u8>) {
        let mut v = Vec::new();
        tlv::write_nni_tlv(&mut v, tt::SIGNATURE_TYPE, self.signature_type);
        match &self.key_locator {
            Some(KeyLocator::Name(n)) => {
                let mut k = Vec::new();
                n.encode(&mut k);
                tlv::write_tlv(&mut v, tt::KEY_LOCATOR, &k);
            }
            Some(KeyLocator::KeyDigest(d)) => {
                let mut k = Vec::new();
                tlv::write_tlv(&mut k, tt::KEY_DIGEST, d);
                tlv::write_tlv(&mut v, tt::KEY_LOCATOR, &k);
            }
            None => {}
        }
        v.extend_from_slice(&self.other);
        tlv::write_tlv(out, tt::SIGNATURE_INFO, &v);
    }
}

/// A Data packet.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Data {
    /// The name.
    pub name: Name,
    /// MetaInfo (all `None`: absent).
    pub meta_info: MetaInfo,
    /// Content (`None`: absent, which differs from empty on the wire).
    pub content: Option<Vec<u8>>,
    /// SignatureInfo.
    pub signature_info: SignatureInfo,
    /// SignatureValue's TLV-VALUE.
    pub signature_value: Vec<u8>,
}

impl Data {
    /// A Data packet with `name` and `content`, not signed yet.
    pub fn new(name: Name, content: Vec<u8>) -> Self {
        Data {
            name,
            content: Some(content),
            ..Default::default()
        }
    }

    /// Decode a whole Data element; `wire` must hold exactly it. The one
    /// walk of the element is [`DataView::parse`]; this copies its fields
    /// out.
    pub fn decode(wire: &[u8]) -> Result<Self, NdnError> {
        DataView::parse(wire).map(|v| v.to_owned())
    }

    /// The signed portion as [`Data::encode`] writes it: Name, MetaInfo,
    /// Content, SignatureInfo.
    pub fn signed_portion(&self) -> Vec<u8> {
        let mut v = Vec::with_capacity(
            self.name.encoded_len() + self.content.as_ref().map_or(0, Vec::len) + 16,
        );
        self.name.encode(&mut v);
        self.meta_info.encode(&mut v);
        if let Some(c) = &self.content {
            tlv::write_tlv(&mut v, tt::CONTENT, c);
        }
        self.signature_info.encode(&mut v);
        v
    }

    /// Sign with DigestSha256: SignatureInfo becomes type 0 without a key
    /// locator, SignatureValue the SHA-256 of the signed portion.
    pub fn sign_digest_sha256(&mut self) {
        self.signature_info = SignatureInfo::digest_sha256();
        self.signature_value = Sha256::digest(self.signed_portion()).to_vec();
    }

    /// Whether this is a valid DigestSha256-signed Data, computed over the
    /// encoding [`Data::encode`] produces (use [`verify_digest_sha256_wire`]
    /// for received bytes that may carry unknown elements).
    pub fn verify_digest_sha256(&self) -> bool {
        self.signature_info.signature_type == signature_type::DIGEST_SHA256
            && self.signature_value.as_slice() == Sha256::digest(self.signed_portion()).as_slice()
    }

    /// Append the whole Data element.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let mut v = self.signed_portion();
        tlv::write_tlv(&mut v, tt::SIGNATURE_VALUE, &self.signature_value);
        tlv::write_tlv(out, tt::DATA, &v);
    }

    /// The whole Data element.
    pub fn to_wire(&self) -> Vec<u8> {
        let mut v = Vec::new();
        self.encode(&mut v);
        v
    }
}

/// Verify a DigestSha256 signature over the exact received bytes of a Data
/// element: `Ok(true)` when the SignatureType is DigestSha256 and the
/// SignatureValue is the SHA-256 of everything from the Name to the end of
/// SignatureInfo.
pub fn verify_digest_sha256_wire(wire: &[u8]) -> Result<bool, NdnError> {
    let d = DataView::parse(wire)?;
    Ok(d.signature_type == signature_type::DIGEST_SHA256
        && d.signature_value == Sha256::digest(d.signed_portion).as_slice())
}

/// The implicit SHA-256 digest of an encoded Data packet (the digest of the
/// whole element, the value of a `sha256digest=` component naming it).
pub fn implicit_digest(wire: &[u8]) -> [u8; 32] {
    Sha256::digest(wire).into()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(s: &str) -> Name {
        Name::from_uri(s).unwrap()
    }

    #[test]
    fn digest_sha256_signs_and_verifies_and_detects_tampering() {
        let mut d = Data::new(name("/a/b"), b"hello".to_vec());
        d.meta_info.freshness_period_ms = Some(1000);
        d.sign_digest_sha256();
        assert!(d.verify_digest_sha256());
        let w = d.to_wire();
        assert_eq!(verify_digest_sha256_wire(&w), Ok(true));
        let back = Data::decode(&w).unwrap();
        assert_eq!(back, d);
        // Flip a content byte: "hello" sits before SignatureInfo.
        let at = w.windows(5).position(|x| x == b"hello").unwrap();
        let mut bad = w.clone();
        bad[at] ^= 0x20;
        assert_eq!(verify_digest_sha256_wire(&bad), Ok(false));
        assert!(!Data::decode(&bad).unwrap().verify_digest_sha256());
    }

    #[test]
    fn known_bytes_of_a_small_signed_data() {
        let mut d = Data::new(name("/x"), vec![]);
        d.sign_digest_sha256();
        let w = d.to_wire();
        // Name, empty Content, SignatureInfo(SignatureType 0), SignatureValue(32).
        assert_eq!(&w[..14], &[6, 46, 7, 3, 8, 1, b'x', 21, 0, 22, 3, 27, 1, 0]);
        assert_eq!(&w[14..16], &[23, 32]);
        let digest = Sha256::digest(&w[2..14]);
        assert_eq!(&w[16..], digest.as_slice());
    }

    #[test]
    fn meta_info_and_key_locator_round_trip() {
        let mut d = Data::new(name("/a/seg=0"), vec![1, 2, 3]);
        d.meta_info = MetaInfo {
            content_type: Some(content_type::KEY),
            freshness_period_ms: Some(4000),
            final_block_id: Some(NameComponent::segment(9)),
            keep_empty: false,
        };
        d.signature_info = SignatureInfo {
            signature_type: signature_type::SHA256_WITH_ECDSA,
            key_locator: Some(KeyLocator::Name(name("/key"))),
            other: vec![38, 2, 0xAB, 0xCD],
        };
        d.signature_value = vec![7; 64];
        let w = d.to_wire();
        assert_eq!(Data::decode(&w).unwrap(), d);
        assert_eq!(verify_digest_sha256_wire(&w), Ok(false));
        d.signature_info.key_locator = Some(KeyLocator::KeyDigest(vec![1; 32]));
        assert_eq!(Data::decode(&d.to_wire()).unwrap(), d);
    }

    #[test]
    fn empty_meta_info_is_kept_so_decode_encode_is_byte_exact() {
        // Name /a, MetaInfo (empty), Content "x", SignatureInfo(type 0),
        // empty SignatureValue: what python-ndn writes for MetaInfo().
        let with = [
            6, 17, 7, 3, 8, 1, b'a', 20, 0, 21, 1, b'x', 22, 3, 27, 1, 0, 23, 0,
        ];
        let d = Data::decode(&with).unwrap();
        assert!(d.meta_info.keep_empty);
        assert_eq!(d.meta_info.content_type, None);
        assert_eq!(d.to_wire(), with);
        assert_eq!(&d.signed_portion()[5..7], &[20, 0]);
        // Without the element: none is added.
        let without = [6, 15, 7, 3, 8, 1, b'a', 21, 1, b'x', 22, 3, 27, 1, 0, 23, 0];
        let d = Data::decode(&without).unwrap();
        assert!(!d.meta_info.keep_empty);
        assert_eq!(d.to_wire(), without);
        // A MetaInfo with a field does not set it, and it does not matter then.
        let mut d = Data::new(name("/a"), vec![]);
        d.meta_info.freshness_period_ms = Some(1);
        let w = d.to_wire();
        assert!(!Data::decode(&w).unwrap().meta_info.keep_empty);
        d.meta_info.keep_empty = true;
        assert_eq!(d.to_wire(), w);
        // Set by hand on an empty MetaInfo, it writes the element.
        let mut d = Data::decode(&without).unwrap();
        d.meta_info.keep_empty = true;
        assert_eq!(d.to_wire(), with);
    }

    #[test]
    fn signature_elements_are_required() {
        // Name only.
        assert!(matches!(
            Data::decode(&[6, 2, 7, 0]),
            Err(NdnError::Missing { .. })
        ));
        // Name + SignatureInfo, no SignatureValue.
        assert!(matches!(
            Data::decode(&[6, 7, 7, 0, 22, 3, 27, 1, 0]),
            Err(NdnError::Missing {
                field: "SignatureValue",
                ..
            })
        ));
        // SignatureInfo without SignatureType.
        assert!(matches!(
            Data::decode(&[6, 6, 7, 0, 22, 0, 23, 0]),
            Err(NdnError::Missing { .. })
        ));
    }

    #[test]
    fn unknown_elements_follow_the_critical_rule() {
        // Unknown even 200 after Name: skipped; odd 201: rejected.
        let ok = [6, 12, 7, 0, 200, 1, 9, 22, 3, 27, 1, 0, 23, 0];
        assert!(Data::decode(&ok).is_ok());
        assert_eq!(verify_digest_sha256_wire(&ok), Ok(false));
        let bad = [6, 12, 7, 0, 201, 1, 9, 22, 3, 27, 1, 0, 23, 0];
        assert!(matches!(
            Data::decode(&bad),
            Err(NdnError::UnknownCritical { typ: 201, .. })
        ));
        // Content after SignatureInfo: out of order, Content (21) is critical.
        let bad = [6, 11, 7, 0, 22, 3, 27, 1, 0, 21, 0, 23, 0];
        assert!(matches!(
            Data::decode(&bad),
            Err(NdnError::OutOfOrder { typ: 21, .. })
        ));
        // MetaInfo with an unknown critical field.
        let bad = [6, 13, 7, 0, 20, 2, 31, 0, 22, 3, 27, 1, 0, 23, 0];
        assert!(matches!(
            Data::decode(&bad),
            Err(NdnError::UnknownCritical {
                context: "MetaInfo",
                ..
            })
        ));
    }

    #[test]
    fn implicit_digest_is_sha256_of_the_element() {
        let w = Data::new(name("/a"), vec![]).to_wire();
        assert_eq!(
            implicit_digest(&w).as_slice(),
            Sha256::digest(&w).as_slice()
        );
    }
}
