//! NDN names and packets (`nexthop_wire::ndn`): URI parse/print and the
//! Interest, Data and LpPacket (Nack) codec. Each class wraps the crate's
//! struct, so decoding and re-encoding keeps every field the codec keeps.

use nexthop_wire::ndn::{Data, Interest, LpPacket, Nack, NackReason, Name, NdnError};
use pyo3::exceptions::PyValueError;
use pyo3::prelude::*;
use pyo3::types::PyBytes;

fn name_of(uri: &str) -> PyResult<Name> {
    Name::from_uri(uri).map_err(|e| PyValueError::new_err(format!("invalid name '{uri}': {e}")))
}

fn wire_err(what: &str, e: NdnError) -> PyErr {
    PyValueError::new_err(format!("invalid {what}: {e}"))
}

/// Parse an NDN URI and print it in canonical form (`ndn:/a/%41` -> `/a/A`).
/// Raises ValueError for a malformed name.
#[pyfunction]
pub fn canonical_uri(uri: &str) -> PyResult<String> {
    Ok(name_of(uri)?.to_string())
}

/// The Name TLV (type 7) of an NDN URI.
#[pyfunction]
pub fn name_to_wire<'py>(py: Python<'py>, uri: &str) -> PyResult<Bound<'py, PyBytes>> {
    Ok(PyBytes::new(py, &name_of(uri)?.to_wire()))
}

/// The canonical URI of a Name TLV (type 7). Raises ValueError for
/// malformed TLV.
#[pyfunction]
pub fn name_from_wire(wire: &[u8]) -> PyResult<String> {
    Ok(Name::from_wire(wire)
        .map_err(|e| wire_err("Name", e))?
        .to_string())
}

/// An NDN Interest (packet format v0.3).
#[pyclass(name = "Interest", module = "nexthop")]
#[derive(Clone)]
pub struct NdnInterest {
    i: Interest,
}

#[pymethods]
impl NdnInterest {
    /// An Interest for `name` (URI) with the given fields.
    #[new]
    #[pyo3(signature = (name, can_be_prefix = false, must_be_fresh = false, nonce = None, lifetime_ms = None, hop_limit = None, app_parameters = None, forwarding_hint = Vec::new()))]
    #[allow(clippy::too_many_arguments)]
    fn new(
        name: &str,
        can_be_prefix: bool,
        must_be_fresh: bool,
        nonce: Option<u32>,
        lifetime_ms: Option<u64>,
        hop_limit: Option<u8>,
        app_parameters: Option<Vec<u8>>,
        forwarding_hint: Vec<String>,
    ) -> PyResult<Self> {
        let mut i = Interest::new(name_of(name)?);
        i.can_be_prefix = can_be_prefix;
        i.must_be_fresh = must_be_fresh;
        i.nonce = nonce;
        i.lifetime_ms = lifetime_ms;
        i.hop_limit = hop_limit;
        i.app_parameters = app_parameters;
        i.forwarding_hint = forwarding_hint
            .iter()
            .map(|u| name_of(u))
            .collect::<PyResult<_>>()?;
        Ok(NdnInterest { i })
    }

    /// Decode an Interest TLV. Raises ValueError for malformed input.
    #[staticmethod]
    fn decode(wire: &[u8]) -> PyResult<Self> {
        Ok(NdnInterest {
            i: Interest::decode(wire).map_err(|e| wire_err("Interest", e))?,
        })
    }

    /// The Interest TLV.
    fn encode<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.i.to_wire())
    }

    /// The name (canonical URI).
    #[getter]
    fn name(&self) -> String {
        self.i.name.to_string()
    }
    /// CanBePrefix.
    #[getter]
    fn can_be_prefix(&self) -> bool {
        self.i.can_be_prefix
    }
    /// MustBeFresh.
    #[getter]
    fn must_be_fresh(&self) -> bool {
        self.i.must_be_fresh
    }
    /// Nonce (None: absent).
    #[getter]
    fn nonce(&self) -> Option<u32> {
        self.i.nonce
    }
    /// InterestLifetime in ms (None: absent, the default 4000 ms).
    #[getter]
    fn lifetime_ms(&self) -> Option<u64> {
        self.i.lifetime_ms
    }
    /// HopLimit (None: absent).
    #[getter]
    fn hop_limit(&self) -> Option<u8> {
        self.i.hop_limit
    }
    /// ApplicationParameters (None: absent).
    #[getter]
    fn app_parameters<'py>(&self, py: Python<'py>) -> Option<Bound<'py, PyBytes>> {
        self.i.app_parameters.as_ref().map(|p| PyBytes::new(py, p))
    }
    /// ForwardingHint delegation names (URIs).
    #[getter]
    fn forwarding_hint(&self) -> Vec<String> {
        self.i
            .forwarding_hint
            .iter()
            .map(|n| n.to_string())
            .collect()
    }

    fn __repr__(&self) -> String {
        format!("<nexthop.Interest {}>", self.i.name)
    }

    fn __eq__(&self, other: &Self) -> bool {
        self.i == other.i
    }
}

/// An NDN Data packet (packet format v0.3). Decoded packets keep their
/// signature fields, so `decode(w).encode() == w` for well-formed `w`.
#[pyclass(name = "Data", module = "nexthop")]
#[derive(Clone)]
pub struct NdnData {
    d: Data,
}

#[pymethods]
impl NdnData {
    /// A Data packet for `name` (URI) with `content` (None: no Content
    /// element), optional ContentType and FreshnessPeriod, and a
    /// SignatureInfo of `signature_type` with `signature_value` (the caller
    /// signs; nothing is computed here).
    #[new]
    #[pyo3(signature = (name, content = None, content_type = None, freshness_period_ms = None, signature_type = 0, signature_value = Vec::new()))]
    fn new(
        name: &str,
        content: Option<Vec<u8>>,
        content_type: Option<u64>,
        freshness_period_ms: Option<u64>,
        signature_type: u64,
        signature_value: Vec<u8>,
    ) -> PyResult<Self> {
        let mut d = Data {
            name: name_of(name)?,
            content,
            ..Data::default()
        };
        d.meta_info.content_type = content_type;
        d.meta_info.freshness_period_ms = freshness_period_ms;
        d.signature_info.signature_type = signature_type;
        d.signature_value = signature_value;
        Ok(NdnData { d })
    }

    /// Decode a Data TLV. Raises ValueError for malformed input.
    #[staticmethod]
    fn decode(wire: &[u8]) -> PyResult<Self> {
        Ok(NdnData {
            d: Data::decode(wire).map_err(|e| wire_err("Data", e))?,
        })
    }

    /// The Data TLV.
    fn encode<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.d.to_wire())
    }

    /// The name (canonical URI).
    #[getter]
    fn name(&self) -> String {
        self.d.name.to_string()
    }
    /// Content (None: absent).
    #[getter]
    fn content<'py>(&self, py: Python<'py>) -> Option<Bound<'py, PyBytes>> {
        self.d.content.as_ref().map(|c| PyBytes::new(py, c))
    }
    /// ContentType (None: absent, BLOB).
    #[getter]
    fn content_type(&self) -> Option<u64> {
        self.d.meta_info.content_type
    }
    /// FreshnessPeriod in ms (None: absent).
    #[getter]
    fn freshness_period_ms(&self) -> Option<u64> {
        self.d.meta_info.freshness_period_ms
    }
    /// SignatureType.
    #[getter]
    fn signature_type(&self) -> u64 {
        self.d.signature_info.signature_type
    }
    /// SignatureValue.
    #[getter]
    fn signature_value<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.d.signature_value)
    }

    fn __repr__(&self) -> String {
        format!("<nexthop.Data {}>", self.d.name)
    }

    fn __eq__(&self, other: &Self) -> bool {
        self.d == other.d
    }
}

/// An NDNLPv2 LpPacket: a Fragment (an encoded Interest or Data) with
/// optional PitToken and Nack headers. Decoded packets keep every header
/// the codec knows.
#[pyclass(name = "LpPacket", module = "nexthop")]
#[derive(Clone)]
pub struct LpPacketPy {
    p: LpPacket,
}

#[pymethods]
impl LpPacketPy {
    /// An LpPacket carrying `fragment`, with an optional `pit_token` and,
    /// when `nack_reason` is given (0 for none, 50 congestion, 100
    /// duplicate, 150 no route), a Nack header.
    #[new]
    #[pyo3(signature = (fragment = None, pit_token = None, nack_reason = None))]
    fn new(
        fragment: Option<Vec<u8>>,
        pit_token: Option<Vec<u8>>,
        nack_reason: Option<u64>,
    ) -> PyResult<Self> {
        if pit_token
            .as_ref()
            .is_some_and(|t| t.is_empty() || t.len() > 32)
        {
            return Err(PyValueError::new_err("a PitToken is 1 to 32 bytes"));
        }
        let p = LpPacket {
            fragment,
            pit_token,
            nack: nack_reason.map(|r| Nack {
                reason: (r != 0).then(|| NackReason::from_code(r)),
            }),
            ..LpPacket::default()
        };
        Ok(LpPacketPy { p })
    }

    /// Decode an LpPacket TLV (type 100). Raises ValueError for malformed
    /// input.
    #[staticmethod]
    fn decode(wire: &[u8]) -> PyResult<Self> {
        Ok(LpPacketPy {
            p: LpPacket::decode(wire).map_err(|e| wire_err("LpPacket", e))?,
        })
    }

    /// The LpPacket TLV.
    fn encode<'py>(&self, py: Python<'py>) -> Bound<'py, PyBytes> {
        PyBytes::new(py, &self.p.to_wire())
    }

    /// The Fragment (None: an idle packet).
    #[getter]
    fn fragment<'py>(&self, py: Python<'py>) -> Option<Bound<'py, PyBytes>> {
        self.p.fragment.as_ref().map(|f| PyBytes::new(py, f))
    }
    /// The PitToken (None: absent).
    #[getter]
    fn pit_token<'py>(&self, py: Python<'py>) -> Option<Bound<'py, PyBytes>> {
        self.p.pit_token.as_ref().map(|t| PyBytes::new(py, t))
    }
    /// Whether a Nack header is present.
    #[getter]
    fn is_nack(&self) -> bool {
        self.p.nack.is_some()
    }
    /// The NackReason code (None: no Nack or no reason).
    #[getter]
    fn nack_reason(&self) -> Option<u64> {
        self.p.nack.and_then(|n| n.reason).map(NackReason::code)
    }

    fn __repr__(&self) -> String {
        format!(
            "<nexthop.LpPacket fragment {} bytes{}>",
            self.p.fragment.as_ref().map_or(0, Vec::len),
            if self.p.nack.is_some() { ", nack" } else { "" }
        )
    }

    fn __eq__(&self, other: &Self) -> bool {
        self.p == other.p
    }
}
