use super::*;
use crate::cache::Config;

/// An app driven by a closure, for testing single API calls.
struct Fn<F>(F);

impl<F> App for Fn<F>
where
    F: FnMut(&mut InPkt, &mut Control<'_>) -> Result<(), AppError> + Send,
{
    fn name(&self) -> &str {
        "test"
    }

    fn on_packet(&mut self, pkt: &mut InPkt, ctl: &mut Control<'_>) -> Result<(), AppError> {
        (self.0)(pkt, ctl)
    }
}

fn switch<F>(f: F) -> Switch<Fn<F>>
where
    F: FnMut(&mut InPkt, &mut Control<'_>) -> Result<(), AppError> + Send,
{
    Switch::new(
        Fn(f),
        Config::default(),
        Ports::physical(&[0, 1, 2, 3]),
        true,
    )
    .unwrap()
}

fn frame(first: u8) -> Vec<u8> {
    let mut f = vec![0u8; 60];
    f[0] = first;
    f
}

#[test]
fn marked_decision_is_cached_and_answers_matching_packets() {
    let mut sw = switch(|pkt, _| {
        let b = pkt.field(0, 8)?;
        let mut out = pkt.new_out_pkt();
        out.add_destination(if b == 1 { 1 } else { 2 });
        pkt.send(out, true)?;
        Ok(())
    });
    let e = sw.process(0, &frame(1));
    assert_eq!(e.len(), 1);
    assert_eq!(e[0].ports.as_slice(), &[1]);
    let mut other = frame(1);
    other[30] = 9;
    let e = sw.process(3, &other);
    assert_eq!(e[0].ports.as_slice(), &[1]);
    assert_eq!(e[0].bytes, other);
    assert_eq!(sw.counters().hits, 1);
    assert_eq!(sw.counters().misses, 1);
    assert_eq!(sw.process(0, &frame(5))[0].ports.as_slice(), &[2]);
    assert_eq!(sw.counters().misses, 2);
}

#[test]
fn decision_without_marks_or_state_is_not_cached() {
    let mut sw = switch(|pkt, _| {
        let mut out = OutPkt::raw(pkt.data().to_vec());
        out.add_destination(1);
        pkt.send(out, true)?;
        Ok(())
    });
    for _ in 0..3 {
        assert_eq!(sw.process(0, &frame(1)).len(), 1);
    }
    assert_eq!(sw.counters().misses, 3);
    assert_eq!(sw.cache().len(), 0);
    // A derived out-packet with no marks is not cached either.
    let mut sw = switch(|pkt, _| {
        let mut out = pkt.new_out_pkt();
        out.add_destination(1);
        pkt.send(out, true)?;
        Ok(())
    });
    for _ in 0..3 {
        sw.process(0, &frame(1));
    }
    assert_eq!(sw.counters().misses, 3);
    assert_eq!(sw.stats().cache.not_cached_no_deps, 3);
}

#[test]
fn registered_state_removed_revokes_the_entry() {
    use std::sync::{Arc, Mutex};
    let shared: Arc<Mutex<Option<StateId>>> = Arc::default();
    let seen = shared.clone();
    let mut sw = switch(move |pkt, ctl| {
        let mut slot = seen.lock().unwrap();
        let s = match *slot {
            Some(s) => s,
            _ => {
                let s = ctl.new_state_id()?;
                *slot = Some(s);
                s
            }
        };
        pkt.mark(0, 8)?;
        let mut out = pkt.new_out_pkt();
        out.register(s);
        out.add_destination(2);
        pkt.send(out, true)?;
        Ok(())
    });
    sw.process(0, &frame(1));
    sw.process(0, &frame(1));
    assert_eq!(sw.counters().hits, 1);
    let id = shared.lock().unwrap().unwrap();
    assert_eq!(sw.control().removed(id), 1);
    assert_eq!(sw.cache().len(), 0);
    // The app keeps using the dead id: its decisions are stale, not cached.
    sw.process(0, &frame(1));
    sw.process(0, &frame(1));
    assert_eq!(sw.counters().misses, 3);
    assert_eq!(sw.stats().cache.not_cached_stale, 2);
}

#[test]
fn mark_beyond_header_and_unknown_port_are_counted_drops() {
    let mut sw = switch(|pkt, _| {
        pkt.mark(0, 8 * 61)?;
        Ok(())
    });
    assert!(sw.process(0, &frame(1)).is_empty());
    assert_eq!(sw.stats().app.drops.get(DropReason::MarkBeyondHeader), 1);
    // Ignoring the error does not help.
    let mut sw = switch(|pkt, _| {
        let _ = pkt.mark(8 * 200, 8);
        let mut out = pkt.new_out_pkt();
        out.add_destination(1);
        pkt.send(out, true)?;
        Ok(())
    });
    assert!(sw.process(0, &frame(1)).is_empty());
    assert_eq!(sw.stats().app.drops.get(DropReason::MarkBeyondHeader), 1);
    let mut sw = switch(|pkt, _| {
        pkt.mark(0, 8)?;
        let mut out = pkt.new_out_pkt();
        out.add_destination(77);
        pkt.send(out, true)?;
        Ok(())
    });
    assert!(sw.process(0, &frame(1)).is_empty());
    assert!(sw.process(0, &frame(1)).is_empty());
    assert_eq!(sw.stats().app.drops.get(DropReason::UnknownPort), 2);
    assert_eq!(sw.cache().len(), 0);
}

#[test]
fn app_error_and_panic_are_counted_drops() {
    let mut sw = switch(|pkt, _| {
        if pkt.data()[0] == 1 {
            return Err(AppError("no".into()));
        }
        panic!("app bug");
    });
    assert!(sw.process(0, &frame(1)).is_empty());
    assert!(sw.process(0, &frame(2)).is_empty());
    let s = sw.stats().app;
    assert_eq!(s.drops.get(DropReason::AppError), 1);
    assert_eq!(s.drops.get(DropReason::AppPanic), 1);
    assert_eq!(s.app_calls, 2);
}

#[test]
fn send_after_final_is_refused_and_multiple_outputs_merge() {
    let mut sw = switch(|pkt, _| {
        pkt.mark(0, 8)?;
        let mut a = pkt.new_out_pkt();
        a.add_destination(1);
        pkt.send(a, false)?;
        let mut b = pkt.new_out_pkt();
        b.add_destination(3);
        pkt.send(b, true)?;
        assert_eq!(
            pkt.send(pkt.new_out_pkt(), true),
            Err(ApiError::AlreadyFinal)
        );
        Ok(())
    });
    assert_eq!(sw.process(0, &frame(1)).len(), 2);
    let hit = sw.process(0, &frame(1));
    assert_eq!(hit.len(), 1);
    assert_eq!(hit[0].ports.as_slice(), &[1, 3]);
}

#[test]
fn different_rewrites_per_output_are_sent_but_not_cached() {
    let mut sw = switch(|pkt, _| {
        pkt.mark(0, 8)?;
        let mut a = pkt.new_out_pkt();
        a.set_bytes(1, &[0xaa])?;
        a.add_destination(1);
        pkt.send(a, false)?;
        let mut b = pkt.new_out_pkt();
        b.set_bytes(1, &[0xbb])?;
        b.add_destination(2);
        pkt.send(b, true)?;
        Ok(())
    });
    let e = sw.process(0, &frame(1));
    assert_eq!(e.len(), 2);
    assert_eq!(e[0].bytes[1], 0xaa);
    assert_eq!(e[1].bytes[1], 0xbb);
    assert_eq!(sw.cache().len(), 0);
    assert_eq!(sw.stats().app.uncacheable, 1);
}

#[test]
fn rewrites_and_ttl_primitive_apply_on_miss_and_on_hit() {
    // An IPv4 frame: Ethernet, then a 20-byte header with TTL 64.
    let mut f = vec![0u8; 60];
    f[12] = 0x08;
    f[14] = 0x45;
    f[22] = 64;
    f[24..26].copy_from_slice(&[0x12, 0x34]);
    let mut sw = switch(|pkt, _| {
        pkt.mark(0, 48)?;
        pkt.mark(12 * 8, 16)?;
        pkt.mark(14 * 8, 4)?;
        let p = Primitive::ip_ttl_for(pkt.data()).ok_or(AppError("not ip".into()))?;
        let mut out = pkt.new_out_pkt();
        out.set_bytes(6, &[2, 0, 0, 0, 0, 9])?;
        out.push_primitive(p)?;
        out.add_destination(1);
        pkt.send(out, true)?;
        Ok(())
    });
    let miss = sw.process(0, &f);
    let hit = sw.process(0, &f);
    assert_eq!(miss, hit);
    assert_eq!(miss[0].bytes[22], 63);
    assert_eq!(&miss[0].bytes[6..12], &[2, 0, 0, 0, 0, 9]);
    f[22] = 1;
    assert!(sw.process(0, &f).is_empty());
    assert_eq!(sw.counters().hit_drops.get(DropReason::TtlExpired), 1);
}

#[test]
fn ports_properties_and_tunnels() {
    let mut sw = switch(|_, _| Ok(()));
    let mut ctl = sw.control();
    assert_eq!(ctl.get_ports(), [0, 1, 2, 3]);
    let t = ctl.add_port(PortKind::Tunnel).unwrap();
    assert_eq!(t, 4);
    ctl.set_properties(t, "remote", "10.0.0.2").unwrap();
    assert_eq!(ctl.get_properties(t).unwrap()["remote"], "10.0.0.2");
    assert_eq!(
        ctl.set_properties(9, "a", "b"),
        Err(ApiError::UnknownPort(9))
    );
    ctl.del_port(t).unwrap();
    assert_eq!(ctl.del_port(t), Err(ApiError::UnknownPort(t)));
    assert_eq!(ctl.get_ports(), [0, 1, 2, 3]);
    for i in 0..MAX_PROPERTIES {
        ctl.set_properties(0, &format!("k{i}"), "v").unwrap();
    }
    assert_eq!(
        ctl.set_properties(0, "one-more", "v"),
        Err(ApiError::TooMany("properties"))
    );
}

#[test]
fn proactive_decision_is_installed_without_sending() {
    let mut sw = switch(|_, _| Err(AppError("the app is never asked".into())));
    let mut ctl = sw.control();
    let id = ctl.new_state_id().unwrap();
    let mut pkt = ctl.new_in_pkt(0, frame(7));
    pkt.mark(0, 8).unwrap();
    let mut out = pkt.new_out_pkt();
    out.add_destination(3);
    out.register(id);
    pkt.send(out, true).unwrap();
    assert_eq!(ctl.push(pkt), Ok(true));
    let mut other = frame(7);
    other[40] = 1;
    let e = sw.process(2, &other);
    assert_eq!(e[0].ports.as_slice(), &[3]);
    assert_eq!(sw.stats().app.app_calls, 0);
    // A proactive decision to a port that does not exist is refused.
    let mut ctl = sw.control();
    let mut pkt = ctl.new_in_pkt(0, frame(8));
    pkt.mark(0, 8).unwrap();
    let mut out = pkt.new_out_pkt();
    out.add_destination(99);
    pkt.send(out, true).unwrap();
    assert_eq!(ctl.push(pkt), Err(ApiError::UnknownPort(99)));
}

#[test]
fn decide_into_a_reused_reply_answers_as_a_fresh_decide() {
    // Frame byte 0 picks the app's answer: cacheable with a state, a
    // rewrite and two ports; an error; not cacheable (two outputs with
    // different rewrites); cacheable with one mark, one port and nothing
    // else. Each kind follows each other kind in one reused `Reply`, so a
    // leftover of any earlier decision (ports, rewrites, ids, emits, drop,
    // message) would show.
    let mut id = None;
    let mut app = Fn(move |pkt: &mut InPkt, ctl: &mut Control<'_>| {
        let s = match id {
            Some(s) => s,
            None => *id.insert(ctl.new_state_id().unwrap()),
        };
        match pkt.field(0, 8)? {
            1 => {
                let mut out = pkt.new_out_pkt();
                out.add_destination(1);
                out.add_destination(2);
                out.register(s);
                out.set_bytes(20, &[9, 9])?;
                pkt.send(out, true)?;
            }
            2 => return Err(AppError("no".into())),
            3 => {
                let mut a = pkt.new_out_pkt();
                a.add_destination(1);
                a.set_bytes(20, &[1])?;
                pkt.send(a, false)?;
                let mut b = pkt.new_out_pkt();
                b.add_destination(2);
                pkt.send(b, true)?;
            }
            _ => {
                pkt.field(8, 8)?;
                let mut out = pkt.new_out_pkt();
                out.add_destination(0);
                pkt.send(out, true)?;
            }
        }
        Ok(())
    });
    let cache = Mutex::new(DecisionCache::new(Config::default()).unwrap());
    let mut ports = Ports::physical(&[0, 1, 2, 3]);
    let mut counters = AppCounters::default();
    let mut reused = Reply::default();
    let kinds = [1u8, 2, 3, 4, 1, 3, 2, 4, 4, 1, 1, 4, 2, 2, 3, 3, 1];
    for &k in &kinds {
        let mut ctl = Control::shared(&cache, &mut ports, &mut counters, Duration::ZERO);
        let fresh = decide(&mut app, &mut ctl, frame(k), 0);
        decide_into(&mut app, &mut ctl, frame(k), 0, &mut reused);
        assert_eq!(reused.emits, fresh.emits, "kind {k}");
        assert_eq!(reused.decision, fresh.decision, "kind {k}");
        assert_eq!(reused.drop, fresh.drop, "kind {k}");
        assert_eq!(reused.message, fresh.message, "kind {k}");
        assert_eq!(reused.bad_port, fresh.bad_port, "kind {k}");
        match k {
            1 => {
                let d = reused.decision.as_ref().expect("cacheable");
                assert_eq!(d.actions.ports(), &[1, 2]);
                assert_eq!(d.states.len(), 1);
                assert_eq!(d.actions.rewrites().len(), 1);
            }
            2 => assert_eq!(reused.drop, Some(DropReason::AppError)),
            3 => {
                assert!(reused.decision.is_none());
                assert_eq!(reused.emits.len(), 2);
            }
            _ => {
                let d = reused.decision.as_ref().expect("cacheable");
                assert_eq!(d.actions.ports(), &[0]);
                assert!(d.states.is_empty() && d.actions.rewrites().is_empty());
            }
        }
    }
}
