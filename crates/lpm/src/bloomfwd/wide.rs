//! IPv6 batched lookups in rounds whose hash step takes eight probes per
//! AVX-512 instruction ([`Bloomfwd::rounds_wide`]).
//!
//! [`Bloomfwd::rounds`] keeps each lane's state in per-lane arrays and
//! walks lists of lane indices: every probe of a round then costs ~75
//! scalar instructions to pick its group, shift its key out of the
//! address, hash it (`Mix64`), find its filter block and table line and
//! sort it into a list (`perf annotate` of commit `8f23879`'s rounds; docs/benchmarks.md, "Bloomfwd IPv6"). Here the lists carry
//! the probes' state themselves, packed (structure of arrays), so eight
//! consecutive probes load as vectors: the group is the mask's leading
//! bit (`vplzcntq`), the group's parameters come from 16-entry tables
//! (`vpermt2q`), the key is a 128-bit shift of two 64-bit halves, the hash
//! three `vpmullq`, and a probe joins the bucket list or the filter list
//! by a compress of each field (`vpcompressq`). Filter tests and bucket
//! compares stay scalar, one probe at a time.

use std::arch::x86_64::*;

use super::rounds::{push_if, RoundLanes, LANES};
use super::{prefetch, select, select_addr, Bloomfwd, Line, Line6};
use crate::addr::{NextHop, NO_ROUTE};
use crate::hash::HashKind;

/// Groups the tables of [`Params`] hold (two 8-lane vectors each).
pub(super) const WIDE_MAX_GROUPS: usize = 16;

/// Entries per list: every lane of a chunk at most once, plus a vector's
/// worth of room, since a vector store writes eight entries from the
/// list's end; a power of two so scalar writes index with `& (CAP - 1)`.
const CAP: usize = 2 * LANES;

const _: () = assert!(CAP.is_power_of_two() && CAP >= LANES + 8);

/// Probes to make: the lane, the groups its mask names still, its address.
#[repr(C, align(64))]
struct Probes {
    lane: [u32; CAP],
    mask: [u32; CAP],
    lo: [u64; CAP],
    hi: [u64; CAP],
}

impl Probes {
    fn new() -> Self {
        Probes {
            lane: [0; CAP],
            mask: [0; CAP],
            lo: [0; CAP],
            hi: [0; CAP],
        }
    }

    /// Append lane `lane` with groups `mask` at `*n` when `c` (see
    /// [`push_if`]).
    #[inline(always)]
    fn push_if(&mut self, n: &mut usize, lane: u32, mask: u32, a: u128, c: bool) {
        let t = *n & (CAP - 1);
        self.lane[t] = lane;
        self.mask[t] = mask;
        self.lo[t] = a as u64;
        self.hi[t] = (a >> 64) as u64;
        *n += c as usize;
    }
}

/// Hashed probes: the lane, the groups left after this one, the group and
/// its key; for the bucket list the home line's index (`a`) and address
/// (`addr`), for the filter list `h1` (`a`) and `h2` (`addr`).
#[repr(C, align(64))]
struct Hashed {
    lane: [u32; CAP],
    rest: [u32; CAP],
    group: [u32; CAP],
    a: [u32; CAP],
    addr: [u64; CAP],
    klo: [u64; CAP],
    khi: [u64; CAP],
}

impl Hashed {
    fn new() -> Self {
        Hashed {
            lane: [0; CAP],
            rest: [0; CAP],
            group: [0; CAP],
            a: [0; CAP],
            addr: [0; CAP],
            klo: [0; CAP],
            khi: [0; CAP],
        }
    }

    /// Append entry `t` of `from` at `*n` with line `b` at `addr` when `c`
    /// (see [`push_if`]).
    #[inline(always)]
    fn push_line_if(&mut self, n: &mut usize, from: &Hashed, t: usize, b: u32, addr: u64, c: bool) {
        let (i, t) = (*n & (CAP - 1), t & (CAP - 1));
        self.lane[i] = from.lane[t];
        self.rest[i] = from.rest[t];
        self.group[i] = from.group[t];
        self.a[i] = b;
        self.addr[i] = addr;
        self.klo[i] = from.klo[t];
        self.khi[i] = from.khi[t];
        *n += c as usize;
    }
}

/// Per-group parameters as 16-entry tables (groups past the last repeat
/// group 0's, so every entry names memory of a real group).
#[repr(C, align(64))]
struct Params {
    /// `128 - level`, with bit 8 set where the group's filter is skipped
    /// whether or not it is the last group named (a small table, see
    /// `Bloomfwd::skips_filter`).
    shift: [u64; WIDE_MAX_GROUPS],
    /// The table's line mask, and the filter's block count in the high
    /// half.
    sizes: [u64; WIDE_MAX_GROUPS],
    /// Addresses of the table's first line and the filter's first block.
    lines: [u64; WIDE_MAX_GROUPS],
    blocks: [u64; WIDE_MAX_GROUPS],
}

/// Lanes `[0, n)` of 8 as a mask.
#[inline(always)]
fn first(n: usize) -> u8 {
    (((1u32 << n.min(8)) - 1) & 0xff) as u8
}

impl Bloomfwd<u128> {
    /// Whether [`Self::rounds_wide`] can take this table on this CPU: the
    /// filter hash is `Mix64` and the table hash reuses it, at most
    /// [`WIDE_MAX_GROUPS`] groups, every filter `k <= 8`, and the CPU has
    /// avx512f, avx512dq (`vpmullq`) and avx512cd (`vplzcntq`).
    pub(super) fn wide_ok(&self) -> bool {
        self.filter_hash == HashKind::Mix64
            && self.reuse
            && !self.groups.is_empty()
            && self.groups.len() <= WIDE_MAX_GROUPS
            && self.groups.iter().all(|g| g.filter.k <= 8)
            && std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512dq")
            && std::arch::is_x86_feature_detected!("avx512cd")
    }

    fn params(&self) -> Params {
        let mut p = Params {
            shift: [0; WIDE_MAX_GROUPS],
            sizes: [0; WIDE_MAX_GROUPS],
            lines: [0; WIDE_MAX_GROUPS],
            blocks: [0; WIDE_MAX_GROUPS],
        };
        for j in 0..WIDE_MAX_GROUPS {
            let Some(g) = self.groups.get(j).or(self.groups.first()) else {
                break;
            };
            let small = self.skips_filter(g, false) as u64;
            p.shift[j] = (128 - g.level as u64) | small << 8;
            p.sizes[j] = g.table.line_mask as u64 | ((g.filter.m / super::BLOCK_BITS) as u64) << 32;
            p.lines[j] = g.table.line_ptr(0) as u64;
            p.blocks[j] = g.filter.block_addr(0) as u64;
        }
        p
    }

    /// [`Self::rounds`] with the hash step eight probes at a time (module
    /// doc). Same answers (the differential tests run both).
    ///
    /// # Safety
    /// [`Self::wide_ok`] must hold (it checks the CPU features this is
    /// compiled for).
    #[target_feature(enable = "avx512f,avx512dq,avx512cd")]
    pub(super) unsafe fn rounds_wide(&self, addrs: &[u128], out: &mut [NextHop]) {
        let all = !(u32::MAX << self.groups.len().min(31));
        let p = self.params();
        let mut s = RoundLanes::<u128>::new();
        let mut lists = [Probes::new(), Probes::new()];
        let mut hashed = [Hashed::new(), Hashed::new()];
        self.round_segments::<{ HashKind::Mix64 as u8 }>(addrs, out, |ca, co, next| {
            let len = ca.len().min(co.len()).min(LANES);
            self.round_slots(&ca[..len], next, &mut s);
            // SAFETY: (1) this function's features, which the caller's
            // contract guarantees.
            let masked = unsafe { self.wide_chunk(len, &mut s, &p, &mut lists, &mut hashed, all) };
            co[..len].copy_from_slice(&s.res[..len]);
            masked
        });
    }

    /// The masks and rounds of one chunk of `len` lanes whose direct slots
    /// and sub-masks [`Self::round_slots`] read into `s`; returns how many
    /// lanes had a group to probe.
    #[target_feature(enable = "avx512f,avx512dq,avx512cd")]
    unsafe fn wide_chunk(
        &self,
        len: usize,
        s: &mut RoundLanes<u128>,
        p: &Params,
        lists: &mut [Probes; 2],
        hashed: &mut [Hashed; 2],
        all: u32,
    ) -> usize {
        let [mut act, mut next] = lists.each_mut();
        let [bucket, filter] = hashed;
        // Sub-sub-masks: every lane's mask; lanes with groups to probe
        // form the first round.
        let mut na = 0;
        for i in 0..len.min(LANES) {
            let m = self.round_mask(s, i, all);
            act.push_if(&mut na, i as u32, m, s.addrs[i], m != 0);
        }
        let masked = na;
        let mut more = [0u8; LANES];
        while na > 0 {
            // SAFETY: (1) this function's features.
            let (mut nb, nf) = unsafe { hash_probes(act, na, p, bucket, filter) };
            let mut nn = 0;
            // Filters (groups with big tables that are not the last named).
            for t in 0..nf.min(CAP) {
                let Some(g) = self.groups.get(filter.group[t] as usize) else {
                    continue;
                };
                let (h1, h2) = (filter.a[t], filter.addr[t] as u32);
                // SAFETY: (1) avx512f: this function's features.
                let pass = unsafe { g.filter.contains_avx512(h1, h2) };
                let lane = filter.lane[t] & (LANES as u32 - 1);
                let rest = filter.rest[t];
                let b = g.table.home(h1);
                let at = g.table.line_ptr(b);
                prefetch(select_addr(pass, at, g.filter.block_addr(h1)) as *const u8);
                bucket.push_line_if(&mut nb, filter, t, b as u32, at as u64, pass);
                let a = s.addrs[lane as usize];
                next.push_if(&mut nn, lane, rest, a, !pass & (rest != 0));
            }
            // Buckets.
            let mut nm = 0;
            for t in 0..nb.min(CAP) {
                let key = bucket.klo[t] as u128 | (bucket.khi[t] as u128) << 64;
                // SAFETY: `addr` is the address of a line of group `g`'s
                // table: `hash_probes` makes it from the table's first line
                // plus `home & line_mask` lines (the parameters of a group
                // of this table, `params`), the filter step from
                // `HashTable::line_ptr` of a masked index; the tables live
                // as long as `&self`.
                let line = unsafe { &*(bucket.addr[t] as *const Line6) };
                let full = settle(s, next, &mut nn, bucket, t, line.find(key));
                push_if(&mut more, &mut nm, t as u8, full);
            }
            // Full lines without the key (rare): the lines after them.
            while nm > 0 {
                let mut k = 0;
                for u in 0..nm {
                    let t = more[u & (LANES - 1)] as usize;
                    let Some(g) = self.groups.get(bucket.group[t] as usize) else {
                        continue;
                    };
                    let b = (bucket.a[t] as usize + 1) & g.table.line_mask as usize;
                    bucket.a[t] = b as u32;
                    let key = bucket.klo[t] as u128 | (bucket.khi[t] as u128) << 64;
                    let full = settle(s, next, &mut nn, bucket, t, g.table.line(b).find(key));
                    // In place: `k <= u`.
                    push_if(&mut more, &mut k, t as u8, full);
                }
                nm = k;
            }
            std::mem::swap(&mut act, &mut next);
            na = nn;
        }
        masked
    }
}

/// The answer `(hop, room)` of bucket-list entry `t`'s line: a hit sets
/// its lane's next hop; a miss in a line with room ends the probe, and the
/// lane goes on to `next` (`*nn` entries) when it has groups left. Returns
/// whether the line was full without the key (the probe goes on to the
/// next line).
#[inline(always)]
fn settle(
    s: &mut RoundLanes<u128>,
    next: &mut Probes,
    nn: &mut usize,
    bucket: &Hashed,
    t: usize,
    (hop, room): (NextHop, bool),
) -> bool {
    let t = t & (CAP - 1);
    let lane = (bucket.lane[t] & (LANES as u32 - 1)) as usize;
    let hit = hop != NO_ROUTE;
    s.res[lane] = select(hit, hop, s.res[lane]);
    let rest = bucket.rest[t];
    next.push_if(
        nn,
        lane as u32,
        rest,
        s.addrs[lane],
        !hit & room & (rest != 0),
    );
    !hit & !room
}

/// Hash the probes `act[..n]` eight at a time: each probe's group is its
/// mask's highest bit; its key the address's first `level` bits; its
/// filter block or table line (`Bloomfwd::skips_filter`) is prefetched and
/// it joins `bucket` or `filter`. Returns the lengths of both.
///
/// # Safety
/// The CPU must support avx512f, avx512dq and avx512cd.
#[inline]
#[target_feature(enable = "avx512f,avx512dq,avx512cd")]
unsafe fn hash_probes(
    act: &Probes,
    n: usize,
    p: &Params,
    bucket: &mut Hashed,
    filter: &mut Hashed,
) -> (usize, usize) {
    let (mut nb, mut nf) = (0usize, 0usize);
    // SAFETY: (1) avx512f/dq/cd: this function's contract. (2) Every load
    // reads 8 entries from `t < n <= LANES` of a `CAP`-entry array, and
    // every store writes 8 entries from a list length `< LANES + 1` (each
    // list holds each lane at most once), inside `CAP >= LANES + 8`.
    // (3) `Params` tables are 64-byte aligned (`repr(align(64))`) and 16
    // entries long: two aligned 8-lane loads each.
    unsafe {
        let tab = |x: &[u64; WIDE_MAX_GROUPS]| {
            (
                _mm512_load_si512(x.as_ptr() as *const __m512i),
                _mm512_load_si512(x.as_ptr().add(8) as *const __m512i),
            )
        };
        let (shift0, shift1) = tab(&p.shift);
        let (sizes0, sizes1) = tab(&p.sizes);
        let (lines0, lines1) = tab(&p.lines);
        let (blocks0, blocks1) = tab(&p.blocks);
        let c64 = _mm512_set1_epi64(64);
        let c63 = _mm512_set1_epi64(63);
        let one = _mm512_set1_epi64(1);
        let mut at = [0u64; 8];
        let mut t = 0;
        while t < n.min(LANES) {
            let k = first(n - t);
            let m = _mm512_cvtepu32_epi64(_mm256_loadu_si256(
                act.mask.as_ptr().add(t) as *const __m256i
            ));
            let lane = _mm512_cvtepu32_epi64(_mm256_loadu_si256(
                act.lane.as_ptr().add(t) as *const __m256i
            ));
            let lo = _mm512_loadu_si512(act.lo.as_ptr().add(t) as *const __m512i);
            let hi = _mm512_loadu_si512(act.hi.as_ptr().add(t) as *const __m512i);
            // The group: the mask's highest bit (the permutes read the low
            // 4 bits of `j`).
            let j = _mm512_sub_epi64(c63, _mm512_lzcnt_epi64(m));
            let shift = _mm512_permutex2var_epi64(shift0, j, shift1);
            let sh = _mm512_and_si512(shift, _mm512_set1_epi64(255));
            // The key: the address shifted right by `128 - level` (a count
            // of 64 or more clears a lane, as does a "negative" one).
            let klo = _mm512_or_si512(
                _mm512_or_si512(
                    _mm512_srlv_epi64(lo, sh),
                    _mm512_sllv_epi64(hi, _mm512_sub_epi64(c64, sh)),
                ),
                _mm512_srlv_epi64(hi, _mm512_sub_epi64(sh, c64)),
            );
            let khi = _mm512_srlv_epi64(hi, sh);
            // Mix64 of the key (`hash::pair128`).
            let f = _mm512_xor_si512(
                _mm512_xor_si512(klo, _mm512_set1_epi64(0x2545_f491_4f6c_dd1d)),
                _mm512_rol_epi64::<32>(_mm512_mullo_epi64(
                    khi,
                    _mm512_set1_epi64(0x9e37_79b9_7f4a_7c15u64 as i64),
                )),
            );
            let f = _mm512_xor_si512(f, _mm512_srli_epi64::<33>(f));
            let f = _mm512_mullo_epi64(f, _mm512_set1_epi64(0xff51_afd7_ed55_8ccdu64 as i64));
            let f = _mm512_xor_si512(f, _mm512_srli_epi64::<33>(f));
            let f = _mm512_mullo_epi64(f, _mm512_set1_epi64(0xc4ce_b9fe_1a85_ec53u64 as i64));
            let f = _mm512_xor_si512(f, _mm512_srli_epi64::<33>(f));
            let h1 = _mm512_and_si512(f, _mm512_set1_epi64(0xffff_ffff));
            let h2 = _mm512_or_si512(_mm512_srli_epi64::<32>(f), one);
            let rest = _mm512_xor_si512(m, _mm512_sllv_epi64(one, j));
            // Bucket read directly: the last group named, or a small table.
            let direct = _mm512_cmpeq_epi64_mask(rest, _mm512_setzero_si512())
                | _mm512_test_epi64_mask(shift, _mm512_set1_epi64(256));
            let sizes = _mm512_permutex2var_epi64(sizes0, j, sizes1);
            let home = _mm512_and_si512(h1, sizes);
            let line = _mm512_add_epi64(
                _mm512_permutex2var_epi64(lines0, j, lines1),
                _mm512_slli_epi64::<6>(home),
            );
            let block =
                _mm512_srli_epi64::<32>(_mm512_mul_epu32(h1, _mm512_srli_epi64::<32>(sizes)));
            let fblock = _mm512_add_epi64(
                _mm512_permutex2var_epi64(blocks0, j, blocks1),
                _mm512_slli_epi64::<6>(block),
            );
            _mm512_storeu_si512(
                at.as_mut_ptr() as *mut __m512i,
                _mm512_mask_blend_epi64(direct, fblock, line),
            );
            for &a in &at[..(n - t).min(8)] {
                prefetch(a as *const u8);
            }
            let bm = direct & k;
            put(bucket, nb, bm, lane, rest, j, home, line, klo, khi);
            nb += bm.count_ones() as usize;
            let fm = !direct & k;
            if fm != 0 {
                put(filter, nf, fm, lane, rest, j, h1, h2, klo, khi);
                nf += fm.count_ones() as usize;
            }
            t += 8;
        }
    }
    (nb, nf)
}

/// Append the lanes of `k` (packed, in order) to `list` at `n`.
///
/// # Safety
/// avx512f; `n + 8 <= CAP`.
#[inline(always)]
#[allow(clippy::too_many_arguments)]
unsafe fn put(
    list: &mut Hashed,
    n: usize,
    k: u8,
    lane: __m512i,
    rest: __m512i,
    j: __m512i,
    a: __m512i,
    addr: __m512i,
    klo: __m512i,
    khi: __m512i,
) {
    debug_assert!(n + 8 <= CAP);
    // SAFETY: (1) avx512f: the caller's contract. (2) Each store writes 8
    // entries from `n`, `n + 8 <= CAP` (the caller's contract).
    unsafe {
        let c32 = |dst: &mut [u32; CAP], v: __m512i| {
            let packed = _mm512_cvtepi64_epi32(_mm512_maskz_compress_epi64(k, v));
            _mm256_storeu_si256(dst.as_mut_ptr().add(n) as *mut __m256i, packed);
        };
        c32(&mut list.lane, lane);
        c32(&mut list.rest, rest);
        c32(&mut list.group, j);
        c32(&mut list.a, a);
        let c64 = |dst: &mut [u64; CAP], v: __m512i| {
            _mm512_storeu_si512(
                dst.as_mut_ptr().add(n) as *mut __m512i,
                _mm512_maskz_compress_epi64(k, v),
            );
        };
        c64(&mut list.addr, addr);
        c64(&mut list.klo, klo);
        c64(&mut list.khi, khi);
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::addr::Prefix;
    use crate::bloomfwd::{BloomfwdControl, Config};
    use crate::hash::{pair128, Simd};

    fn have_features() -> bool {
        std::arch::is_x86_feature_detected!("avx512f")
            && std::arch::is_x86_feature_detected!("avx512dq")
            && std::arch::is_x86_feature_detected!("avx512cd")
    }

    /// A table of the default IPv6 kind takes the wide rounds wherever the
    /// CPU can (so the differential tests, which run every SIMD path,
    /// cover them), and only with `Simd::Avx512`.
    #[test]
    fn default_ipv6_tables_take_the_wide_rounds_on_avx512() {
        let base = 0x2001_0db8u128 << 96;
        let routes: Vec<(Prefix<u128>, NextHop)> = (0..64u128)
            .map(|i| (Prefix::new(base | i << 80, 48).unwrap(), i as NextHop))
            .collect();
        let t = BloomfwdControl::<u128>::build(Config::ipv6(vec![32, 48, 64]), &routes).unwrap();
        let mut f = t.table().clone();
        f.set_simd(Simd::Avx512);
        assert_eq!(f.wide_ok(), have_features());
        let mut murmur = Config::ipv6(vec![32, 48, 64]);
        murmur.filter_hash = HashKind::Murmur3;
        murmur.table_hash = HashKind::Murmur3;
        let m = BloomfwdControl::<u128>::build(murmur, &routes).unwrap();
        assert!(!m.table().wide_ok(), "only Mix64 is vectorised");
        let mut addrs: Vec<u128> = (0..200u128).map(|i| base | (i % 70) << 80 | i).collect();
        addrs.push(0);
        let mut out = vec![0; addrs.len()];
        for simd in Simd::available() {
            f.set_simd(simd);
            f.lookup_batch(&addrs, &mut out);
            for (a, o) in addrs.iter().zip(&out) {
                assert_eq!(f.lookup(*a).unwrap_or(NO_ROUTE), *o, "{a:x} {simd:?}");
            }
        }
    }

    /// The hash step's keys and hashes equal the scalar ones at every
    /// level, for addresses with every bit pattern in both halves.
    #[test]
    fn hash_probes_match_the_scalar_keys_and_hashes() {
        if !have_features() {
            eprintln!("no avx512f/dq/cd on this CPU: the wide rounds are not reachable here");
            return;
        }
        let levels: Vec<u8> = vec![17, 24, 31, 32, 33, 48, 63, 64, 65, 96, 112, 120, 127, 128];
        let route = |l: u8| (Prefix::new(u128::MAX, l).unwrap(), 1);
        let routes: Vec<_> = levels.iter().map(|&l| route(l)).collect();
        let t = BloomfwdControl::<u128>::build(Config::ipv6(levels.clone()), &routes).unwrap();
        // Every filter tested (but the last named group's): both lists.
        let mut f = t.table().clone();
        f.set_round_filter_min_bytes(0);
        let p = f.params();
        let mut filtered = 0;
        let mut x = 0x0123_4567_89ab_cdefu64;
        let mut act = Probes::new();
        let (mut bucket, mut filter) = (Hashed::new(), Hashed::new());
        for round in 0..64 {
            let mut want = Vec::new();
            let mut n = 0;
            for lane in 0..LANES as u32 {
                x = crate::hash::mix64(x);
                let a = (x as u128) << 64 | crate::hash::mix64(x ^ round) as u128;
                let j = (x >> 7) as usize % levels.len();
                // The group, and maybe shorter ones left after it.
                let mask = 1u32 << j | (x >> 40) as u32 & ((1 << j) - 1);
                act.push_if(&mut n, lane, mask, a, true);
                let key = a >> (128 - levels[j] as u32);
                want.push((lane, key, pair128(HashKind::Mix64, key), mask ^ 1 << j, j));
            }
            // SAFETY: the features were checked above.
            let (nb, nf) = unsafe { hash_probes(&act, n, &p, &mut bucket, &mut filter) };
            assert_eq!(nb + nf, n);
            filtered += nf;
            let mut got = Vec::new();
            for t in 0..nb {
                assert_eq!(
                    bucket.rest[t], 0,
                    "only the last group named skips its filter"
                );
                let g = &f.groups[bucket.group[t] as usize];
                let h1 = want[bucket.lane[t] as usize].2 .0;
                assert_eq!(bucket.a[t] as usize, g.table.home(h1));
                assert_eq!(bucket.addr[t] as usize, g.table.line_addr(h1));
                got.push((
                    bucket.lane[t],
                    bucket.klo[t],
                    bucket.khi[t],
                    h1,
                    bucket.rest[t],
                    bucket.group[t],
                ));
            }
            for t in 0..nf {
                assert_ne!(filter.rest[t], 0, "the last group named skips its filter");
                let h = (filter.a[t], filter.addr[t] as u32);
                assert_eq!(h, want[filter.lane[t] as usize].2);
                got.push((
                    filter.lane[t],
                    filter.klo[t],
                    filter.khi[t],
                    h.0,
                    filter.rest[t],
                    filter.group[t],
                ));
            }
            got.sort_unstable();
            let want: Vec<_> = want
                .iter()
                .map(|&(lane, key, h, rest, j)| {
                    (lane, key as u64, (key >> 64) as u64, h.0, rest, j as u32)
                })
                .collect();
            assert_eq!(got, want);
        }
        assert!(filtered > 0);
    }
}
