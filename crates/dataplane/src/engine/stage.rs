//! The pipeline trait the engine drives ([`Stage`]) and the output side
//! a stage sends through ([`Outputs`]).

use crate::counters::Counters;
use crate::framebuf::FrameLists;
use crate::ipfwd::{IpDecision, IpPipeline};
use crate::live::TxSocket;
use crate::pipeline::{Decision, Egress, NameTable, Pipeline};

/// The output side of a live run as a stage sees it for one group: the
/// worker's transmit sockets by port and its per-port refusal counts.
/// The engine makes one per group; a stage only sends through it.
pub struct Outputs<'p> {
    pub(crate) outputs: &'p mut [Option<TxSocket>],
    pub(crate) tx_failed: &'p mut Vec<u64>,
}

impl std::fmt::Debug for Outputs<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Outputs")
            .field("ports", &self.outputs.len())
            .finish_non_exhaustive()
    }
}

impl Outputs<'_> {
    /// Count `n` frames for `port` as refused (it has no socket, or no
    /// list: see [`Stage::forward_group`]).
    pub fn refuse(&mut self, port: u16, n: u64) {
        add_failed(self.tx_failed, port, n);
    }

    /// Send `lists[p]` on port `p` for every port with frames (one batched
    /// send each), counting what a port refused or could not send (a port
    /// without a socket refuses every frame), and empty the lists.
    pub fn send_lists(&mut self, lists: &mut [Vec<&[u8]>]) {
        for (p, list) in lists.iter_mut().enumerate() {
            if list.is_empty() {
                continue;
            }
            let n = list.len() as u64;
            let failed = match self.outputs.get_mut(p) {
                Some(Some(tx)) => tx.send_batch(list).failed as u64,
                _ => n,
            };
            if failed > 0 {
                if let Ok(port) = u16::try_from(p) {
                    add_failed(self.tx_failed, port, failed);
                }
            }
            list.clear();
        }
    }
}

/// A forwarding pipeline the engine drives: a batch of frames in, each
/// frame's output ports out (or none: dropped or punted), counters out.
///
/// Implemented by the flat-name [`Pipeline`] (frames are sent straight
/// from the receive buffers) and the [`IpPipeline`] (frames are copied
/// into the stage's scratch buffers, rewritten there and sent from
/// them); an NDN or SDF pipeline plugs in the same way, by choosing one
/// of those two shapes.
///
/// Contract:
/// * One stage per worker; the engine calls it only from that worker's
///   thread (so a stage needs `Send`, not `Sync`), one group of at most
///   [`GROUP`](crate::engine::GROUP) frames at a time, all received on
///   one input port.
/// * A stage does no I/O of its own and never blocks: it decides, counts,
///   and hands frames to [`Outputs`]. It must not panic on any frame
///   (untrusted bytes): malformed frames are counted and dropped.
/// * Every frame of a group is decided with the table the stage held when
///   the group started; the engine's [`Refresh`](crate::engine::Refresh)
///   runs between groups, never during one.
/// * [`Stage::counters`] counts frames in per input port, decisions,
///   drops by reason and frames out per port (copies, whether or not the
///   port then sends them); the engine adds what only the ports know
///   (refused sends, ring drops) in [`PortStats`](crate::live::PortStats).
pub trait Stage {
    /// Buffers kept from one group to the next (decisions, rewritten
    /// copies), so the hot path does not allocate per group.
    type Scratch: Default;
    /// Every port the stage may send on, sorted (the engine warns once
    /// about each that has no transmit socket).
    fn ports(&self) -> &[u16];
    /// The counters so far.
    fn counters(&self) -> &Counters;
    /// Take the counters, leaving zeroed ones.
    fn take_counters(&mut self) -> Counters;
    /// Continue from `counters`.
    fn set_counters(&mut self, counters: Counters);
    /// Decide for one group of frames received on `in_port`, and send
    /// them: either push each frame to be sent unchanged onto
    /// `lists[port]` (one empty list per output port; a port beyond them
    /// is counted with [`Outputs::refuse`]) and then call
    /// [`Outputs::send_lists`] with `lists`, or send frames of the stage's
    /// own (rewritten copies in `scratch`) through
    /// [`Outputs::send_lists`]. `lists` must be left empty (`send_lists`
    /// empties what it sends).
    fn forward_group<'b>(
        &mut self,
        scratch: &mut Self::Scratch,
        in_port: u16,
        group: &[&'b [u8]],
        lists: &mut [Vec<&'b [u8]>],
        out: &mut Outputs<'_>,
    );

    /// No input had frames this round: send what the stage holds back
    /// (an SDF stage's frames whose decision came back from its app
    /// thread). `nout` is the number of output lists a group gets. The
    /// default does nothing.
    fn idle(&mut self, _scratch: &mut Self::Scratch, _nout: usize, _out: &mut Outputs<'_>) {}
}

impl<T: NameTable> Stage for Pipeline<T> {
    type Scratch = Vec<Decision>;

    fn ports(&self) -> &[u16] {
        Pipeline::ports(self)
    }

    fn counters(&self) -> &Counters {
        Pipeline::counters(self)
    }

    fn take_counters(&mut self) -> Counters {
        Pipeline::take_counters(self)
    }

    fn set_counters(&mut self, counters: Counters) {
        Pipeline::set_counters(self, counters)
    }

    fn forward_group<'b>(
        &mut self,
        decisions: &mut Vec<Decision>,
        in_port: u16,
        group: &[&'b [u8]],
        lists: &mut [Vec<&'b [u8]>],
        out: &mut Outputs<'_>,
    ) {
        self.process(in_port, group, decisions);
        for (f, d) in group.iter().zip(decisions.iter()) {
            if let Egress::Ports(ps) = self.egress(d) {
                for &p in ps {
                    match lists.get_mut(usize::from(p)) {
                        Some(list) => list.push(f),
                        None => out.refuse(p, 1),
                    }
                }
            }
        }
        out.send_lists(lists);
    }
}

/// The IP pipeline's buffers: a copy of each frame of the group (rewritten
/// in place), the decisions, and per-port lists over the copies.
#[derive(Default)]
pub struct IpScratch {
    copies: Vec<Vec<u8>>,
    decisions: Vec<IpDecision>,
    lists: FrameLists,
}

impl std::fmt::Debug for IpScratch {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("IpScratch")
            .field("copies", &self.copies.len())
            .finish_non_exhaustive()
    }
}

impl Stage for IpPipeline<'_> {
    type Scratch = IpScratch;

    fn ports(&self) -> &[u16] {
        IpPipeline::ports(self)
    }

    fn counters(&self) -> &Counters {
        IpPipeline::counters(self)
    }

    fn take_counters(&mut self) -> Counters {
        IpPipeline::take_counters(self)
    }

    fn set_counters(&mut self, counters: Counters) {
        IpPipeline::set_counters(self, counters)
    }

    fn forward_group<'b>(
        &mut self,
        scratch: &mut IpScratch,
        in_port: u16,
        group: &[&'b [u8]],
        lists: &mut [Vec<&'b [u8]>],
        out: &mut Outputs<'_>,
    ) {
        let IpScratch {
            copies,
            decisions,
            lists: own,
        } = scratch;
        // Receive buffers are read-only (and a frame may be sent on no
        // port), so each frame is copied and rewritten in the copy. The
        // copies keep their allocations: no allocation once every slot
        // has held a frame as long as this one.
        if copies.len() < group.len() {
            copies.resize_with(group.len(), Vec::new);
        }
        for (c, f) in copies.iter_mut().zip(group) {
            c.clear();
            c.extend_from_slice(f);
        }
        let n = group.len();
        self.process(in_port, &mut copies[..n], decisions);
        let mut per_port = own.take(lists.len());
        for (c, d) in copies[..n].iter().zip(decisions.iter()) {
            if let IpDecision::Forward(p) = *d {
                match per_port.get_mut(usize::from(p)) {
                    Some(list) => list.push(c),
                    None => out.refuse(p, 1),
                }
            }
        }
        out.send_lists(&mut per_port);
        own.put(per_port);
    }
}

/// Count `n` frames refused on `port`.
pub(crate) fn add_failed(tx_failed: &mut Vec<u64>, port: u16, n: u64) {
    let i = usize::from(port);
    if tx_failed.len() <= i {
        tx_failed.resize(i + 1, 0);
    }
    tx_failed[i] += n;
}
