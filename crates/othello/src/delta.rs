//! Deltas: the slot writes a control operation makes, and their wire encoding.
//!
//! A control operation on an [`Othello`](crate::Othello) changes a handful of
//! slots of the data-plane arrays (an insert usually one, a delete none). The
//! control plane ships exactly those writes to the query structures as a
//! [`Delta`]; when an operation forces a rebuild with new seeds it ships a
//! whole snapshot instead ([`Delta::Snapshot`]).
//!
//! # Wire encoding (little-endian, version 1)
//!
//! ```text
//! delta    = magic "NHD" version:u8(=1) kind:u8 body checksum:u32
//! kind 1   = ops:      generation:u64 count:varint op{count}
//! kind 2   = snapshot: len:varint <snapshot file bytes, see snapshot.rs>
//! op       = 0 index:varint word:varint          ; A[index] = word
//!          | 1 index:varint word:varint          ; B[index] = word
//!          | 2 fp_lo:u64 fp_hi:u64 word:varint   ; stash[fp] = word
//!          | 3 fp_lo:u64 fp_hi:u64               ; remove stash[fp]
//! checksum = low 32 bits of XXH3-64(seed 0) over everything before it
//! varint   = unsigned LEB128, at most 10 bytes, no overlong final 0 byte
//! ```
//!
//! A typical insert (one slot write) encodes in at most 25 bytes. Decoding checks structure and
//! checksum; [`Query::apply`](crate::Query::apply) then checks every index
//! against the arrays and the generation before writing anything.

use crate::error::FormatError;
use nexthop_wire::cursor::{put_varint, Reader};

/// One slot write.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Op {
    /// `A[index] = word`
    SetA {
        /// Slot index in array A.
        index: u32,
        /// The full slot word (value and check field).
        word: u64,
    },
    /// `B[index] = word`
    SetB {
        /// Slot index in array B.
        index: u32,
        /// The full slot word.
        word: u64,
    },
    /// Put or replace a stash entry for the key whose 128-bit hash is `fp`.
    StashPut {
        /// The key's 128-bit hash under the current seed.
        fp: u128,
        /// The value (the check field is not used for stashed keys).
        word: u64,
    },
    /// Remove the stash entry for `fp`.
    StashDel {
        /// The key's 128-bit hash under the current seed.
        fp: u128,
    },
}

/// What a query structure must do to follow one control operation.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Delta {
    /// Apply these writes to a structure at `generation`.
    Ops {
        /// The generation (seed and sizes) the writes are for.
        generation: u64,
        /// The writes, in order.
        ops: Vec<Op>,
    },
    /// Replace the whole structure with this snapshot (seeds or sizes changed).
    Snapshot(Vec<u8>),
}

const MAGIC: &[u8; 3] = b"NHD";
const VERSION: u8 = 1;
const KIND_OPS: u8 = 1;
const KIND_SNAPSHOT: u8 = 2;

impl Delta {
    /// Number of slot writes (a snapshot counts as 0 here).
    pub fn write_count(&self) -> usize {
        match self {
            Delta::Ops { ops, .. } => ops.len(),
            Delta::Snapshot(_) => 0,
        }
    }

    /// Encode to the documented wire form.
    pub fn encode(&self) -> Vec<u8> {
        let mut out = Vec::with_capacity(32);
        out.extend_from_slice(MAGIC);
        out.push(VERSION);
        match self {
            Delta::Ops { generation, ops } => {
                out.push(KIND_OPS);
                out.extend_from_slice(&generation.to_le_bytes());
                put_varint(&mut out, ops.len() as u64);
                for op in ops {
                    match *op {
                        Op::SetA { index, word } => {
                            out.push(0);
                            put_varint(&mut out, index as u64);
                            put_varint(&mut out, word);
                        }
                        Op::SetB { index, word } => {
                            out.push(1);
                            put_varint(&mut out, index as u64);
                            put_varint(&mut out, word);
                        }
                        Op::StashPut { fp, word } => {
                            out.push(2);
                            out.extend_from_slice(&fp.to_le_bytes());
                            put_varint(&mut out, word);
                        }
                        Op::StashDel { fp } => {
                            out.push(3);
                            out.extend_from_slice(&fp.to_le_bytes());
                        }
                    }
                }
            }
            Delta::Snapshot(bytes) => {
                out.push(KIND_SNAPSHOT);
                put_varint(&mut out, bytes.len() as u64);
                out.extend_from_slice(bytes);
            }
        }
        let sum = nexthop_hash::hash64(&out, 0) as u32;
        out.extend_from_slice(&sum.to_le_bytes());
        out
    }

    /// Decode the wire form. Never panics; rejects truncation, bad magic,
    /// unknown versions and kinds, corrupted checksums and trailing bytes.
    pub fn decode(bytes: &[u8]) -> Result<Delta, FormatError> {
        if bytes.len() < MAGIC.len() + 2 + 4 {
            return Err(FormatError::Truncated {
                needed: MAGIC.len() + 2 + 4,
                got: bytes.len(),
            });
        }
        if &bytes[..3] != MAGIC {
            return Err(FormatError::BadMagic("delta"));
        }
        if bytes[3] != VERSION {
            return Err(FormatError::Version {
                got: bytes[3] as u32,
                supported: VERSION as u32,
            });
        }
        let (body, sum) = bytes.split_at(bytes.len() - 4);
        let want = u32::from_le_bytes([sum[0], sum[1], sum[2], sum[3]]);
        if nexthop_hash::hash64(body, 0) as u32 != want {
            return Err(FormatError::Checksum("delta"));
        }
        let mut r = Reader::new(body);
        r.take(5)?;
        let delta = match body[4] {
            KIND_OPS => {
                let generation = r.u64()?;
                let count = r.varint()?;
                // Each op takes at least 3 bytes: bound the allocation by the input.
                if count > (r.remaining() / 3) as u64 {
                    return Err(FormatError::Malformed("op count larger than the data"));
                }
                let mut ops = Vec::with_capacity(count as usize);
                for _ in 0..count {
                    let op = match r.u8()? {
                        tag @ (0 | 1) => {
                            let index = r.varint()?;
                            let index = u32::try_from(index)
                                .map_err(|_| FormatError::Malformed("slot index above 2^32"))?;
                            let word = r.varint()?;
                            if tag == 0 {
                                Op::SetA { index, word }
                            } else {
                                Op::SetB { index, word }
                            }
                        }
                        2 => {
                            let fp = r.u128()?;
                            let word = r.varint()?;
                            Op::StashPut { fp, word }
                        }
                        3 => Op::StashDel { fp: r.u128()? },
                        _ => return Err(FormatError::Malformed("unknown op tag")),
                    };
                    ops.push(op);
                }
                Delta::Ops { generation, ops }
            }
            KIND_SNAPSHOT => {
                let len = r.varint()?;
                let len = r.count(len, 1)?;
                Delta::Snapshot(r.take(len)?.to_vec())
            }
            _ => return Err(FormatError::Malformed("unknown delta kind")),
        };
        r.finish()?;
        Ok(delta)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn sample() -> Delta {
        Delta::Ops {
            generation: 7,
            ops: vec![
                Op::SetA {
                    index: 3,
                    word: 0x55,
                },
                Op::SetB {
                    index: 1 << 30,
                    word: u64::MAX,
                },
                Op::StashPut {
                    fp: u128::MAX - 5,
                    word: 9,
                },
                Op::StashDel { fp: 12345 },
            ],
        }
    }

    #[test]
    fn ops_round_trip() {
        let d = sample();
        assert_eq!(Delta::decode(&d.encode()), Ok(d));
        let empty = Delta::Ops {
            generation: 0,
            ops: vec![],
        };
        assert_eq!(Delta::decode(&empty.encode()), Ok(empty));
    }

    #[test]
    fn snapshot_round_trip() {
        let d = Delta::Snapshot(vec![1, 2, 3, 4, 5]);
        assert_eq!(Delta::decode(&d.encode()), Ok(d));
    }

    #[test]
    fn single_insert_encodes_compactly() {
        let d = Delta::Ops {
            generation: 1,
            ops: vec![Op::SetA {
                index: 5_000_000,
                word: 200,
            }],
        };
        assert!(d.encode().len() <= 25, "{}", d.encode().len());
    }

    #[test]
    fn every_truncation_and_bit_flip_is_rejected() {
        let bytes = sample().encode();
        for n in 0..bytes.len() {
            assert!(Delta::decode(&bytes[..n]).is_err(), "prefix {n} accepted");
        }
        for i in 0..bytes.len() {
            for bit in 0..8 {
                let mut b = bytes.clone();
                b[i] ^= 1 << bit;
                assert!(Delta::decode(&b).is_err(), "flip {i}:{bit} accepted");
            }
        }
    }

    #[test]
    fn trailing_bytes_are_rejected() {
        let mut bytes = sample().encode();
        let len = bytes.len();
        bytes.truncate(len - 4);
        bytes.push(0);
        let sum = nexthop_hash::hash64(&bytes, 0) as u32;
        bytes.extend_from_slice(&sum.to_le_bytes());
        assert_eq!(Delta::decode(&bytes), Err(FormatError::TrailingData(1)));
    }

    #[test]
    fn overlong_varint_in_a_delta_is_malformed() {
        let mut body = Vec::from(&MAGIC[..]);
        body.push(VERSION);
        body.push(KIND_SNAPSHOT);
        body.extend_from_slice(&[0x80, 0x00]);
        let sum = nexthop_hash::hash64(&body, 0) as u32;
        body.extend_from_slice(&sum.to_le_bytes());
        assert_eq!(
            Delta::decode(&body),
            Err(FormatError::Malformed("overlong varint"))
        );
    }
}
