//! One node's replication state for one chain (seed 003 Listing 1: LU, LA, H_unacked).
//!
//! `lu` is the last sequence number this node has logged, `la` the last one the tail has acknowledged,
//! and `unacked` holds exactly the updates `la+1 ..= lu` while the node has a successor, because a
//! successor that lost them (crash, broken connection) must get them again. Invariant: `la ≤ lu`.

use super::msg::Update;
use meridian_core::NodeId;
use std::collections::VecDeque;

#[derive(Debug, Default)]
pub struct Replica {
    pub pred: Option<NodeId>,
    pub succ: Option<NodeId>,
    pub lu: u64,
    pub la: u64,
    /// The watermark last written to the log as an AckMark; recovery drops updates at or below it.
    pub la_logged: u64,
    pub unacked: VecDeque<Update>,
    /// `la` when the last tick ran; no progress across a tick with updates outstanding prompts a Probe.
    pub la_at_tick: u64,
    /// Tick at which this node last asked its predecessor to resend after spotting a gap.
    pub gap_sync_tick: Option<u64>,
}

impl Replica {
    pub fn new(pred: Option<NodeId>, succ: Option<NodeId>) -> Replica {
        Replica { pred, succ, ..Replica::default() }
    }

    pub fn is_tail(&self) -> bool {
        self.succ.is_none()
    }

    /// Logs the next update in sequence; only the caller's durability rules decide when it may leave.
    pub fn record(&mut self, update: Update) {
        debug_assert_eq!(update.seq, self.lu + 1, "updates are logged strictly in sequence");
        self.lu = update.seq;
        if self.is_tail() {
            self.la = self.lu;
        } else {
            self.unacked.push_back(update);
        }
    }

    /// Applies a cumulative acknowledgement; returns true when it moved `la` forward.
    pub fn ack(&mut self, seq: u64) -> bool {
        let seq = seq.min(self.lu);
        if seq <= self.la {
            return false;
        }
        self.la = seq;
        while self.unacked.front().is_some_and(|u| u.seq <= seq) {
            self.unacked.pop_front();
        }
        true
    }

    /// Applies an ack watermark read back from the log. The tail held every seq up to it, so this node
    /// (at or before the tail) logged them all; records at or below it may have been compacted away once
    /// superseded, so the watermark also stands for LU.
    pub fn restore_watermark(&mut self, seq: u64) {
        self.lu = self.lu.max(seq);
        self.ack(seq);
        self.la_logged = self.la_logged.max(seq);
    }

    /// The updates a successor that holds everything up to `lu` is missing, oldest first.
    pub fn missing_after(&self, lu: u64, max: usize) -> impl Iterator<Item = &Update> {
        self.unacked.iter().skip_while(move |u| u.seq <= lu).take(max)
    }

    pub fn check(&self) -> Result<(), String> {
        if self.la > self.lu {
            return Err(format!("LA {} > LU {}", self.la, self.lu));
        }
        if self.is_tail() && (self.la != self.lu || !self.unacked.is_empty()) {
            return Err(format!("tail has unacknowledged history: LA {} LU {}", self.la, self.lu));
        }
        if !self.is_tail() {
            let expected = self.lu - self.la;
            if self.unacked.len() as u64 != expected {
                return Err(format!("{} unacked updates for LA {} LU {}", self.unacked.len(), self.la, self.lu));
            }
            if let Some((i, u)) = self.unacked.iter().enumerate().find(|(i, u)| u.seq != self.la + 1 + *i as u64) {
                return Err(format!("unacked[{i}] has seq {} but LA is {}", u.seq, self.la));
            }
        }
        Ok(())
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::chain::msg::{Change, Outcome};
    use bytes::Bytes;
    use meridian_core::ChainId;

    fn update(seq: u64) -> Update {
        Update {
            chain: ChainId(0),
            seq,
            key: Bytes::from_static(b"k"),
            change: Change::Skip,
            outcome: Outcome::default(),
            origin: None,
        }
    }

    #[test]
    fn acks_trim_history_and_never_pass_lu() {
        let mut r = Replica::new(None, Some(NodeId(2)));
        (1..=5).for_each(|s| r.record(update(s)));
        assert!(r.ack(3));
        assert!(!r.ack(2));
        assert_eq!(r.unacked.front().unwrap().seq, 4);
        assert!(r.ack(99));
        assert_eq!((r.la, r.unacked.len()), (5, 0));
        r.check().unwrap();
    }

    #[test]
    fn missing_after_skips_what_the_successor_has() {
        let mut r = Replica::new(None, Some(NodeId(2)));
        (1..=5).for_each(|s| r.record(update(s)));
        let seqs: Vec<u64> = r.missing_after(2, 2).map(|u| u.seq).collect();
        assert_eq!(seqs, vec![3, 4]);
    }

    #[test]
    fn a_watermark_read_back_stands_for_compacted_records() {
        let mut r = Replica::new(None, Some(NodeId(2)));
        r.record(update(1));
        r.restore_watermark(5);
        assert_eq!((r.lu, r.la, r.la_logged, r.unacked.len()), (5, 5, 5, 0));
        r.record(update(6));
        r.check().unwrap();
    }

    #[test]
    fn tail_acknowledges_as_it_logs() {
        let mut r = Replica::new(Some(NodeId(1)), None);
        r.record(update(1));
        assert_eq!((r.la, r.lu), (1, 1));
        r.check().unwrap();
    }
}
