//! DPCPE: choosing the expansion levels of IPv6 Bloomfwd (paper section 4.2).
//!
//! Given the number of prefixes of each length and a number of levels `n`,
//! pick at most `n` levels so that expanding every prefix to the smallest
//! chosen level at or above its length yields the fewest prefixes, counting
//! `2^(q-i)` prefixes for a prefix of length `i` expanded to level `q` (the
//! paper's cost function `f`, which ignores prefix capture, so the estimate
//! is an upper bound of the real count; the paper calls it an estimate).
//!
//! The paper grows the level set one length at a time, always keeping the
//! longest length. We minimise the same cost exactly with a dynamic program
//! over (levels used, last level): `best[j][q] = min over p < q of
//! best[j-1][p] + cost(p+1..=q -> q)`; the longest length present is always
//! a level (correctness), and lengths `<= lo` are left to the direct array.
//! Costs saturate at `u128::MAX` (the paper's "CPE3" rows are astronomical).

/// A chosen level set.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Plan {
    /// Levels, increasing; the last is the longest length present.
    pub levels: Vec<u8>,
    /// Prefixes after expansion by the cost function (ignores capture).
    pub estimated: u128,
}

fn expand_cost(counts: &[u64], from: usize, to: usize) -> u128 {
    // Prefixes of lengths from..=to expanded to `to`.
    let mut c: u128 = 0;
    for (i, &n) in counts.iter().enumerate().take(to + 1).skip(from) {
        if n == 0 {
            continue;
        }
        let shift = (to - i) as u32;
        let term = if shift >= 120 {
            u128::MAX
        } else {
            (n as u128).saturating_mul(1u128 << shift)
        };
        c = c.saturating_add(term);
    }
    c
}

/// Choose at most `n` levels for prefix-length counts `counts[len]`,
/// leaving lengths `<= lo` to the direct array. `None` when no length above
/// `lo` has a prefix or `n == 0`.
pub fn choose_levels(counts: &[u64], lo: u8, n: usize) -> Option<Plan> {
    let lo = lo as usize;
    let top = (lo + 1..counts.len()).rev().find(|&l| counts[l] > 0)?;
    if n == 0 {
        return None;
    }
    let w = top;
    let inf = u128::MAX;
    // best[j][q]: min cost covering lengths lo+1..=q with j+1 levels, last = q.
    let mut best = vec![vec![inf; w + 1]; n];
    let mut from = vec![vec![usize::MAX; w + 1]; n];
    for (q, b) in best[0].iter_mut().enumerate().skip(lo + 1) {
        *b = expand_cost(counts, lo + 1, q);
    }
    for j in 1..n {
        for q in lo + 1..=w {
            for p in lo + 1..q {
                if best[j - 1][p] == inf {
                    continue;
                }
                let c = best[j - 1][p].saturating_add(expand_cost(counts, p + 1, q));
                if c < best[j][q] {
                    best[j][q] = c;
                    from[j][q] = p;
                }
            }
        }
    }
    // Fewest levels among the cheapest (more levels never cost more).
    let (mut j, estimated) = (0..n)
        .map(|j| (j, best[j][w]))
        .min_by_key(|&(j, c)| (c, j))?;
    let mut levels = vec![w as u8];
    let mut q = w;
    while j > 0 {
        q = from[j][q];
        levels.push(q as u8);
        j -= 1;
    }
    levels.reverse();
    Some(Plan { levels, estimated })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn one_level_expands_everything_to_the_longest_length() {
        let mut c = vec![0u64; 129];
        c[48] = 10;
        c[64] = 5;
        let p = choose_levels(&c, 0, 1).unwrap();
        assert_eq!(p.levels, vec![64]);
        assert_eq!(p.estimated, 10 * (1u128 << 16) + 5);
    }

    #[test]
    fn enough_levels_give_every_length_its_own_level() {
        let mut c = vec![0u64; 129];
        for (l, n) in [(32, 7u64), (48, 12), (64, 3), (128, 1)] {
            c[l] = n;
        }
        let p = choose_levels(&c, 0, 8).unwrap();
        assert_eq!(p.levels, vec![32, 48, 64, 128]);
        assert_eq!(p.estimated, 23);
    }

    #[test]
    fn dp_matches_exhaustive_search_on_small_cases() {
        let mut c = vec![0u64; 17];
        for (l, n) in [(3, 2u64), (5, 9), (8, 1), (9, 30), (12, 4), (16, 2)] {
            c[l] = n;
        }
        for n in 1..=4 {
            let p = choose_levels(&c, 0, n).unwrap();
            // Every subset of 1..16 containing 16 with at most n elements.
            let mut best = u128::MAX;
            for mask in 0u32..(1 << 15) {
                if mask.count_ones() as usize + 1 > n {
                    continue;
                }
                let mut lv: Vec<usize> = (1..16).filter(|i| mask >> (i - 1) & 1 == 1).collect();
                lv.push(16);
                let mut cost = 0u128;
                let mut prev = 0;
                for &q in &lv {
                    cost += expand_cost(&c, prev + 1, q);
                    prev = q;
                }
                best = best.min(cost);
            }
            assert_eq!(p.estimated, best, "n={n}");
            assert!(p.levels.len() <= n);
        }
    }
}
