//! A group's blocked Bloom filter as lookups see it ([`BloomBits`]): bits
//! only, all `k` bits of a key in one 64-byte block; the counters that
//! let the control part delete live in [`super::BloomfwdControl`].

use nexthop_mem::HugeBox;

use super::prefetch;

/// Bits per filter block: one 64-byte cache line.
pub(super) const BLOCK_BITS: u32 = 512;

/// One cache line of filter bits.
#[derive(Clone, Copy, Debug, Default)]
#[repr(C, align(64))]
struct Block([u64; 8]);

const _: () = assert!(std::mem::size_of::<Block>() == 64);

/// The bit vector of a (counting) Bloom filter: the part lookups read.
///
/// The filter is *blocked*: `h1` picks one 64-byte block and all `k` bits
/// of a key lie inside it, at `(h1 + i*h2) mod 512` (double hashing within
/// the block; `h2` is odd, so the `k <= 16` positions are distinct). A
/// query therefore reads one cache line whatever `k` is.
#[derive(Clone, Debug)]
pub struct BloomBits {
    blocks: HugeBox<Block>,
    pub(super) m: u32,
    pub(super) k: u8,
}

impl BloomBits {
    /// At least `m` bits (rounded up to whole blocks), `k` hashes (1..=16).
    pub(super) fn new(m: u32, k: u8) -> Self {
        let nb = m.div_ceil(BLOCK_BITS).max(1);
        BloomBits {
            blocks: HugeBox::new(nb as usize, Block::default()),
            m: nb * BLOCK_BITS,
            k: k.clamp(1, 16),
        }
    }

    /// Size for `n` keys at false-positive target `f`:
    /// `m = n lg(1/f) / ln 2`, `k = round((m/n) ln 2) = round(lg(1/f))`.
    pub(super) fn sized(n: usize, f: f64) -> Self {
        let lg = (1.0 / f).log2();
        let m = ((n.max(1) as f64) * lg / std::f64::consts::LN_2).ceil();
        let k = lg.round().clamp(1.0, 16.0) as u8;
        BloomBits::new(m.min(u32::MAX as f64 / 2.0) as u32, k)
    }

    /// The block of a key.
    #[inline(always)]
    pub(super) fn block(&self, h1: u32) -> u32 {
        reduce(h1, self.m / BLOCK_BITS)
    }

    /// Global index of bit `i` of a key.
    #[inline(always)]
    pub(super) fn index(&self, h1: u32, h2: u32, i: u8) -> u32 {
        self.block(h1) * BLOCK_BITS
            + (h1.wrapping_add((i as u32).wrapping_mul(h2)) & (BLOCK_BITS - 1))
    }

    /// Whether all `k` bits of the key are set (reads one cache line).
    #[inline(always)]
    pub fn contains(&self, h1: u32, h2: u32) -> bool {
        let Some(b) = self.blocks.get(self.block(h1) as usize) else {
            return false;
        };
        // Stop at the first clear bit: a key not in the set (most tests:
        // a lookup probes the longer groups of its mask first) reads about
        // two bits instead of `k` (7 at IPv6's 1% target). Bit `p mod 512`
        // is bit `p mod 64` of word `(p / 64) mod 8` (the shift takes its
        // count mod 64, as x86's does).
        let mut p = h1;
        let mut left = self.k;
        while left != 0 {
            if b.0[((p >> 6) & 7) as usize].wrapping_shr(p) & 1 == 0 {
                return false;
            }
            p = p.wrapping_add(h2);
            left -= 1;
        }
        true
    }

    /// [`Self::contains`] with the `k <= 8` bits tested at once, branch
    /// free: the bit positions `h1 + i*h2` in eight 64-bit lanes, each
    /// lane's word of the block picked by a permute and shifted down to
    /// its bit. Same answer as `contains` (tested); `k > 8` is not
    /// handled.
    ///
    /// # Safety
    /// The CPU must support avx512f (its callers are compiled for it, so
    /// this inlines into them).
    #[cfg(target_arch = "x86_64")]
    #[inline(always)]
    pub(super) unsafe fn contains_avx512(&self, h1: u32, h2: u32) -> bool {
        use std::arch::x86_64::*;
        let Some(b) = self.blocks.get(self.block(h1) as usize) else {
            return false;
        };
        // SAFETY: (1) avx512f: the caller's contract. (2) `b` is a
        // 64-byte-aligned `Block` of 64 bytes (`repr(C, align(64))`), the
        // one read `_mm512_load_si512` does.
        unsafe {
            let words = _mm512_load_si512(b.0.as_ptr() as *const __m512i);
            let i = _mm512_set_epi64(7, 6, 5, 4, 3, 2, 1, 0);
            let pos = _mm512_add_epi64(
                _mm512_set1_epi64(h1 as i64),
                _mm512_mul_epu32(i, _mm512_set1_epi64(h2 as i64)),
            );
            // The permute reads the low 3 bits of each index: (pos / 64) mod 8.
            let w = _mm512_permutexvar_epi64(_mm512_srli_epi64::<6>(pos), words);
            let bit = _mm512_srlv_epi64(w, _mm512_and_si512(pos, _mm512_set1_epi64(63)));
            let set = _mm512_test_epi64_mask(bit, _mm512_set1_epi64(1));
            let want = (1u32 << self.k.min(8)) - 1;
            set as u32 & want == want
        }
    }

    #[inline(always)]
    pub(super) fn prefetch(&self, h1: u32) {
        prefetch(self.block_addr(h1) as *const u8);
    }

    /// The address of the block of a key.
    #[inline(always)]
    pub(super) fn block_addr(&self, h1: u32) -> usize {
        self.blocks.as_ptr().wrapping_add(self.block(h1) as usize) as usize
    }

    pub(super) fn set(&mut self, b: u32, v: bool) {
        let w = &mut self.blocks[(b / BLOCK_BITS) as usize].0[((b % BLOCK_BITS) >> 6) as usize];
        if v {
            *w |= 1 << (b & 63);
        } else {
            *w &= !(1 << (b & 63));
        }
    }

    /// Bits in the vector.
    pub fn bits(&self) -> u32 {
        self.m
    }
    /// Hash functions per key.
    pub fn hashes(&self) -> u8 {
        self.k
    }
    /// Bytes of the vector.
    pub(super) fn bytes(&self) -> usize {
        std::mem::size_of_val(&*self.blocks)
    }
}

/// Map a uniform 32-bit word onto `0..m` (multiply-shift).
#[inline(always)]
fn reduce(x: u32, m: u32) -> u32 {
    ((x as u64 * m as u64) >> 32) as u32
}
