//! The SDF stage in the forwarder engine.

use super::{SdfStage, Sink, Stamp};
use crate::counters::Counters;
use crate::engine::{Outputs, Stage};
use crate::framebuf::FrameLists;

/// An SDF worker's buffers: the frames decided in a group (copies, since
/// an entry may rewrite them and a decision may come back after the
/// receive buffer is gone), each with its output port.
#[derive(Debug, Default)]
pub struct SdfScratch {
    bufs: Vec<Vec<u8>>,
    dests: Vec<u16>,
    used: usize,
    lists: FrameLists,
}

impl Sink for SdfScratch {
    fn emit(&mut self, ports: &[u16], _controller: bool, frame: &[u8], _stamp: Stamp) {
        // Frames for the control port are counted as punted by the stage;
        // live ports have no control port to send them on.
        for &p in ports {
            if self.bufs.len() <= self.used {
                self.bufs.push(Vec::new());
            }
            let b = &mut self.bufs[self.used];
            b.clear();
            b.extend_from_slice(frame);
            self.dests.push(p);
            self.used += 1;
        }
    }
}

impl SdfScratch {
    fn send(&mut self, nout: usize, out: &mut Outputs<'_>) {
        let mut per_port = self.lists.take(nout);
        for (b, &p) in self.bufs[..self.used].iter().zip(&self.dests) {
            match per_port.get_mut(usize::from(p)) {
                Some(list) => list.push(b),
                None => out.refuse(p, 1),
            }
        }
        out.send_lists(&mut per_port);
        self.lists.put(per_port);
        self.used = 0;
        self.dests.clear();
    }
}

impl Stage for SdfStage {
    type Scratch = SdfScratch;

    fn ports(&self) -> &[u16] {
        SdfStage::ports(self)
    }

    fn counters(&self) -> &Counters {
        SdfStage::counters(self)
    }

    fn take_counters(&mut self) -> Counters {
        SdfStage::take_counters(self)
    }

    fn set_counters(&mut self, counters: Counters) {
        SdfStage::set_counters(self, counters)
    }

    fn forward_group<'b>(
        &mut self,
        scratch: &mut SdfScratch,
        in_port: u16,
        group: &[&'b [u8]],
        lists: &mut [Vec<&'b [u8]>],
        out: &mut Outputs<'_>,
    ) {
        self.process(in_port, group, &[], scratch);
        scratch.send(lists.len(), out);
        self.publish_now_and_then();
    }

    fn idle(&mut self, scratch: &mut SdfScratch, nout: usize, out: &mut Outputs<'_>) {
        self.poll(scratch);
        if scratch.used > 0 {
            scratch.send(nout, out);
        }
        self.publish_now_and_then();
    }
}
