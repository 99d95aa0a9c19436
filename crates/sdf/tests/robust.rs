//! Frames of any length and content, marks and actions of any position go
//! through key extraction, lookup, install and apply without a panic; bad
//! positions come back as errors.

use nexthop_sdf::{
    Actions, Config, Decision, DecisionCache, HeaderKey, Installed, Mask, Primitive, StateIds,
    KEY_BITS,
};
use proptest::prelude::*;

fn small_cache() -> DecisionCache {
    DecisionCache::new(Config {
        capacity: 16,
        front_slots: 16,
        max_masks: 4,
        free_masks: 1,
        admit_after: 2,
        rerank_every: 5,
        ..Config::default()
    })
    .unwrap()
}

proptest! {
    #![proptest_config(ProptestConfig { cases: 512, ..ProptestConfig::default() })]

    #[test]
    fn any_frames_and_decisions_never_panic(
        frames in prop::collection::vec(prop::collection::vec(any::<u8>(), 0..300), 1..24),
        ops in prop::collection::vec((any::<u16>(), any::<u16>(), any::<u8>(), any::<u8>()), 1..40),
    ) {
        let mut c = small_cache();
        let mut states = Vec::new();
        for (i, &(pos, len, at, sel)) in ops.iter().enumerate() {
            let f = &frames[i % frames.len()];
            let port = u16::from(sel % 5);
            let key = HeaderKey::from_frame(f, port);
            prop_assert_eq!(key.len(), f.len().min(nexthop_sdf::KEY_BYTES));
            if let Some(id) = c.lookup(&key) {
                let mut out = f.clone();
                c.apply(id, &mut out).unwrap();
                prop_assert_eq!(out.len(), f.len());
            }
            let mut mask = Mask::new();
            let (pos, len) = (usize::from(pos) % (KEY_BITS + 64), usize::from(len) % 80);
            if mask.mark(pos, len).is_err() {
                prop_assert!(pos + len > KEY_BITS);
            }
            if sel & 8 != 0 { mask.mark_ingress(); }
            if sel & 16 != 0 { let _ = mask.require_len(usize::from(at)); }
            let mut actions = Actions::output(port);
            let _ = actions.set_bytes(usize::from(at), &[sel, at]);
            if let Some(p) = Primitive::ip_ttl_for(f) {
                actions.push_primitive(p).unwrap();
            }
            let _ = actions.push_primitive(Primitive::DecrementTtl {
                ttl_at: at,
                checksum_at: if sel & 1 == 0 { None } else { Some(sel) },
            });
            if sel & 32 != 0 {
                states.push(c.new_state_id().unwrap());
            }
            let regs: Vec<_> = states.iter().rev().take(usize::from(sel % 3)).copied().collect();
            let d = Decision { mask, states: regs.into(), actions: actions.clone() };
            match c.install(&key, &d) {
                Ok(Installed::Cached(id)) => {
                    prop_assert_eq!(c.lookup(&key), Some(id));
                }
                Ok(Installed::NotCached(_)) | Err(_) => {}
            }
            // Actions applied directly to any frame: no panic, length kept.
            let mut out = f.clone();
            let _ = actions.apply(&mut out);
            prop_assert_eq!(out.len(), f.len());
            if sel % 7 == 0 && !states.is_empty() {
                let s = states.remove(usize::from(at) % states.len());
                c.removed(s);
            }
            prop_assert!(c.len() <= 16);
            prop_assert!(c.masks() <= 4);
        }
    }

    #[test]
    fn batched_lookup_equals_single_lookups(
        frames in prop::collection::vec(prop::collection::vec(0u8..3, 0..20), 1..80),
    ) {
        // Entries here may overlap with different actions (no app made
        // them), so which one answers depends on the subtable order: keep
        // it fixed (no re-ranking) and both caches answer alike.
        let cfg = Config { rerank_every: u64::MAX, ..Config::default() };
        let mut c = DecisionCache::new(cfg).unwrap();
        let mut c2 = DecisionCache::new(cfg).unwrap();
        for (i, f) in frames.iter().enumerate().take(10) {
            let mut m = Mask::new();
            let _ = m.mark_bytes(i % 3, 1 + i % 2);
            let d = Decision { mask: m, states: StateIds::new(), actions: Actions::output(i as u16) };
            let k = HeaderKey::from_frame(f, 0);
            let a = c.install(&k, &d);
            let b = c2.install(&k, &d);
            prop_assert_eq!(a.is_ok(), b.is_ok());
        }
        let keys: Vec<HeaderKey> = frames.iter().map(|f| HeaderKey::from_frame(f, 0)).collect();
        let mut out = vec![None; keys.len()];
        let hits = c.lookup_batch(&keys, &mut out);
        prop_assert_eq!(hits, out.iter().filter(|x| x.is_some()).count());
        for (k, got) in keys.iter().zip(&out) {
            let single = c2.lookup(k);
            prop_assert_eq!(got.is_some(), single.is_some());
            if let (Some(a), Some(b)) = (got, single) {
                prop_assert_eq!(c.actions(*a), c2.actions(b));
            }
        }
    }
}
