//! Error types.

use thiserror::Error;

/// A buffer for a file or a snapshot that could not be allocated: the
/// structure is unchanged and nothing was written.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[error("{what} needs {bytes} bytes, which could not be allocated")]
pub struct AllocError {
    /// What the buffer was for.
    pub what: &'static str,
    /// Its size.
    pub bytes: usize,
}

/// An empty vector with room for `bytes`, or [`AllocError`] where the
/// allocator refuses (over the address-space limit, past what the kernel
/// will commit) instead of the abort a plain `Vec::with_capacity` gives.
pub(crate) fn try_buffer(what: &'static str, bytes: usize) -> Result<Vec<u8>, AllocError> {
    let mut v = Vec::new();
    v.try_reserve_exact(bytes)
        .map_err(|_| AllocError { what, bytes })?;
    Ok(v)
}

/// A configuration value out of range.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum ConfigError {
    /// `value_bits` outside 1..=64.
    #[error("value bits must be in 1..=64, got {0}")]
    ValueBits(u8),
    /// `value_bits + check_bits > 64`.
    #[error("value bits ({value_bits}) + check bits ({check_bits}) must be <= 64")]
    CheckBits {
        /// `l`
        value_bits: u8,
        /// `r`
        check_bits: u8,
    },
    /// `columns` outside 1..=4096.
    #[error("columns must be in 1..=4096, got {0}")]
    Columns(usize),
    /// Stash larger than the data plane carries.
    #[error("stash capacity must be <= {max}, got {0}", max = crate::config::MAX_STASH)]
    StashCapacity(usize),
    /// A sizing name that is not `pow2` or `tight`.
    #[error("unknown sizing {0:?} (expected pow2 or tight)")]
    UnknownSizing(String),
    /// More keys than 32-bit array indexes can address.
    #[error("capacity {0} is too large (at most 2^31 keys)")]
    Capacity(usize),
    /// The arrays for this capacity could not be allocated.
    #[error("capacity {capacity} needs {bytes} bytes, which could not be allocated")]
    OutOfMemory {
        /// Keys asked for.
        capacity: usize,
        /// Bytes the arrays need.
        bytes: u128,
    },
}

/// Why a control-plane operation was refused. The structure is unchanged.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum UpdateError {
    /// The key is already present (insert) or present twice (build).
    #[error("duplicate key {0}")]
    DuplicateKey(String),
    /// The key is not present (remove, alter).
    #[error("key not found: {0}")]
    NotFound(String),
    /// A value has bits outside `value_bits`.
    #[error("value {value:#x} does not fit in {bits} bits")]
    ValueTooWide {
        /// The value given.
        value: u64,
        /// `l`
        bits: u8,
    },
    /// A column index or the number of column values is wrong.
    #[error("expected {expected} column values / column < {expected}, got {got}")]
    Columns {
        /// Number of columns of the structure.
        expected: usize,
        /// What was given.
        got: usize,
    },
    /// No seed in the retry budget gave a graph whose cycles fit the stash.
    #[error("could not build an acyclic graph after {0} seeds (is the stash too small?)")]
    NoSeedWorks(usize),
    /// The configuration is invalid.
    #[error(transparent)]
    Config(#[from] ConfigError),
}

/// Why a snapshot or delta could not be decoded or applied. Nothing was changed.
#[derive(Debug, Error, Clone, PartialEq, Eq)]
#[non_exhaustive]
pub enum FormatError {
    /// Fewer bytes than the format requires.
    #[error("truncated: need {needed} bytes, got {got}")]
    Truncated {
        /// Bytes required.
        needed: usize,
        /// Bytes present.
        got: usize,
    },
    /// Not a nexthop file of this kind.
    #[error("bad magic: not a nexthop {0}")]
    BadMagic(&'static str),
    /// A version this build does not read.
    #[error("unsupported format version {got} (this build reads {supported})")]
    Version {
        /// Version in the data.
        got: u32,
        /// Version this build reads.
        supported: u32,
    },
    /// Checksum mismatch: the data is corrupted.
    #[error("checksum mismatch in {0}: data is corrupted")]
    Checksum(&'static str),
    /// A field holds a value the format does not allow.
    #[error("malformed: {0}")]
    Malformed(&'static str),
    /// Bytes after the end of the encoded object.
    #[error("{0} trailing bytes after the end")]
    TrailingData(usize),
    /// A slot index past the array.
    #[error("slot index {index} out of range for array of {len}")]
    IndexOutOfRange {
        /// The index in the delta.
        index: u64,
        /// The array length.
        len: u32,
    },
    /// A delta computed for another generation (seeds/sizes) of the structure.
    #[error("delta is for generation {delta}, structure is at generation {current}")]
    Generation {
        /// Generation of the delta.
        delta: u64,
        /// Generation of the structure.
        current: u64,
    },
    /// The stash would overflow.
    #[error("stash full ({0} entries)")]
    StashFull(usize),
    /// The buffer is not aligned for zero-copy use.
    #[error("buffer not aligned to {0} bytes for zero-copy loading")]
    Misaligned(usize),
    /// I/O error reading or mapping a file.
    #[error("i/o error: {0}")]
    Io(String),
}

impl From<nexthop_wire::cursor::CursorError> for FormatError {
    fn from(e: nexthop_wire::cursor::CursorError) -> Self {
        use nexthop_wire::cursor::CursorError;
        match e {
            CursorError::Truncated { needed, got } => FormatError::Truncated { needed, got },
            CursorError::TrailingData(n) => FormatError::TrailingData(n),
            CursorError::Malformed(what) => FormatError::Malformed(what),
            _ => FormatError::Malformed("unreadable field"),
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_buffer_past_what_can_be_allocated_is_an_error_naming_it() {
        let e = try_buffer("snapshot", usize::MAX / 2).unwrap_err();
        assert_eq!(e.bytes, usize::MAX / 2);
        assert!(e.to_string().starts_with("snapshot needs "), "{e}");
        assert!(try_buffer("snapshot", 4096).unwrap().capacity() >= 4096);
    }
}
