//! NFD management commands: ControlParameters in, ControlResponse out.
//!
//! A command Interest is `/localhost/nfd/<module>/<verb>/<ControlParameters>`
//! followed either by the four components of a signed command Interest of
//! NDN packet format 0.2 (timestamp, nonce, SignatureInfo, SignatureValue:
//! what python-ndn 0.5 sends) or by a ParametersSha256Digest with the
//! Interest's own InterestSignatureInfo/Value (format 0.3). Like NFD for
//! local faces, the signature is required to be present and well formed,
//! not verified against a trust schema.

use nexthop_wire::ndn::tlv::{self, TlvReader};
use nexthop_wire::ndn::{Data, Interest, Name, NameRef};

const CONTROL_PARAMETERS: u32 = 0x68;
const FACE_ID: u32 = 0x69;
const COST: u32 = 0x6a;
const FLAGS: u32 = 0x6c;
const EXPIRATION_PERIOD: u32 = 0x6d;
const ORIGIN: u32 = 0x6f;
const MASK: u32 = 0x70;
const STRATEGY: u32 = 0x6b;
const FACE_PERSISTENCY: u32 = 0x85;
const CONTROL_RESPONSE: u32 = 0x65;
const STATUS_CODE: u32 = 0x66;
const STATUS_TEXT: u32 = 0x67;
const NAME: u32 = 7;
const SIGNATURE_INFO: u8 = 0x16;
const SIGNATURE_VALUE: u8 = 0x17;

/// The fields of ControlParameters the RIB commands use.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct ControlParameters {
    /// Name.
    pub name: Option<Name>,
    /// FaceId (0 or absent: the requesting face).
    pub face_id: Option<u64>,
    /// Cost.
    pub cost: Option<u64>,
    /// Origin.
    pub origin: Option<u64>,
    /// Flags.
    pub flags: Option<u64>,
    /// Mask (which Flags bits `faces/update` changes).
    pub mask: Option<u64>,
    /// Strategy: the strategy's name (`strategy-choice/set`).
    pub strategy: Option<Name>,
    /// ExpirationPeriod (accepted and echoed; routes live until
    /// unregistered or their face closes).
    pub expiration_ms: Option<u64>,
    /// FacePersistency.
    pub face_persistency: Option<u64>,
}

impl ControlParameters {
    /// Decode a ControlParameters element (unknown fields are skipped).
    pub fn decode(wire: &[u8]) -> Result<ControlParameters, String> {
        let e = tlv::read_single(wire, CONTROL_PARAMETERS).map_err(|e| e.to_string())?;
        let mut r = e.reader();
        let mut cp = ControlParameters::default();
        while !r.is_empty() {
            let f = r.read().map_err(|e| e.to_string())?;
            let nni = || f.nni().map_err(|e| e.to_string());
            match f.typ {
                NAME => cp.name = Some(Name::from_value(f.value).map_err(|e| e.to_string())?),
                FACE_ID => cp.face_id = Some(nni()?),
                COST => cp.cost = Some(nni()?),
                ORIGIN => cp.origin = Some(nni()?),
                FLAGS => cp.flags = Some(nni()?),
                MASK => cp.mask = Some(nni()?),
                STRATEGY => {
                    let n = tlv::read_single(f.value, NAME).map_err(|e| e.to_string())?;
                    cp.strategy = Some(Name::from_value(n.value).map_err(|e| e.to_string())?);
                }
                EXPIRATION_PERIOD => cp.expiration_ms = Some(nni()?),
                FACE_PERSISTENCY => cp.face_persistency = Some(nni()?),
                _ => {}
            }
        }
        Ok(cp)
    }

    /// Encode as a ControlParameters element.
    pub fn encode(&self, out: &mut Vec<u8>) {
        let mut v = Vec::new();
        if let Some(n) = &self.name {
            n.encode(&mut v);
        }
        // NFD's order: Name, FaceId, Origin, Cost, Flags, Mask, Strategy,
        // ExpirationPeriod, FacePersistency.
        for (typ, val) in [
            (FACE_ID, self.face_id),
            (ORIGIN, self.origin),
            (COST, self.cost),
            (FLAGS, self.flags),
            (MASK, self.mask),
        ] {
            if let Some(x) = val {
                tlv::write_nni_tlv(&mut v, typ, x);
            }
        }
        if let Some(s) = &self.strategy {
            let mut n = Vec::new();
            s.encode(&mut n);
            tlv::write_tlv(&mut v, STRATEGY, &n);
        }
        for (typ, val) in [
            (EXPIRATION_PERIOD, self.expiration_ms),
            (FACE_PERSISTENCY, self.face_persistency),
        ] {
            if let Some(x) = val {
                tlv::write_nni_tlv(&mut v, typ, x);
            }
        }
        tlv::write_tlv(out, CONTROL_PARAMETERS, &v);
    }
}

/// A parsed command: scope, module, verb and parameters.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Command {
    /// `true` for `/localhost`, `false` for `/localhop`.
    pub localhost: bool,
    /// Module (`rib`, ...).
    pub module: Vec<u8>,
    /// Verb (`register`, ...).
    pub verb: Vec<u8>,
    /// The parameters.
    pub params: ControlParameters,
}

/// Whether `name` is under `/localhost/nfd` or `/localhop/nfd`.
pub fn is_management(name: &Name) -> bool {
    is_management_name(name.as_name_ref())
}

/// [`is_management`] on a borrowed name.
pub fn is_management_name(name: NameRef<'_>) -> bool {
    let mut c = name.components();
    let scope = c.next().map(|c| c.value());
    matches!(scope, Some(b"localhost") | Some(b"localhop"))
        && c.next().map(|c| c.value()) == Some(b"nfd")
}

/// Parse a command Interest; `Err((code, text))` is the ControlResponse
/// to send back.
pub fn parse_command(i: &Interest) -> Result<Command, (u64, String)> {
    let n = &i.name;
    let comp = |k: usize| n.get(k).map(|c| c.value().to_vec());
    let localhost = n.get(0).map(|c| c.value()) == Some(b"localhost");
    let (Some(module), Some(verb), Some(cp)) = (comp(2), comp(3), comp(4)) else {
        return Err((400, "malformed command: no ControlParameters".into()));
    };
    let v02 = n.len() >= 9
        && n.get(7).and_then(|c| c.value().first().copied()) == Some(SIGNATURE_INFO)
        && n.get(8).and_then(|c| c.value().first().copied()) == Some(SIGNATURE_VALUE)
        && n.get(7)
            .is_some_and(|c| signature_tlv_ok(c.value(), SIGNATURE_INFO))
        && n.get(8)
            .is_some_and(|c| signature_tlv_ok(c.value(), SIGNATURE_VALUE));
    let v03 = i.signature_info.is_some() && i.signature_value.is_some();
    if !v02 && !v03 {
        return Err((401, "unsigned command".into()));
    }
    let params = ControlParameters::decode(&cp)
        .map_err(|e| (400, format!("malformed ControlParameters: {e}")))?;
    Ok(Command {
        localhost,
        module,
        verb,
        params,
    })
}

fn signature_tlv_ok(value: &[u8], typ: u8) -> bool {
    tlv::read_single(value, u32::from(typ)).is_ok()
}

/// The Data answering `interest` with a ControlResponse.
pub fn response(
    interest: &Interest,
    code: u64,
    text: &str,
    body: Option<&ControlParameters>,
) -> Vec<u8> {
    let mut v = Vec::new();
    tlv::write_nni_tlv(&mut v, STATUS_CODE, code);
    tlv::write_tlv(&mut v, STATUS_TEXT, text.as_bytes());
    if let Some(b) = body {
        b.encode(&mut v);
    }
    let mut content = Vec::new();
    tlv::write_tlv(&mut content, CONTROL_RESPONSE, &v);
    let mut d = Data::new(interest.name.clone(), content);
    d.sign_digest_sha256();
    d.to_wire()
}

/// Decode a ControlResponse (status code, text, body): for tests and tools.
pub fn decode_response(content: &[u8]) -> Result<(u64, String, Option<ControlParameters>), String> {
    let e = tlv::read_single(content, CONTROL_RESPONSE).map_err(|e| e.to_string())?;
    let mut r: TlvReader<'_> = e.reader();
    let (mut code, mut text, mut body) = (None, String::new(), None);
    while !r.is_empty() {
        let f = r.read().map_err(|e| e.to_string())?;
        match f.typ {
            STATUS_CODE => code = Some(f.nni().map_err(|e| e.to_string())?),
            STATUS_TEXT => text = String::from_utf8_lossy(f.value).into_owned(),
            CONTROL_PARAMETERS => body = Some(ControlParameters::decode(f.tlv)?),
            _ => {}
        }
    }
    Ok((code.ok_or("no StatusCode")?, text, body))
}

/// The name of a signed command Interest as python-ndn 0.5 and NFD's
/// `nfdc` send it (format 0.2): `/localhost/nfd/<module>/<verb>/
/// <ControlParameters>/<timestamp>/<nonce>/<SignatureInfo>/<SignatureValue>`,
/// signed DigestSha256 over the components before SignatureValue.
pub fn command_name(
    module: &str,
    verb: &str,
    params: &ControlParameters,
    timestamp_ms: u64,
    nonce: u64,
) -> Name {
    use nexthop_wire::ndn::NameComponent;
    use sha2::{Digest, Sha256};
    let mut n = Name::from_components(
        [
            b"localhost".as_slice(),
            b"nfd",
            module.as_bytes(),
            verb.as_bytes(),
        ]
        .into_iter()
        .map(NameComponent::generic),
    );
    let mut cp = Vec::new();
    params.encode(&mut cp);
    n.push(&NameComponent::generic(cp));
    n.push(&NameComponent::generic(timestamp_ms.to_be_bytes().to_vec()));
    n.push(&NameComponent::generic(nonce.to_be_bytes().to_vec()));
    let mut si = Vec::new();
    // SignatureInfo { SignatureType DigestSha256 (0) }.
    tlv::write_tlv(&mut si, u32::from(SIGNATURE_INFO), &[0x1b, 0x01, 0x00]);
    n.push(&NameComponent::generic(si));
    let digest: [u8; 32] = Sha256::digest(n.value()).into();
    let mut sv = Vec::new();
    tlv::write_tlv(&mut sv, u32::from(SIGNATURE_VALUE), &digest);
    n.push(&NameComponent::generic(sv));
    n
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn management_scope_is_the_first_two_components() {
        for (uri, want) in [
            ("/localhost/nfd/rib/register", true),
            ("/localhop/nfd/rib/register", true),
            ("/localhost/nfd", true),
            ("/localhost", false),
            ("/localhost/nfdx/rib", false),
            ("/a/localhost/nfd", false),
            ("/", false),
            ("/nexthop/bench/1/2", false),
        ] {
            let n = Name::from_uri(uri).unwrap();
            assert_eq!(is_management(&n), want, "{uri}");
            assert_eq!(is_management_name(n.as_name_ref()), want, "{uri}");
        }
    }
}
