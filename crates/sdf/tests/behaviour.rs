//! Revocation exactness, LRU eviction, the mask cap and admission control,
//! the no-marks rule, stale and nonsense decisions, re-ranking.

use nexthop_sdf::{
    Actions, Config, Decision, DecisionCache, HeaderKey, InstallError, Installed, Mask, NotCached,
    StateId,
};

fn frame(b0: u8, b1: u8) -> Vec<u8> {
    let mut f = vec![0u8; 64];
    f[0] = b0;
    f[1] = b1;
    f
}

fn key(b0: u8, b1: u8) -> HeaderKey {
    HeaderKey::from_frame(&frame(b0, b1), 1)
}

fn byte_mask(bytes: &[usize]) -> Mask {
    let mut m = Mask::new();
    for &b in bytes {
        m.mark_bytes(b, 1).unwrap();
    }
    m
}

fn decide(mask: Mask, states: Vec<StateId>, port: u16) -> Decision {
    Decision {
        mask,
        states: states.into(),
        actions: Actions::output(port),
    }
}

fn cached(i: Installed) -> nexthop_sdf::EntryId {
    match i {
        Installed::Cached(id) => id,
        other => panic!("not cached: {other:?}"),
    }
}

#[test]
fn removed_revokes_exactly_the_registering_entries_from_front_and_subtables() {
    let mut c = DecisionCache::new(Config::default()).unwrap();
    let a = c.new_state_id().unwrap();
    let b = c.new_state_id().unwrap();
    let z = c.new_state_id().unwrap();
    // 0..10: state a; 10..20: state b; 20..30: both; two masks.
    let mut ids = Vec::new();
    for v in 0..30u8 {
        let states = match v {
            0..=9 => vec![a],
            10..=19 => vec![b],
            _ => vec![a, b],
        };
        let m = if v % 2 == 0 {
            byte_mask(&[0])
        } else {
            byte_mask(&[0, 1])
        };
        ids.push(cached(
            c.install(&key(v, v), &decide(m, states, 1)).unwrap(),
        ));
    }
    // Fill the front with every key.
    for v in 0..30u8 {
        assert_eq!(c.lookup(&key(v, v)), Some(ids[v as usize]));
    }
    assert!(c.counters().front_hits >= 30);
    assert_eq!(c.dependents(a), 20);
    assert_eq!(c.dependents(z), 0);
    assert_eq!(c.removed(z), 0);
    assert_eq!(c.removed(a), 20);
    for v in 0..30u8 {
        let hit = c.lookup(&key(v, v));
        assert_eq!(hit.is_some(), (10..20).contains(&v), "key {v}");
        assert_eq!(c.contains(ids[v as usize]), (10..20).contains(&v));
    }
    assert_eq!(c.dependents(b), 10, "entries also on b left b's list");
    assert_eq!(c.removed(a), 0, "a second removal is a no-op");
    assert_eq!(c.removed(b), 10);
    assert!(c.is_empty());
    assert_eq!(c.masks(), 0, "empty subtables are freed");
    assert_eq!(c.counters().revocations, 30);
}

#[test]
fn decision_with_a_removed_state_is_not_cached_and_an_unissued_one_is_an_error() {
    let mut c = DecisionCache::new(Config::default()).unwrap();
    let s = c.new_state_id().unwrap();
    c.removed(s);
    let d = decide(byte_mask(&[0]), vec![s], 1);
    assert_eq!(
        c.install(&key(1, 1), &d).unwrap(),
        Installed::NotCached(NotCached::StaleState(s))
    );
    let t = c.new_state_id().unwrap();
    let d = decide(byte_mask(&[0]), vec![t], 1);
    cached(c.install(&key(2, 2), &d).unwrap());
    // An id from another cache, whose slot this one never used.
    let mut c2 = DecisionCache::new(Config::default()).unwrap();
    let foreign = (0..3).map(|_| c2.new_state_id().unwrap()).last().unwrap();
    let d = decide(byte_mask(&[0]), vec![foreign], 1);
    assert_eq!(
        c.install(&key(3, 3), &d),
        Err(InstallError::UnknownState(foreign.get()))
    );
    // The removed id's slot was reused under a new generation: the old id
    // is still dead.
    assert_ne!(s, t);
    assert!(!c.is_live(s) && c.is_live(t));
    assert_eq!(c.removed(s), 0);
    assert!(c.is_live(t));
    assert_eq!(c.len(), 1);
    assert_eq!(c.counters().not_cached_stale, 1);
}

#[test]
fn decision_with_no_marks_and_no_state_is_not_cached() {
    let mut c = DecisionCache::new(Config::default()).unwrap();
    let d = decide(Mask::new(), vec![], 2);
    assert_eq!(
        c.install(&key(1, 2), &d).unwrap(),
        Installed::NotCached(NotCached::NoDependencies)
    );
    assert_eq!(c.lookup(&key(1, 2)), None);
    assert_eq!(c.counters().not_cached_no_deps, 1);
    // Marks alone, the ingress port alone, or state alone are enough.
    let mut ing = Mask::new();
    ing.mark_ingress();
    let id = cached(c.install(&key(1, 2), &decide(ing, vec![], 2)).unwrap());
    assert_eq!(
        c.lookup(&key(9, 9)),
        Some(id),
        "ingress-only entry matches port 1"
    );
    assert_eq!(c.lookup(&HeaderKey::from_frame(&frame(9, 9), 2)), None);
    let s = c.new_state_id().unwrap();
    let id = cached(
        c.install(&key(1, 2), &decide(Mask::new(), vec![s], 3))
            .unwrap(),
    );
    assert_eq!(c.lookup(&HeaderKey::from_frame(&frame(7, 7), 4)), Some(id));
}

#[test]
fn marks_and_actions_past_the_frame_are_refused() {
    let mut c = DecisionCache::new(Config::default()).unwrap();
    let short = HeaderKey::from_frame(&[1, 2, 3, 4], 0);
    let d = decide(byte_mask(&[4]), vec![], 1);
    assert_eq!(
        c.install(&short, &d),
        Err(InstallError::MarkBeyondFrame { needed: 5, got: 4 })
    );
    let mut actions = Actions::output(1);
    actions.set_bytes(10, &[1]).unwrap();
    let d = Decision {
        mask: byte_mask(&[0]),
        states: Default::default(),
        actions,
    };
    assert_eq!(
        c.install(&short, &d),
        Err(InstallError::ActionBeyondFrame { needed: 11, got: 4 })
    );
    let mut cc = DecisionCache::new(Config {
        max_states_per_entry: 2,
        ..Config::default()
    })
    .unwrap();
    let ids: Vec<StateId> = (0..3).map(|_| cc.new_state_id().unwrap()).collect();
    assert!(matches!(
        cc.install(&key(1, 1), &decide(byte_mask(&[0]), ids, 1)),
        Err(InstallError::TooManyStates { got: 3, max: 2 })
    ));
    assert!(c.is_empty() && cc.is_empty());
}

#[test]
fn short_frames_never_match_entries_that_need_longer_ones() {
    let mut c = DecisionCache::new(Config::default()).unwrap();
    let id = cached(
        c.install(&key(1, 0), &decide(byte_mask(&[0, 20]), vec![], 1))
            .unwrap(),
    );
    // Same bytes 0 and 20 (zero), but the frame ends before byte 20.
    assert_eq!(
        c.lookup(&HeaderKey::from_frame(&frame(1, 0)[..20], 1)),
        None
    );
    assert_eq!(
        c.lookup(&HeaderKey::from_frame(&frame(1, 0)[..21], 1)),
        Some(id)
    );
}

#[test]
fn same_mask_and_masked_key_replaces_the_older_decision() {
    let mut c = DecisionCache::new(Config::default()).unwrap();
    let old = cached(
        c.install(&key(1, 1), &decide(byte_mask(&[0]), vec![], 1))
            .unwrap(),
    );
    let new = cached(
        c.install(&key(1, 2), &decide(byte_mask(&[0]), vec![], 2))
            .unwrap(),
    );
    assert!(!c.contains(old));
    assert_eq!(c.lookup(&key(1, 1)), Some(new));
    assert_eq!(c.len(), 1);
    assert_eq!(c.counters().replaced, 1);
}

#[test]
fn lru_evicts_the_least_recently_used_entry() {
    let mut c = DecisionCache::new(Config {
        capacity: 3,
        ..Config::default()
    })
    .unwrap();
    let m = byte_mask(&[0]);
    let e1 = cached(
        c.install(&key(1, 0), &decide(m.clone(), vec![], 1))
            .unwrap(),
    );
    let e2 = cached(
        c.install(&key(2, 0), &decide(m.clone(), vec![], 1))
            .unwrap(),
    );
    let e3 = cached(
        c.install(&key(3, 0), &decide(m.clone(), vec![], 1))
            .unwrap(),
    );
    // Use 1 (front) and 2 (wildcard: a key the front never saw).
    assert_eq!(c.lookup(&key(1, 0)), Some(e1));
    assert_eq!(c.lookup(&key(2, 9)), Some(e2));
    let e4 = cached(
        c.install(&key(4, 0), &decide(m.clone(), vec![], 1))
            .unwrap(),
    );
    assert!(!c.contains(e3), "3 was least recently used");
    assert!(c.contains(e1) && c.contains(e2) && c.contains(e4));
    let _e5 = cached(c.install(&key(5, 0), &decide(m, vec![], 1)).unwrap());
    assert!(!c.contains(e1));
    assert_eq!(c.len(), 3);
    assert_eq!(c.counters().evictions, 2);
}

#[test]
fn evicted_entries_leave_their_state_lists() {
    let mut c = DecisionCache::new(Config {
        capacity: 2,
        ..Config::default()
    })
    .unwrap();
    let s = c.new_state_id().unwrap();
    for v in 0..10u8 {
        cached(
            c.install(&key(v, 0), &decide(byte_mask(&[0]), vec![s], 1))
                .unwrap(),
        );
        assert!(c.dependents(s) <= 2);
    }
    assert_eq!(c.removed(s), 2);
    assert!(c.is_empty());
}

#[test]
fn mask_cap_bounds_subtables_and_hot_masks_survive_a_mask_flood() {
    let mut c = DecisionCache::new(Config {
        max_masks: 4,
        rerank_every: 1 << 40,
        ..Config::default()
    })
    .unwrap();
    // Four legitimate masks, each hit a lot.
    let legit: Vec<Mask> = (0..4).map(|b| byte_mask(&[b])).collect();
    for (i, m) in legit.iter().enumerate() {
        cached(
            c.install(&key(i as u8, 0), &decide(m.clone(), vec![], 1))
                .unwrap(),
        );
    }
    for _ in 0..10 {
        for i in 0..4u8 {
            // Different second byte: wildcard hits, which count for ranking.
            assert!(c.lookup(&key(i, 100 + i)).is_some());
        }
    }
    // A flood of one-shot masks (tuple-space explosion): all refused.
    let mut refused = 0;
    for b in 4..60 {
        let m = byte_mask(&[b, b + 1]);
        match c.install(&key(1, 1), &decide(m, vec![], 2)).unwrap() {
            Installed::NotCached(NotCached::MaskCapFull) => refused += 1,
            other => panic!("flood mask admitted: {other:?}"),
        }
    }
    assert_eq!(refused, 56);
    assert_eq!(c.masks(), 4);
    assert_eq!(c.counters().mask_refused, 56);
    assert_eq!(c.counters().admission_refusals(), 56);
    // After the hot masks cool down (re-rankings halve their hits), a new
    // mask displaces the coldest one.
    for _ in 0..8 {
        c.rerank();
    }
    let m = byte_mask(&[50]);
    cached(c.install(&key(1, 1), &decide(m, vec![], 2)).unwrap());
    assert_eq!(c.masks(), 4);
    assert_eq!(c.counters().mask_displaced, 1);
    assert_eq!(c.len(), 4, "the displaced mask's entry went with it");
}

/// The default admission: an app's first `free_masks` masks are admitted on
/// their first decision; past them a new mask waits for `admit_after`
/// requests within an epoch, so one-shot masks (the tuple-space-explosion
/// pattern) stop at `free_masks` subtables.
#[test]
fn the_first_free_masks_are_admitted_at_once_then_probation() {
    let cfg = Config::default();
    assert!(cfg.free_masks < cfg.max_masks && cfg.admit_after > 1);
    let mut c = DecisionCache::new(cfg).unwrap();
    for b in 0..cfg.free_masks {
        cached(
            c.install(&key(1, 1), &decide(byte_mask(&[b]), vec![], 1))
                .unwrap(),
        );
    }
    assert_eq!(c.masks(), cfg.free_masks);
    // A flood of one-shot masks: every one on probation, none admitted.
    for b in 0..200usize {
        let m = byte_mask(&[cfg.free_masks + b % 40, 58 + b / 40]);
        assert_eq!(
            c.install(&key(1, 1), &decide(m, vec![], 1)).unwrap(),
            Installed::NotCached(NotCached::MaskProbation)
        );
    }
    assert_eq!(c.masks(), cfg.free_masks);
    assert_eq!(c.counters().mask_probation, 200);
    // A mask the app keeps asking for is admitted on its `admit_after`th.
    let m = byte_mask(&[50]);
    for _ in 1..cfg.admit_after {
        assert_eq!(
            c.install(&key(1, 1), &decide(m.clone(), vec![], 1))
                .unwrap(),
            Installed::NotCached(NotCached::MaskProbation)
        );
    }
    cached(c.install(&key(1, 1), &decide(m, vec![], 1)).unwrap());
    assert_eq!(c.masks(), cfg.free_masks + 1);
}

#[test]
fn probation_admits_a_mask_only_after_repeated_requests() {
    let mut c = DecisionCache::new(Config {
        free_masks: 0,
        admit_after: 3,
        ..Config::default()
    })
    .unwrap();
    let m = byte_mask(&[0]);
    for _ in 0..2 {
        assert_eq!(
            c.install(&key(1, 1), &decide(m.clone(), vec![], 1))
                .unwrap(),
            Installed::NotCached(NotCached::MaskProbation)
        );
    }
    cached(
        c.install(&key(1, 1), &decide(m.clone(), vec![], 1))
            .unwrap(),
    );
    // Once admitted, the mask needs no more requests.
    cached(c.install(&key(2, 1), &decide(m, vec![], 1)).unwrap());
    assert_eq!(c.masks(), 1);
    assert_eq!(c.len(), 2);
    assert_eq!(c.counters().mask_probation, 2);
    // Probation counts are forgotten at re-ranking.
    let n = byte_mask(&[9]);
    c.install(&key(1, 1), &decide(n.clone(), vec![], 1))
        .unwrap();
    c.install(&key(1, 1), &decide(n.clone(), vec![], 1))
        .unwrap();
    c.rerank();
    assert_eq!(
        c.install(&key(1, 1), &decide(n, vec![], 1)).unwrap(),
        Installed::NotCached(NotCached::MaskProbation)
    );
    assert_eq!(c.counters().mask_probation, 5);
}

#[test]
fn rerank_puts_the_most_hit_subtable_first() {
    let mut c = DecisionCache::new(Config {
        front_slots: 0,
        rerank_every: 1 << 40,
        ..Config::default()
    })
    .unwrap();
    for b in 0..8usize {
        let mut f = frame(0, 0);
        f[b + 2] = 1;
        let k = HeaderKey::from_frame(&f, 0);
        cached(
            c.install(&k, &decide(byte_mask(&[b + 2]), vec![], 1))
                .unwrap(),
        );
    }
    // Only the last-created mask (byte 9 set) is hit.
    let mut f = frame(0, 0);
    f[9] = 1;
    let hot = HeaderKey::from_frame(&f, 0);
    let before = c.counters().subtables_probed;
    c.lookup(&hot).unwrap();
    let probes_before = c.counters().subtables_probed - before;
    for _ in 0..100 {
        c.lookup(&hot).unwrap();
    }
    c.rerank();
    let before = c.counters().subtables_probed;
    c.lookup(&hot).unwrap();
    assert_eq!(c.counters().subtables_probed - before, 1);
    assert!(probes_before > 1, "{probes_before}");
}

#[test]
fn state_id_cap_is_enforced() {
    let mut c = DecisionCache::new(Config {
        max_state_ids: 2,
        ..Config::default()
    })
    .unwrap();
    let a = c.new_state_id().unwrap();
    c.new_state_id().unwrap();
    assert!(c.new_state_id().is_err());
    c.removed(a);
    assert!(c.new_state_id().is_ok());
}

#[test]
fn bad_configs_are_refused_with_the_field_named() {
    for (cfg, needle) in [
        (
            Config {
                capacity: 0,
                ..Config::default()
            },
            "capacity",
        ),
        (
            Config {
                max_masks: 0,
                ..Config::default()
            },
            "max_masks",
        ),
        (
            Config {
                admit_after: 0,
                ..Config::default()
            },
            "admit_after",
        ),
        (
            Config {
                rerank_every: 0,
                ..Config::default()
            },
            "rerank_every",
        ),
        (
            Config {
                max_states_per_entry: 256,
                ..Config::default()
            },
            "max_states_per_entry",
        ),
    ] {
        let e = DecisionCache::new(cfg).unwrap_err();
        assert!(e.to_string().contains(needle), "{e}");
    }
}
