//! Interest packets (NDN packet format v0.3).
//!
//! ```text
//! Interest = INTEREST-TYPE TLV-LENGTH
//!              Name [CanBePrefix] [MustBeFresh] [ForwardingHint] [Nonce]
//!              [InterestLifetime] [HopLimit]
//!              [ApplicationParameters [InterestSignatureInfo InterestSignatureValue]]
//! ```

use sha2::{Digest, Sha256};

use super::error::NdnError;
use super::name::{component_type as ct, Name, NameComponent};
use super::tlv;
use super::tt;
use super::view::InterestView;

/// An Interest.
///
/// `Interest::decode` checks the structure: Name first, known elements in
/// the spec's order and at most once (an out-of-order or repeated element is
/// treated as unrecognized: an error if its type is critical, skipped
/// otherwise), unknown critical elements rejected, unknown non-critical ones
/// skipped, exactly one ParametersSha256DigestComponent in the name when
/// ApplicationParameters is present and none otherwise. Whether that
/// component holds the right digest is checked by
/// [`Interest::params_digest_ok`] / [`params_digest_ok_wire`].
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Interest {
    /// The name (with its params-sha256 component when there are parameters).
    pub name: Name,
    /// CanBePrefix.
    pub can_be_prefix: bool,
    /// MustBeFresh.
    pub must_be_fresh: bool,
    /// ForwardingHint: delegation names, in order (empty: absent).
    pub forwarding_hint: Vec<Name>,
    /// Nonce: 4 bytes, read big-endian.
    pub nonce: Option<u32>,
    /// InterestLifetime in milliseconds (absent: the default 4000 ms).
    pub lifetime_ms: Option<u64>,
    /// HopLimit.
    pub hop_limit: Option<u8>,
    /// ApplicationParameters.
    pub app_parameters: Option<Vec<u8>>,
    /// InterestSignatureInfo's TLV-VALUE, kept as bytes.
    pub signature_info: Option<Vec<u8>>,
    /// InterestSignatureValue's TLV-VALUE.
    pub signature_value: Option<Vec<u8>>,
}

impl Interest {
    /// An Interest for `name` with nothing else set.
    pub fn new(name: Name) -> Self {
        Interest {
            name,
            ..Default::default()
        }
    }

    /// Decode a whole Interest element; `wire` must hold exactly it. The
    /// one walk of the element is [`InterestView::parse`]; this copies its
    /// fields out.
    pub fn decode(wire: &[u8]) -> Result<Self, NdnError> {
        InterestView::parse(wire).map(|v| v.to_owned())
    }

    /// The elements the parameters digest covers: ApplicationParameters and
    /// the signature elements after it, as [`Interest::encode`] writes them.
    fn params_portion(&self) -> Vec<u8> {
        let mut v = Vec::new();
        if let Some(p) = &self.app_parameters {
            tlv::write_tlv(&mut v, tt::APPLICATION_PARAMETERS, p);
            if let Some(s) = &self.signature_info {
                tlv::write_tlv(&mut v, tt::INTEREST_SIGNATURE_INFO, s);
            }
            if let Some(s) = &self.signature_value {
                tlv::write_tlv(&mut v, tt::INTEREST_SIGNATURE_VALUE, s);
            }
        }
        v
    }

    /// The SHA-256 that the ParametersSha256DigestComponent must hold.
    pub fn params_digest(&self) -> [u8; 32] {
        Sha256::digest(self.params_portion()).into()
    }

    /// Set ApplicationParameters and put their digest into the name: the
    /// existing ParametersSha256DigestComponent is replaced, or one is
    /// appended. Call again after changing the signature fields.
    pub fn set_app_parameters(&mut self, params: Vec<u8>) {
        self.app_parameters = Some(params);
        self.update_params_digest();
    }

    /// Recompute the ParametersSha256DigestComponent from the parameters and
    /// signature fields (appending it if the name has none).
    pub fn update_params_digest(&mut self) {
        let d = NameComponent::params_digest(self.params_digest());
        let mut out = Name::new();
        let mut replaced = false;
        for c in self.name.components() {
            if c.typ() == ct::PARAMETERS_SHA256_DIGEST && !replaced {
                out.push(&d);
                replaced = true;
            } else {
                out.push(&c.to_owned());
            }
        }
        if !replaced {
            out.push(&d);
        }
        self.name = out;
    }

    /// Whether the name's ParametersSha256DigestComponent matches the
    /// parameters (true when there are neither parameters nor component).
    pub fn params_digest_ok(&self) -> bool {
        let comp = self
            .name
            .components()
            .find(|c| c.typ() == ct::PARAMETERS_SHA256_DIGEST);
        match (&self.app_parameters, comp) {
            (None, None) => true,
            (Some(_), Some(c)) => c.value() == self.params_digest(),
            _ => false,
        }
    }

    /// Append the whole Interest element.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let mut v = Vec::with_capacity(self.name.encoded_len() + 32);
        self.name.encode(&mut v);
        if self.can_be_prefix {
            tlv::write_tlv(&mut v, tt::CAN_BE_PREFIX, &[]);
        }
        if self.must_be_fresh {
            tlv::write_tlv(&mut v, tt::MUST_BE_FRESH, &[]);
        }
        if !self.forwarding_hint.is_empty() {
            let mut h = Vec::new();
            for n in &self.forwarding_hint {
                n.encode(&mut h);
            }
            tlv::write_tlv(&mut v, tt::FORWARDING_HINT, &h);
        }
        if let Some(n) = self.nonce {
            tlv::write_tlv(&mut v, tt::NONCE, &n.to_be_bytes());
        }
        if let Some(l) = self.lifetime_ms {
            tlv::write_nni_tlv(&mut v, tt::INTEREST_LIFETIME, l);
        }
        if let Some(h) = self.hop_limit {
            tlv::write_tlv(&mut v, tt::HOP_LIMIT, &[h]);
        }
        v.extend_from_slice(&self.params_portion());
        tlv::write_tlv(out, tt::INTEREST, &v);
    }

    /// The whole Interest element.
    pub fn to_wire(&self) -> Vec<u8> {
        let mut v = Vec::new();
        self.encode(&mut v);
        v
    }
}

/// Check the ParametersSha256DigestComponent of an encoded Interest against
/// its exact bytes (the digest covers ApplicationParameters through the end
/// of the Interest, unknown elements included). `Ok(true)` also for an
/// Interest without parameters.
pub fn params_digest_ok_wire(wire: &[u8]) -> Result<bool, NdnError> {
    let v = InterestView::parse(wire)?;
    let Some(at) = v.params_at else {
        return Ok(true);
    };
    let d: [u8; 32] = Sha256::digest(wire.get(at..).unwrap_or(&[])).into();
    Ok(v.name
        .components()
        .any(|c| c.typ() == ct::PARAMETERS_SHA256_DIGEST && c.value() == d))
}

#[cfg(test)]
mod tests {
    use super::*;

    fn name(s: &str) -> Name {
        Name::from_uri(s).unwrap()
    }

    #[test]
    fn minimal_interest_is_name_only() {
        let i = Interest::new(name("/a"));
        assert_eq!(i.to_wire(), [5, 5, 7, 3, 8, 1, b'a']);
        assert_eq!(Interest::decode(&i.to_wire()).unwrap(), i);
    }

    #[test]
    fn all_fields_round_trip_in_spec_order() {
        let mut i = Interest::new(name("/ndn/test"));
        i.can_be_prefix = true;
        i.must_be_fresh = true;
        i.forwarding_hint = vec![name("/hint/a"), name("/hint/b")];
        i.nonce = Some(0xA1B2C3D4);
        i.lifetime_ms = Some(10_000);
        i.hop_limit = Some(64);
        i.set_app_parameters(b"params".to_vec());
        let w = i.to_wire();
        let d = Interest::decode(&w).unwrap();
        assert_eq!(d, i);
        assert!(d.params_digest_ok());
        assert_eq!(params_digest_ok_wire(&w), Ok(true));
        // The digest covers the wire from the ApplicationParameters element on.
        let at = InterestView::parse(&w).unwrap().params_at.unwrap();
        assert_eq!(w[at], tt::APPLICATION_PARAMETERS as u8);
        assert_eq!(Sha256::digest(&w[at..]).as_slice(), d.params_digest());
        assert_eq!(d.name.len(), 3);
        assert_eq!(d.name.last().unwrap().typ(), ct::PARAMETERS_SHA256_DIGEST);
    }

    #[test]
    fn tampered_parameters_fail_the_digest_check() {
        let mut i = Interest::new(name("/p"));
        i.set_app_parameters(vec![1, 2, 3]);
        let mut w = i.to_wire();
        let last = w.len() - 1;
        w[last] ^= 1;
        assert_eq!(params_digest_ok_wire(&w), Ok(false));
        let d = Interest::decode(&w).unwrap();
        assert!(!d.params_digest_ok());
    }

    #[test]
    fn parameters_need_exactly_one_digest_component() {
        // Parameters without the component.
        let w = [5, 6, 7, 0, 36, 2, 1, 2];
        assert!(matches!(Interest::decode(&w), Err(NdnError::Malformed(_))));
        // Component without parameters.
        let mut n = Name::new();
        n.push(&NameComponent::params_digest([0; 32]));
        let i = Interest::new(n);
        assert!(matches!(
            Interest::decode(&i.to_wire()),
            Err(NdnError::Malformed(_))
        ));
    }

    #[test]
    fn unknown_non_critical_elements_are_skipped_and_critical_ones_rejected() {
        // Name /a, then unknown even type 200 (skipped), then Nonce.
        let w = [5, 13, 7, 3, 8, 1, b'a', 200, 0, 10, 4, 0, 0, 0, 1];
        let i = Interest::decode(&w).unwrap();
        assert_eq!(i.nonce, Some(1));
        // Unknown odd type 201: critical.
        let w = [5, 7, 7, 3, 8, 1, b'a', 201, 0];
        assert_eq!(
            Interest::decode(&w),
            Err(NdnError::UnknownCritical {
                typ: 201,
                context: "Interest"
            })
        );
        // Unknown type <= 31: critical.
        let w = [5, 7, 7, 3, 8, 1, b'a', 15, 0];
        assert!(matches!(
            Interest::decode(&w),
            Err(NdnError::UnknownCritical { typ: 15, .. })
        ));
    }

    #[test]
    fn out_of_order_critical_elements_are_rejected_and_even_ones_skipped() {
        // Nonce (10) before MustBeFresh (18): MustBeFresh is critical (<= 31).
        let w = [5, 13, 7, 3, 8, 1, b'a', 10, 4, 0, 0, 0, 1, 18, 0];
        assert_eq!(
            Interest::decode(&w),
            Err(NdnError::OutOfOrder {
                typ: 18,
                context: "Interest"
            })
        );
        // HopLimit (34, even) twice: the second is skipped.
        let w = [5, 11, 7, 3, 8, 1, b'a', 34, 1, 5, 34, 1, 6];
        assert_eq!(Interest::decode(&w).unwrap().hop_limit, Some(5));
        // A second Name is critical.
        let w = [5, 7, 7, 3, 8, 1, b'a', 7, 0];
        assert!(matches!(
            Interest::decode(&w),
            Err(NdnError::OutOfOrder { typ: 7, .. })
        ));
    }

    #[test]
    fn field_sizes_are_checked() {
        let w = [5, 10, 7, 3, 8, 1, b'a', 10, 3, 0, 0, 0];
        assert!(matches!(Interest::decode(&w), Err(NdnError::Malformed(_))));
        let w = [5, 9, 7, 3, 8, 1, b'a', 34, 2, 0, 0];
        assert!(matches!(Interest::decode(&w), Err(NdnError::Malformed(_))));
        let w = [5, 10, 7, 3, 8, 1, b'a', 12, 3, 0, 0, 0];
        assert!(matches!(Interest::decode(&w), Err(NdnError::Malformed(_))));
        let w = [5, 8, 7, 3, 8, 1, b'a', 33, 1, 0];
        assert!(matches!(Interest::decode(&w), Err(NdnError::Malformed(_))));
        // Name missing.
        assert!(matches!(
            Interest::decode(&[5, 2, 10, 0]),
            Err(NdnError::Missing { .. })
        ));
        assert!(matches!(
            Interest::decode(&[5, 0]),
            Err(NdnError::Missing { .. })
        ));
    }
}
