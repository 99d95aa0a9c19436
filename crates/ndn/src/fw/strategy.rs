//! Forwarding strategies (best-route, multicast) and the strategy-choice
//! table that picks one per name prefix by longest-prefix match.
//!
//! The decisions are pure functions of the next hops (sorted by cost, as
//! the FIB stores them), the incoming face, the PIT entry's out-records and
//! `now`; the pipeline in [`super`] applies them.

use std::collections::HashMap;

use crate::name::NameView;
use crate::nexthop::NextHop;
use crate::pit::{FaceId, Millis, OutRecord};

/// A forwarding strategy.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Strategy {
    /// NFD's best-route: the lowest-cost next hop that is not the incoming
    /// face; a retransmission outside the suppression interval goes to an
    /// unused next hop, else to the one used longest ago.
    BestRoute,
    /// NFD's multicast: every next hop except the incoming face.
    Multicast,
}

/// Most prefixes in a strategy-choice table.
pub const MAX_STRATEGY_CHOICES: usize = 1 << 16;

/// A strategy-choice table: prefix (component TLVs) -> strategy, matched
/// by longest prefix; `/` holds the default.
#[derive(Clone, Debug)]
pub struct StrategyChoice {
    default: Strategy,
    map: HashMap<Vec<u8>, (usize, Strategy)>,
    longest: usize,
}

impl StrategyChoice {
    /// A table with only the default strategy (the choice for `/`).
    pub fn new(default: Strategy) -> StrategyChoice {
        StrategyChoice {
            default,
            map: HashMap::new(),
            longest: 0,
        }
    }

    /// Choose `s` for `prefix` and the names under it. Returns false (and
    /// changes nothing) when the table holds [`MAX_STRATEGY_CHOICES`]
    /// prefixes already.
    pub fn set<N: NameView + ?Sized>(&mut self, prefix: &N, s: Strategy) -> bool {
        let k = prefix.component_count();
        if k == 0 {
            self.default = s;
            return true;
        }
        let key = prefix.tlv();
        if !self.map.contains_key(key) && self.map.len() >= MAX_STRATEGY_CHOICES {
            return false;
        }
        self.map.insert(key.to_vec(), (k, s));
        self.longest = self.longest.max(k);
        true
    }

    /// Remove the choice for `prefix` (names under it inherit the next
    /// shorter one). `/` cannot be removed, only set. Returns whether a
    /// choice was removed.
    pub fn unset<N: NameView + ?Sized>(&mut self, prefix: &N) -> bool {
        let removed = self.map.remove(prefix.tlv()).is_some();
        if removed {
            self.longest = self.map.values().map(|&(k, _)| k).max().unwrap_or(0);
        }
        removed
    }

    /// The strategy for `name`: the choice of its longest listed prefix.
    pub fn find<N: NameView + ?Sized>(&self, name: &N) -> Strategy {
        if self.map.is_empty() {
            return self.default;
        }
        let tlv = name.tlv();
        for k in (1..=name.component_count().min(self.longest)).rev() {
            if let Some(&(_, s)) = self.map.get(&tlv[..name.prefix_end(k)]) {
                return s;
            }
        }
        self.default
    }

    /// Prefixes listed besides `/`.
    pub fn len(&self) -> usize {
        self.map.len()
    }

    /// Whether only `/` is set.
    pub fn is_empty(&self) -> bool {
        self.map.is_empty()
    }
}

/// Whether an out-record is still waited on.
fn pending(o: &OutRecord, now: Millis) -> bool {
    !o.nacked && o.expiry > now
}

/// What a strategy decided for an Interest.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub(crate) enum Decision {
    /// Send to these next hops (indices into the next-hop slice).
    Send,
    /// A retransmission inside the suppression interval: nothing sent.
    Suppressed,
    /// No eligible next hop and nothing pending upstream: Nack NoRoute.
    NoRoute,
    /// No eligible next hop but an upstream is still pending: wait.
    Wait,
}

/// Best-route for an Interest from `in_face`: pushes the chosen face to
/// `out` (at most one) and says what happened. `outs` are the entry's
/// out-records before this Interest (empty in core mode).
pub(crate) fn best_route(
    hops: &[NextHop],
    in_face: FaceId,
    outs: &[OutRecord],
    now: Millis,
    suppression_ms: Millis,
    out: &mut Vec<FaceId>,
) -> Decision {
    let eligible = || hops.iter().filter(|h| h.face != in_face);
    if !outs.iter().any(|o| pending(o, now)) {
        // A new Interest (or every upstream answered): the best next hop.
        return match eligible().next() {
            Some(h) => {
                out.push(h.face);
                Decision::Send
            }
            None => Decision::NoRoute,
        };
    }
    // A retransmission (or another consumer's Interest) while upstreams
    // are pending.
    let last = outs.iter().map(|o| o.last_sent).max().unwrap_or(0);
    if now < last.saturating_add(suppression_ms) {
        return Decision::Suppressed;
    }
    let unused = eligible().find(|h| !outs.iter().any(|o| o.face == h.face));
    let pick = unused.or_else(|| {
        eligible().min_by_key(|h| {
            outs.iter()
                .find(|o| o.face == h.face)
                .map_or(0, |o| o.last_sent)
        })
    });
    match pick {
        Some(h) => {
            out.push(h.face);
            Decision::Send
        }
        None => Decision::Wait,
    }
}

/// Multicast for an Interest from `in_face`: pushes every eligible face.
pub(crate) fn multicast(
    hops: &[NextHop],
    in_face: FaceId,
    outs: &[OutRecord],
    now: Millis,
    suppression_ms: Millis,
    out: &mut Vec<FaceId>,
) -> Decision {
    let any_pending = outs.iter().any(|o| pending(o, now));
    if any_pending {
        let last = outs.iter().map(|o| o.last_sent).max().unwrap_or(0);
        if now < last.saturating_add(suppression_ms) {
            return Decision::Suppressed;
        }
    }
    let before = out.len();
    out.extend(hops.iter().filter(|h| h.face != in_face).map(|h| h.face));
    match (out.len() > before, any_pending) {
        (true, _) => Decision::Send,
        (false, true) => Decision::Wait,
        (false, false) => Decision::NoRoute,
    }
}

/// After a Nack from an upstream: best-route tries a next hop that is not
/// a downstream and has no out-record yet (pushed to `out`); multicast
/// tries none.
pub(crate) fn after_nack(
    s: Strategy,
    hops: &[NextHop],
    downstreams: &[FaceId],
    outs: &[OutRecord],
    out: &mut Vec<FaceId>,
) -> bool {
    if s != Strategy::BestRoute {
        return false;
    }
    let h = hops
        .iter()
        .find(|h| !downstreams.contains(&h.face) && !outs.iter().any(|o| o.face == h.face));
    match h {
        Some(h) => {
            out.push(h.face);
            true
        }
        None => false,
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::name::NameBuf;

    fn nh(face: FaceId, cost: u32) -> NextHop {
        NextHop { face, cost }
    }

    fn orec(face: FaceId, last_sent: Millis) -> OutRecord {
        OutRecord {
            face,
            nonce: 1,
            last_sent,
            expiry: last_sent + 4000,
            nacked: false,
            nack_code: 0,
        }
    }

    #[test]
    fn strategy_choice_uses_the_longest_listed_prefix() {
        let mut t = StrategyChoice::new(Strategy::BestRoute);
        let a = NameBuf::from_components(["a"]).unwrap();
        let ab = NameBuf::from_components(["a", "b"]).unwrap();
        let abc = NameBuf::from_components(["a", "b", "c"]).unwrap();
        let x = NameBuf::from_components(["x"]).unwrap();
        assert!(t.set(&a, Strategy::Multicast));
        assert!(t.set(&ab, Strategy::BestRoute));
        assert_eq!(t.find(&abc), Strategy::BestRoute);
        assert_eq!(t.find(&a), Strategy::Multicast);
        assert_eq!(t.find(&x), Strategy::BestRoute);
        assert!(t.unset(&ab));
        assert_eq!(t.find(&abc), Strategy::Multicast);
        assert!(t.set(&NameBuf::root(), Strategy::Multicast));
        assert_eq!(t.find(&x), Strategy::Multicast);
    }

    #[test]
    fn best_route_skips_the_incoming_face_and_suppresses_early_retransmissions() {
        let hops = [nh(1, 10), nh(2, 20), nh(3, 30)];
        let mut out = Vec::new();
        assert_eq!(best_route(&hops, 1, &[], 0, 10, &mut out), Decision::Send);
        assert_eq!(out, [2]);
        out.clear();
        let outs = [orec(2, 100)];
        assert_eq!(
            best_route(&hops, 1, &outs, 105, 10, &mut out),
            Decision::Suppressed
        );
        assert_eq!(
            best_route(&hops, 1, &outs, 110, 10, &mut out),
            Decision::Send
        );
        assert_eq!(out, [3]);
        out.clear();
        let outs = [orec(2, 100), orec(3, 50)];
        assert_eq!(
            best_route(&hops, 1, &outs, 200, 10, &mut out),
            Decision::Send
        );
        assert_eq!(out, [3], "all used: the one used longest ago");
        out.clear();
        assert_eq!(
            best_route(&[nh(1, 1)], 1, &[], 0, 10, &mut out),
            Decision::NoRoute
        );
    }

    #[test]
    fn multicast_sends_to_every_other_face() {
        let hops = [nh(1, 10), nh(2, 20), nh(3, 30)];
        let mut out = Vec::new();
        assert_eq!(multicast(&hops, 2, &[], 0, 10, &mut out), Decision::Send);
        assert_eq!(out, [1, 3]);
        out.clear();
        assert_eq!(
            multicast(&[nh(2, 1)], 2, &[], 0, 10, &mut out),
            Decision::NoRoute
        );
    }
}
