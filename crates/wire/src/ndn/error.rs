//! Errors of the NDN codec.

use thiserror::Error;

/// Why bytes could not be decoded as an NDN TLV structure.
///
/// Offsets (`at`) count bytes from the start of the buffer handed to the
/// decoder that failed; nested decoders shift them so that they count from
/// the start of the outermost buffer where that is cheap to know, otherwise
/// from the start of the enclosing TLV-VALUE.
#[derive(Debug, Error, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum NdnError {
    /// The buffer ends inside a TLV-TYPE or TLV-LENGTH number.
    #[error("truncated: needed {needed} bytes, got {got}")]
    Truncated {
        /// Bytes the field needs, from the start of the buffer.
        needed: usize,
        /// Bytes there are.
        got: usize,
    },
    /// A TLV-LENGTH promises more bytes than the enclosing buffer holds.
    #[error("TLV-LENGTH {length} at byte {at} exceeds the {available} bytes left")]
    LengthExceedsBuffer {
        /// Offset of the element's TLV-TYPE.
        at: usize,
        /// The TLV-LENGTH read.
        length: u64,
        /// Bytes left after the TLV-LENGTH field.
        available: usize,
    },
    /// A VAR-NUMBER used a longer encoding than its value needs (for
    /// example `FD 00 05` for 5); see the module docs for why this is an
    /// error.
    #[error("VAR-NUMBER at byte {at} is not in its shortest encoding")]
    NonMinimalVarNumber {
        /// Offset of the VAR-NUMBER's first byte.
        at: usize,
    },
    /// TLV-TYPE 0, or one above 2^32 - 1: reserved as invalid by the spec.
    #[error("invalid TLV-TYPE {typ} at byte {at}")]
    InvalidType {
        /// Offset of the element.
        at: usize,
        /// The TLV-TYPE read.
        typ: u64,
    },
    /// Bytes are left after the element (or list of elements) that the
    /// buffer should hold exactly.
    #[error("{extra} bytes of trailing data at byte {at}")]
    TrailingData {
        /// Offset of the first byte left over.
        at: usize,
        /// How many bytes are left over.
        extra: usize,
    },
    /// The outermost element is not of the expected TLV-TYPE.
    #[error("expected TLV-TYPE {expected}, found {found}")]
    UnexpectedType {
        /// The TLV-TYPE wanted.
        expected: u32,
        /// The TLV-TYPE found.
        found: u32,
    },
    /// An element whose TLV-TYPE the decoder does not know and that is
    /// critical (odd, or at most 31; for NDNLPv2 headers: outside
    /// 800..=959 or low two bits not 00) so it cannot be skipped.
    #[error("unknown critical TLV-TYPE {typ} in {context}")]
    UnknownCritical {
        /// The TLV-TYPE.
        typ: u32,
        /// The element it was found in (`"Interest"`, `"MetaInfo"`, ...).
        context: &'static str,
    },
    /// A known element appears out of the order the spec fixes, or twice.
    #[error("TLV-TYPE {typ} out of order or repeated in {context}")]
    OutOfOrder {
        /// The TLV-TYPE.
        typ: u32,
        /// The enclosing element.
        context: &'static str,
    },
    /// A required element is absent.
    #[error("{context} lacks its {field}")]
    Missing {
        /// The enclosing element.
        context: &'static str,
        /// The missing element.
        field: &'static str,
    },
    /// A field holds a value the format does not allow; the text names the
    /// element and the rule.
    #[error("malformed: {0}")]
    Malformed(&'static str),
}

/// Why a text string could not be parsed as an NDN URI name.
#[derive(Debug, Error, Clone, PartialEq, Eq, Hash)]
#[error("name URI: at byte {at}: {kind}")]
pub struct ParseNameError {
    /// Byte offset into the string where the problem starts.
    pub at: usize,
    /// What is wrong.
    pub kind: ParseNameErrorKind,
}

/// What is wrong with a name URI.
#[derive(Debug, Error, Clone, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum ParseNameErrorKind {
    /// `%` not followed by two hex digits.
    #[error("bad percent-escape (need %XX with two hex digits)")]
    BadPercentEscape,
    /// A component `.` or `..` (relative-path segments; a component made of
    /// periods is written with three extra periods).
    #[error("component `.` or `..` is not allowed (write the value with three extra periods)")]
    DotComponent,
    /// Two slashes in a row (a zero-length component is written `...`).
    #[error("empty component between slashes (a zero-length component is written `...`)")]
    EmptyComponent,
    /// `TYPE=` with a TYPE that is neither a number in 1..=65535 nor a
    /// known alias.
    #[error("unknown component type `{0}`")]
    UnknownType(String),
    /// The number after `seg=`, `off=`, `v=`, `t=` or `seq=` is not a
    /// decimal u64.
    #[error("bad number `{0}`")]
    BadNumber(String),
    /// A digest component whose value is not 32 bytes (64 hex digits for
    /// `sha256digest=`/`params-sha256=`).
    #[error("digest component must hold 32 bytes")]
    BadDigest,
    /// The URI's scheme is not `ndn`.
    #[error("scheme is not ndn:")]
    BadScheme,
    /// The name is too long to encode (component or name over 2^32 - 1 bytes).
    #[error("name too long")]
    TooLong,
}
