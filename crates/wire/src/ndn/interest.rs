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
use super::name::{component_type as ct, Name, NameComponent, NameRef};
use super::tlv::{self, TlvReader};
use super::tt;

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

/// Order of the known Interest elements after Name.
const ORDER: [u32; 9] = [
    tt::CAN_BE_PREFIX,
    tt::MUST_BE_FRESH,
    tt::FORWARDING_HINT,
    tt::NONCE,
    tt::INTEREST_LIFETIME,
    tt::HOP_LIMIT,
    tt::APPLICATION_PARAMETERS,
    tt::INTEREST_SIGNATURE_INFO,
    tt::INTEREST_SIGNATURE_VALUE,
];

/// Read the next element and check it is the Name that must come first.
pub(crate) fn read_leading_name(
    r: &mut TlvReader<'_>,
    context: &'static str,
) -> Result<Name, NdnError> {
    match r.peek_type()? {
        Some(tt::NAME) => {
            let e = r.read()?;
            Name::from_value(e.value)
        }
        _ => Err(NdnError::Missing {
            context,
            field: "Name (first element)",
        }),
    }
}

/// [`read_leading_name`] without the copy: the Name as a view.
pub(crate) fn read_leading_name_ref<'a>(
    r: &mut TlvReader<'a>,
    context: &'static str,
) -> Result<NameRef<'a>, NdnError> {
    match r.peek_type()? {
        Some(tt::NAME) => {
            let e = r.read()?;
            NameRef::from_value(e.value)
        }
        _ => Err(NdnError::Missing {
            context,
            field: "Name (first element)",
        }),
    }
}

/// Handle an element that is unknown or out of place: skip it if it is not
/// critical.
pub(crate) fn unrecognized(typ: u32, known: bool, context: &'static str) -> Result<(), NdnError> {
    if !tlv::is_critical(typ) {
        Ok(())
    } else if known {
        Err(NdnError::OutOfOrder { typ, context })
    } else {
        Err(NdnError::UnknownCritical { typ, context })
    }
}

fn empty_flag(value: &[u8], what: &'static str) -> Result<bool, NdnError> {
    if value.is_empty() {
        Ok(true)
    } else {
        Err(NdnError::Malformed(what))
    }
}

/// Count of ParametersSha256DigestComponents in a name.
fn params_components(name: &Name) -> usize {
    name.components()
        .filter(|c| c.typ() == ct::PARAMETERS_SHA256_DIGEST)
        .count()
}

impl Interest {
    /// An Interest for `name` with nothing else set.
    pub fn new(name: Name) -> Self {
        Interest {
            name,
            ..Default::default()
        }
    }

    /// Decode a whole Interest element; `wire` must hold exactly it.
    pub fn decode(wire: &[u8]) -> Result<Self, NdnError> {
        let e = tlv::read_single(wire, tt::INTEREST)?;
        Self::decode_value(e.value, e.value_at).map(|(i, _)| i)
    }

    /// Decode an Interest TLV-VALUE; also returns the offset in `value` where
    /// ApplicationParameters starts (the parameters digest covers
    /// `value[start..]`).
    fn decode_value(value: &[u8], base: usize) -> Result<(Self, Option<usize>), NdnError> {
        const CX: &str = "Interest";
        let mut r = TlvReader::with_base(value, base);
        let mut i = Interest::new(read_leading_name(&mut r, CX)?);
        let mut next = 0usize; // index into ORDER of the first element still allowed
        let mut params_at = None;
        while !r.is_empty() {
            let e = r.read()?;
            let pos = ORDER.iter().position(|&t| t == e.typ);
            let Some(idx) = pos.filter(|&p| p >= next) else {
                unrecognized(e.typ, pos.is_some() || e.typ == tt::NAME, CX)?;
                continue;
            };
            next = idx + 1;
            match e.typ {
                tt::CAN_BE_PREFIX => {
                    i.can_be_prefix = empty_flag(e.value, "CanBePrefix is not empty")?
                }
                tt::MUST_BE_FRESH => {
                    i.must_be_fresh = empty_flag(e.value, "MustBeFresh is not empty")?
                }
                tt::FORWARDING_HINT => {
                    let mut h = e.reader();
                    while !h.is_empty() {
                        let d = h.read()?;
                        if d.typ == tt::NAME {
                            i.forwarding_hint.push(Name::from_value(d.value)?);
                        } else {
                            unrecognized(d.typ, false, "ForwardingHint")?;
                        }
                    }
                    if i.forwarding_hint.is_empty() {
                        return Err(NdnError::Malformed("ForwardingHint holds no Name"));
                    }
                }
                tt::NONCE => {
                    let b: [u8; 4] = e
                        .value
                        .try_into()
                        .map_err(|_| NdnError::Malformed("Nonce is not 4 bytes"))?;
                    i.nonce = Some(u32::from_be_bytes(b));
                }
                tt::INTEREST_LIFETIME => i.lifetime_ms = Some(e.nni()?),
                tt::HOP_LIMIT => match e.value {
                    [h] => i.hop_limit = Some(*h),
                    _ => return Err(NdnError::Malformed("HopLimit is not 1 byte")),
                },
                tt::APPLICATION_PARAMETERS => {
                    params_at = Some(e.at - base);
                    i.app_parameters = Some(e.value.to_vec());
                }
                tt::INTEREST_SIGNATURE_INFO => i.signature_info = Some(e.value.to_vec()),
                tt::INTEREST_SIGNATURE_VALUE => i.signature_value = Some(e.value.to_vec()),
                _ => {}
            }
        }
        if i.signature_info.is_some() && i.app_parameters.is_none() {
            return Err(NdnError::Malformed(
                "InterestSignatureInfo without ApplicationParameters",
            ));
        }
        if i.signature_info.is_some() != i.signature_value.is_some() {
            return Err(NdnError::Malformed(
                "InterestSignatureInfo and InterestSignatureValue must come together",
            ));
        }
        let want = usize::from(i.app_parameters.is_some());
        if params_components(&i.name) != want {
            return Err(NdnError::Malformed(
                "Interest name must hold one ParametersSha256DigestComponent iff it has ApplicationParameters",
            ));
        }
        Ok((i, params_at))
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
    let e = tlv::read_single(wire, tt::INTEREST)?;
    let (i, at) = Interest::decode_value(e.value, e.value_at)?;
    let Some(at) = at else {
        return Ok(true);
    };
    let d: [u8; 32] = Sha256::digest(e.value.get(at..).unwrap_or(&[])).into();
    Ok(i.name
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
