//! The live FIB handle of the flat-name pipeline ([`LiveTable`]) and the
//! refresh that swaps a followed table into it ([`swap_in`], [`Follow`]).

use nexthop_othello::fib::ActionTable;
use nexthop_othello::QueryView;

use super::Refresh;
use crate::pipeline::{NameTable, Pipeline};

/// A FIB that someone else keeps up to date (a follower of a controller)
/// and publishes as immutable snapshots: a cheap, cloneable handle (an
/// `Arc`, say) to a name table and the action table its ids index.
///
/// The engine never builds one; the caller's refresh source hands them
/// out (see [`Follow`]). `nexthop-dataplane` does not depend on the crate
/// that makes them: the caller wraps its own handle in a type of its own
/// and implements this trait for it.
pub trait FibSnapshot {
    /// The name table of the snapshot.
    type Names: NameTable + ?Sized;
    /// The name table.
    fn names(&self) -> &Self::Names;
    /// The action table the name table's ids index.
    fn actions(&self) -> &ActionTable;
    /// Whether `other` is this very snapshot (the same allocation, not
    /// merely equal contents): then there is nothing to swap.
    fn same_snapshot(&self, other: &Self) -> bool;
}

/// The table a flat-name pipeline reads in a live run: a FIB directory's
/// mapped snapshot (fixed for the run), a followed snapshot `S` (kept
/// alive by the handle for as long as the pipeline holds it, and replaced
/// by [`swap_in`]), or one fixed action id for every name (the trivial
/// pipeline: no lookup).
#[derive(Debug)]
pub enum LiveTable<'a, S> {
    /// A memory-mapped Concise FIB snapshot.
    Mapped(QueryView<'a>),
    /// A followed snapshot.
    Followed(S),
    /// Every name gets this action id.
    Fixed(u64),
}

impl<S: FibSnapshot> NameTable for LiveTable<'_, S> {
    #[inline]
    fn lookup_batch(&self, names: &[&[u8]], out: &mut [u64]) -> usize {
        match self {
            LiveTable::Mapped(v) => v.lookup_batch(names, out),
            LiveTable::Followed(s) => s.names().lookup_batch(names, out),
            LiveTable::Fixed(id) => {
                out[..names.len()].fill(*id);
                names.len()
            }
        }
    }
}

/// Put `s` into the pipeline unless it is the snapshot already there;
/// rebuild the action resolution when `s`'s action table is another one
/// (a snapshot, or a delta that added actions) or the pipeline held no
/// followed snapshot. Whether it swapped.
///
/// Costs a pointer compare when nothing changed; a swap costs one pass
/// over the action table only when the action table changed.
pub fn swap_in<S: FibSnapshot>(p: &mut Pipeline<LiveTable<'_, S>>, s: S) -> bool {
    let same_actions = match p.table() {
        LiveTable::Followed(cur) if cur.same_snapshot(&s) => return false,
        LiveTable::Followed(cur) => std::ptr::eq(cur.actions(), s.actions()),
        LiveTable::Mapped(_) | LiveTable::Fixed(_) => false,
    };
    if !same_actions {
        p.set_actions(s.actions());
    }
    p.replace_table(LiveTable::Followed(s));
    true
}

/// A [`Refresh`] for flat-name pipelines over a [`LiveTable`]: before each
/// group, ask the source (`.0`) for its current snapshot and
/// [`swap_in`] what it returns (`None`: no table yet, keep the one held).
///
/// The source runs on every worker thread, before every group: it must
/// be cheap and `Sync` (an atomic load of an `Arc`, say).
///
/// ```
/// use std::sync::{Arc, Mutex};
/// use nexthop_dataplane::engine::{FibSnapshot, Follow, LiveTable, Refresh};
/// use nexthop_dataplane::{Pipeline, PipelineConfig};
/// use nexthop_othello::fib::{Action, ActionTable, ConciseFib, KeyType};
/// use nexthop_othello::{Config, Query};
///
/// /// The caller's snapshot handle.
/// #[derive(Clone)]
/// struct Snap(Arc<(Query, ActionTable)>);
/// impl FibSnapshot for Snap {
///     type Names = Query;
///     fn names(&self) -> &Query { &self.0 .0 }
///     fn actions(&self) -> &ActionTable { &self.0 .1 }
///     fn same_snapshot(&self, o: &Self) -> bool { Arc::ptr_eq(&self.0, &o.0) }
/// }
/// let snap = |port| -> Result<Snap, Box<dyn std::error::Error>> {
///     let fib = ConciseFib::build(Config::default(), &[(1, [2u8, 0, 0, 0, 0, 1], Action::Port(port))])?;
///     Ok(Snap(Arc::new((fib.othello().export(0), fib.action_table().clone()))))
/// };
/// let first = snap(1)?;
/// let mut p = Pipeline::new(
///     LiveTable::Followed(first.clone()),
///     first.actions(),
///     KeyType::Mac,
///     PipelineConfig::default(),
/// )?;
/// let published = Mutex::new(first);
/// let follow = Follow(|| Some(published.lock().unwrap().clone()));
/// assert!(!follow.refresh(&mut p), "the same snapshot: nothing to swap");
/// *published.lock().unwrap() = snap(2)?;
/// assert!(follow.refresh(&mut p));
/// assert_eq!(p.ports(), [2]);
/// # Ok::<(), Box<dyn std::error::Error>>(())
/// ```
#[derive(Clone, Copy, Debug)]
pub struct Follow<F>(pub F);

impl<'a, S, F> Refresh<Pipeline<LiveTable<'a, S>>> for Follow<F>
where
    S: FibSnapshot,
    F: Fn() -> Option<S> + Sync,
{
    fn refresh(&self, pipeline: &mut Pipeline<LiveTable<'a, S>>) -> bool {
        match (self.0)() {
            Some(s) => swap_in(pipeline, s),
            None => false,
        }
    }
}
