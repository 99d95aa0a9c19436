//! The tuple-space cache against a linear list of wildcard entries: random
//! masks, keys, installs, lookups (single and batched), new state ids and
//! revocations, with a capacity small enough that LRU eviction runs. The
//! oracle keeps its own LRU order from the entries the cache says it hit.

use nexthop_sdf::{
    Actions, Config, Decision, DecisionCache, EntryId, HeaderKey, Installed, Mask, StateId,
    StateIds,
};
use rand::{Rng, SeedableRng};
use rand_xoshiro::Xoshiro256PlusPlus;

struct OEntry {
    id: EntryId,
    mask: Mask,
    key: HeaderKey,
    min_len: usize,
    actions: Actions,
    states: Vec<StateId>,
    last_used: u64,
}

struct Oracle {
    entries: Vec<OEntry>,
    tick: u64,
}

impl Oracle {
    fn matching(&self, k: &HeaderKey) -> Vec<usize> {
        (0..self.entries.len())
            .filter(|&i| {
                let e = &self.entries[i];
                k.len() >= e.min_len && e.mask.matches(&e.key, k)
            })
            .collect()
    }

    fn touch(&mut self, id: EntryId) {
        self.tick += 1;
        let t = self.tick;
        let e = self
            .entries
            .iter_mut()
            .find(|e| e.id == id)
            .expect("hit entry is in the oracle");
        e.last_used = t;
    }
}

fn random_mask(r: &mut impl Rng) -> Mask {
    let mut m = Mask::new();
    for _ in 0..r.gen_range(1..=3) {
        let pos = r.gen_range(0..10 * 8);
        let len = r.gen_range(1..=12);
        m.mark(pos, len).unwrap();
    }
    if r.gen_bool(0.3) {
        m.mark_ingress();
    }
    if r.gen_bool(0.2) {
        m.require_len(r.gen_range(0..=16)).unwrap();
    }
    m
}

fn random_key(r: &mut impl Rng) -> HeaderKey {
    let len = r.gen_range(4..=16);
    let frame: Vec<u8> = (0..len)
        .map(|_| [0u8, 1, 0x80][r.gen_range(0..3)])
        .collect();
    HeaderKey::from_frame(&frame, r.gen_range(0..3))
}

fn run(seed: u64, steps: usize, capacity: usize, front_slots: usize) -> nexthop_sdf::Counters {
    let mut r = Xoshiro256PlusPlus::seed_from_u64(seed);
    let cfg = Config {
        capacity,
        front_slots,
        max_masks: 64,
        // Every mask at once: this oracle has no admission control (that
        // is tested in behaviour.rs).
        admit_after: 1,
        rerank_every: 7,
        ..Config::default()
    };
    let mut cache = DecisionCache::new(cfg).unwrap();
    let masks: Vec<Mask> = (0..r.gen_range(1..=12))
        .map(|_| random_mask(&mut r))
        .collect();
    let mut live: Vec<StateId> = (0..4).map(|_| cache.new_state_id().unwrap()).collect();
    let mut o = Oracle {
        entries: Vec::new(),
        tick: 0,
    };
    let (mut hits, mut installs, mut revoked) = (0, 0, 0);
    for _ in 0..steps {
        match r.gen_range(0..100) {
            0..=34 => {
                let key = random_key(&mut r);
                let mut mask = masks[r.gen_range(0..masks.len())].clone();
                if r.gen_bool(0.1) {
                    // Same bits, another required length: same subtable.
                    mask.require_len(r.gen_range(0..=12)).unwrap();
                }
                if mask.min_len() > key.len() {
                    let d = Decision {
                        mask,
                        states: StateIds::new(),
                        actions: Actions::drop(),
                    };
                    assert!(cache.install(&key, &d).is_err());
                    continue;
                }
                let states: Vec<StateId> =
                    live.iter().copied().filter(|_| r.gen_bool(0.4)).collect();
                let mut actions = Actions::output(r.gen_range(0..8));
                if r.gen_bool(0.3) {
                    actions.set_bytes(r.gen_range(0..4), &[r.gen()]).unwrap();
                }
                let min_len = mask.min_len().max(actions.min_len());
                let d = Decision {
                    mask: mask.clone(),
                    states: StateIds::from_slice(&states),
                    actions: actions.clone(),
                };
                let Installed::Cached(id) = cache.install(&key, &d).unwrap() else {
                    panic!("every decision here is cacheable");
                };
                installs += 1;
                // Same mask and masked key: replaced.
                o.entries
                    .retain(|e| !(e.mask.same_bits(&mask) && mask.matches(&e.key, &key)));
                while o.entries.len() >= capacity {
                    let lru = (0..o.entries.len())
                        .min_by_key(|&i| o.entries[i].last_used)
                        .unwrap();
                    o.entries.swap_remove(lru);
                }
                o.tick += 1;
                o.entries.push(OEntry {
                    id,
                    mask,
                    key,
                    min_len,
                    actions,
                    states,
                    last_used: o.tick,
                });
            }
            35..=79 => {
                let n = if r.gen_bool(0.5) {
                    1
                } else {
                    r.gen_range(2..70)
                };
                let keys: Vec<HeaderKey> = (0..n)
                    .map(|_| {
                        if !o.entries.is_empty() && r.gen_bool(0.6) {
                            // An installed key with some bits flipped.
                            let e = &o.entries[r.gen_range(0..o.entries.len())];
                            let mut b = e.key.bytes();
                            let i = r.gen_range(0..e.key.len().max(1));
                            if r.gen_bool(0.5) {
                                b[i] ^= 1 << r.gen_range(0..8);
                            }
                            let len = if r.gen_bool(0.1) {
                                r.gen_range(0..=16)
                            } else {
                                e.key.len()
                            };
                            HeaderKey::from_frame(
                                &b[..len],
                                if r.gen_bool(0.8) { e.key.in_port() } else { 5 },
                            )
                        } else {
                            random_key(&mut r)
                        }
                    })
                    .collect();
                let mut out = vec![None; n];
                let got = if n == 1 {
                    out[0] = cache.lookup(&keys[0]);
                    usize::from(out[0].is_some())
                } else {
                    cache.lookup_batch(&keys, &mut out)
                };
                assert_eq!(got, out.iter().filter(|x| x.is_some()).count());
                for (k, res) in keys.iter().zip(&out) {
                    let m = o.matching(k);
                    match res {
                        None => assert!(m.is_empty(), "cache missed {k:?}, oracle has {}", m.len()),
                        Some(id) => {
                            let i = m
                                .iter()
                                .copied()
                                .find(|&i| o.entries[i].id == *id)
                                .unwrap_or_else(|| panic!("cache hit {id:?} does not match {k:?}"));
                            assert_eq!(cache.actions(*id), Some(&o.entries[i].actions));
                            hits += 1;
                        }
                    }
                }
                for id in out.iter().flatten() {
                    o.touch(*id);
                }
            }
            80..=91 => {
                if live.is_empty() {
                    continue;
                }
                let s = live.swap_remove(r.gen_range(0..live.len()));
                let want = o.entries.iter().filter(|e| e.states.contains(&s)).count();
                assert_eq!(cache.dependents(s), want);
                assert_eq!(cache.removed(s), want);
                o.entries.retain(|e| !e.states.contains(&s));
                revoked += want;
                assert!(!cache.is_live(s));
            }
            _ => live.push(cache.new_state_id().unwrap()),
        }
        assert_eq!(cache.len(), o.entries.len());
        for e in &o.entries {
            assert!(cache.contains(e.id));
        }
    }
    let c = cache.counters();
    assert_eq!(c.front_hits + c.wildcard_hits, hits);
    assert_eq!(c.installs, installs);
    assert_eq!(c.revocations, revoked as u64);
    *c
}

fn totals(runs: impl Iterator<Item = nexthop_sdf::Counters>) -> (u64, u64, u64, u64) {
    runs.fold((0, 0, 0, 0), |t, c| {
        (
            t.0 + c.front_hits,
            t.1 + c.wildcard_hits,
            t.2 + c.evictions,
            t.3 + c.revocations,
        )
    })
}

#[test]
fn tuple_space_agrees_with_linear_list_without_eviction() {
    let (front, wild, evicted, revoked) = totals((0..40).map(|s| run(s, 600, 1 << 20, 64)));
    assert!(
        front > 1000 && wild > 1000 && revoked > 100,
        "{front} {wild} {revoked}"
    );
    assert_eq!(evicted, 0);
}

#[test]
fn tuple_space_agrees_with_linear_list_under_lru_eviction() {
    let (_, wild, evicted, _) = totals((100..140).map(|s| run(s, 600, 12, 16)));
    assert!(wild > 1000 && evicted > 1000, "{wild} {evicted}");
}

#[test]
fn tuple_space_agrees_with_linear_list_without_front() {
    let (front, wild, _, _) = totals((200..220).map(|s| run(s, 600, 24, 0)));
    assert_eq!(front, 0);
    assert!(wild > 500);
}
