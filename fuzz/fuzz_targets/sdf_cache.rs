//! Untrusted frames and untrusted decisions through the SDF decision cache:
//! the input is cut into records `[op, port, a, b, c, len, frame bytes…]`;
//! each record's frame is keyed and looked up (a hit's actions applied to
//! a copy of the frame), then a decision built from the record's bytes
//! (marks, required length, rewrite, TTL primitive, state ids) is
//! installed, and some records revoke a state id. Nothing may panic, a
//! cached decision must answer its own key, applying actions keeps the
//! frame's length, and the caps hold.
#![no_main]
use libfuzzer_sys::fuzz_target;
use nexthop_sdf::{Actions, Config, Decision, DecisionCache, HeaderKey, Installed, Mask, Primitive};

fuzz_target!(|data: &[u8]| {
    let cfg = Config { capacity: 32, front_slots: 16, max_masks: 8, admit_after: 2, rerank_every: 17, ..Config::default() };
    let mut c = DecisionCache::new(cfg).expect("valid config");
    let mut states = Vec::new();
    let mut rest = data;
    while rest.len() >= 6 {
        let (op, port, a, b, cc, len) = (rest[0], rest[1], rest[2], rest[3], rest[4], usize::from(rest[5]));
        let frame = &rest[6..(6 + len).min(rest.len())];
        rest = &rest[(6 + len).min(rest.len())..];
        let key = HeaderKey::from_frame(frame, u16::from(port));
        if let Some(id) = c.lookup(&key) {
            let mut out = frame.to_vec();
            c.apply(id, &mut out).expect("a hit is live");
            assert_eq!(out.len(), frame.len());
        }
        let mut mask = Mask::new();
        let _ = mask.mark(usize::from(a) * 4, usize::from(b) % 48);
        if op & 1 != 0 {
            mask.mark_ingress();
        }
        if op & 2 != 0 {
            let _ = mask.require_len(usize::from(cc));
        }
        let mut actions = match op >> 6 {
            0 => Actions::drop(),
            1 => Actions::to_controller(),
            2 => Actions::output(u16::from(b)),
            _ => Actions::output_set(&[u16::from(a), u16::from(b), u16::from(cc)]).expect("3 ports"),
        };
        let _ = actions.set_bytes(usize::from(cc), &frame[..frame.len().min(usize::from(b) % 8)]);
        if op & 4 != 0 {
            if let Some(p) = Primitive::ip_ttl_for(frame) {
                actions.push_primitive(p).expect("fits the key");
            }
        }
        if op & 8 != 0 {
            let _ = actions.push_primitive(Primitive::DecrementTtl { ttl_at: a, checksum_at: Some(cc) });
        }
        if op & 16 != 0 {
            if let Ok(s) = c.new_state_id() {
                states.push(s);
            }
        }
        let regs: Vec<_> = states.iter().rev().take(usize::from(op >> 5 & 1) + usize::from(b & 1)).copied().collect();
        let d = Decision { mask, states: regs.into(), actions: actions.clone() };
        if let Ok(Installed::Cached(id)) = c.install(&key, &d) {
            assert_eq!(c.lookup(&key), Some(id));
        }
        let mut out = frame.to_vec();
        let _ = actions.apply(&mut out);
        assert_eq!(out.len(), frame.len());
        if op & 32 != 0 && !states.is_empty() {
            let s = states.remove(usize::from(a) % states.len());
            c.removed(s);
        }
        assert!(c.len() <= 32 && c.masks() <= 8);
    }
});
