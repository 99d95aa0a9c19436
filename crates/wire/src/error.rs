//! The error type of every view in this crate.

use thiserror::Error;

/// Why bytes could not be viewed as a header.
///
/// Offsets in [`WireError::Truncated`] count from the start of the buffer
/// given to the view that failed; the helpers that walk several layers
/// ([`five_tuple`](crate::five_tuple)) shift them so that they count from
/// the start of the frame.
#[derive(Debug, Error, Clone, Copy, PartialEq, Eq, Hash)]
#[non_exhaustive]
pub enum WireError {
    /// The buffer ends before the header does.
    #[error("truncated: needed {needed} bytes, got {got}")]
    Truncated {
        /// Bytes the header needs, from the start of the buffer.
        needed: usize,
        /// Bytes there are.
        got: usize,
    },
    /// A field holds a value the format does not allow; the text names the
    /// layer and the field.
    #[error("malformed: {0}")]
    Malformed(&'static str),
    /// The bytes are well formed but of a kind the caller does not handle
    /// (an IPv6 frame given to the IPv4 [`five_tuple`](crate::five_tuple)).
    #[error("unsupported: {0}")]
    Unsupported(&'static str),
}

impl WireError {
    /// The same error with byte counts measured `by` bytes earlier (for an
    /// inner header that starts `by` bytes into an outer buffer).
    pub fn shifted(self, by: usize) -> WireError {
        match self {
            WireError::Truncated { needed, got } => WireError::Truncated {
                needed: needed.saturating_add(by),
                got: got.saturating_add(by),
            },
            other => other,
        }
    }

    /// Fail with [`WireError::Truncated`] unless `buf` holds `needed` bytes.
    #[inline(always)]
    pub(crate) fn need(buf: &[u8], needed: usize) -> Result<(), WireError> {
        if buf.len() < needed {
            Err(WireError::Truncated {
                needed,
                got: buf.len(),
            })
        } else {
            Ok(())
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn shifted_moves_truncation_offsets_but_not_malformed_reasons() {
        let t = WireError::Truncated { needed: 20, got: 7 };
        assert_eq!(
            t.shifted(14),
            WireError::Truncated {
                needed: 34,
                got: 21
            }
        );
        let m = WireError::Malformed("IPv4: version is not 4");
        assert_eq!(m.shifted(14), m);
    }

    #[test]
    fn errors_say_what_and_how_much() {
        let t = WireError::Truncated {
            needed: 18,
            got: 16,
        };
        assert_eq!(t.to_string(), "truncated: needed 18 bytes, got 16");
    }
}
