//! The tail's put answers and its acknowledgements upstream (seed 003 §2.4: "with multiple front-ends, tails
//! wait for the front-end's ack of put responses before acking up the chain; after front-end failover the
//! tail resends unacknowledged put responses").
//!
//! Every node is a front-end, so an answer crosses the network from the tail to the front-end that took the
//! request, and can be lost there with a broken connection. The tail therefore keeps each put answer until its
//! front-end confirms it, resends it every tick meanwhile, and acknowledges upstream only below the oldest
//! answer still unconfirmed. If the tail fails before the confirmation, its predecessor still holds the update
//! (unacknowledged) and, as the new tail, answers it again. A front-end that has given up on a request (its
//! timeout) confirms whatever arrives for it, and the tail gives an answer up once the request timeout has
//! passed, so neither keeps anything forever. Answers to the tail's own front-end need no round trip.
//!
//! An answer leaves only while the tail holds its lease (`lease.rs`) and only after the update is durable.

use super::msg::{ChainMsg, Origin};
use super::replica::Unconfirmed;
use super::{ChainStep, Fx};
use meridian_core::{ChainId, NodeId, Reply, Time};

use super::PlantedBug;

impl ChainStep<'_> {
    /// Answers update `seq` of `chain`, just committed here at the tail. An answer to this node's own
    /// front-end needs no confirmation, so when the lease allows it leaves at once without being recorded (the
    /// common case of a single-node chain, and most of its cost per write otherwise); any other answer is
    /// recorded and sent with those still owed.
    pub(super) fn answer_committed(
        &mut self,
        now: Time,
        chain: ChainId,
        seq: u64,
        origin: Origin,
        reply: Reply,
        out: &mut Fx,
    ) {
        let r = &self.s.replicas[&chain];
        if origin.node != self.s.me || !self.s.lease_ok(chain, r, now) {
            self.owe_answer(chain, seq, origin, reply);
            return self.send_answers(now, chain, out);
        }
        let owed = !r.unconfirmed.is_empty();
        if let Some(id) = self.host.requests.complete(&origin) {
            out.reply_after_sync(id, reply);
        }
        if owed {
            self.send_answers(now, chain, out);
        }
    }

    /// Records the answer owed for update `seq` of `chain`.
    pub(super) fn owe_answer(&mut self, chain: ChainId, seq: u64, origin: Origin, reply: Reply) {
        let since = self.host.tick;
        let r = self.s.replicas.get_mut(&chain).expect("the tail holds the chain");
        r.unconfirmed.insert(seq, Unconfirmed { origin, reply, since, sent: None });
    }

    /// Sends the answers not sent yet, if the lease allows: local ones are complete at once, remote ones wait
    /// for their front-end's confirmation.
    pub(super) fn send_answers(&mut self, now: Time, chain: ChainId, out: &mut Fx) {
        let Some(r) = self.s.replicas.get(&chain) else { return };
        if !self.s.lease_ok(chain, r, now) {
            return;
        }
        let due: Vec<u64> = r.unconfirmed.iter().filter(|(_, a)| a.sent.is_none()).map(|(&s, _)| s).collect();
        for seq in due {
            self.send_answer(chain, seq, out);
        }
    }

    fn send_answer(&mut self, chain: ChainId, seq: u64, out: &mut Fx) {
        let (me, tick) = (self.s.me, self.host.tick);
        let r = self.s.replicas.get_mut(&chain).expect("the tail holds the chain");
        let a = r.unconfirmed.get_mut(&seq).expect("listed");
        let (origin, reply) = (a.origin, a.reply.clone());
        if origin.node == me {
            r.unconfirmed.remove(&seq);
            if let Some(id) = self.host.requests.complete(&origin) {
                out.reply_after_sync(id, reply);
            }
            return;
        }
        a.sent = Some(tick);
        let msg = ChainMsg::Reply { origin, reply, confirm: Some((chain, seq)) };
        if self.durable_first() {
            out.send_after_sync(origin.node, msg);
        } else {
            out.send(origin.node, msg);
        }
    }

    /// Acknowledges upstream everything below the oldest unconfirmed answer, if that moved.
    pub(super) fn ack_upstream(&mut self, chain: ChainId, out: &mut Fx) {
        let durable_first = self.durable_first();
        let Some(r) = self.s.replicas.get_mut(&chain).filter(|r| r.is_tail()) else { return };
        let point = r.upstream_la();
        let (Some(pred), Some(view)) = (r.pred(), r.view()) else { return };
        if point <= r.acked_up {
            return;
        }
        r.acked_up = point;
        let ack = ChainMsg::Ack { chain, view, seq: point };
        if durable_first {
            out.send_after_sync(pred, ack);
        } else {
            out.send(pred, ack);
        }
    }

    /// A front-end confirmed the answer to update `seq`.
    pub(super) fn on_confirm(&mut self, from: NodeId, chain: ChainId, seq: u64, out: &mut Fx) {
        let Some(r) = self.s.replicas.get_mut(&chain) else { return };
        if r.unconfirmed.get(&seq).is_some_and(|a| a.origin.node == from) {
            r.unconfirmed.remove(&seq);
            self.ack_upstream(chain, out);
        }
    }

    /// Every tick: gives up answers whose front-end has timed out, resends the others not yet confirmed, sends
    /// what waited for a lease, and acknowledges upstream what that released.
    pub(super) fn tend_answers(&mut self, now: Time, out: &mut Fx) {
        let (tick, timeout, max) = (self.host.tick, self.host.cfg.timeout_ticks(), self.s.cfg.resend_max);
        let tails: Vec<ChainId> =
            self.s.replicas.iter().filter(|(_, r)| r.is_active() && r.is_tail()).map(|(&c, _)| c).collect();
        for chain in tails {
            let r = self.s.replicas.get_mut(&chain).expect("listed");
            r.unconfirmed.retain(|_, a| tick.saturating_sub(a.since) <= timeout);
            let stale: Vec<u64> = r
                .unconfirmed
                .iter()
                .filter(|(_, a)| a.sent.is_some_and(|t| t < tick))
                .map(|(&s, _)| s)
                .take(max)
                .collect();
            if self.s.lease_ok(chain, &self.s.replicas[&chain], now) {
                stale.into_iter().for_each(|seq| self.send_answer(chain, seq, out));
            }
            self.send_answers(now, chain, out);
            self.ack_upstream(chain, out);
        }
    }

    /// Whether answers and acknowledgements wait for the update to be durable (always, but for a planted bug).
    fn durable_first(&self) -> bool {
        !self.s.planted(PlantedBug::TailAcksEarly)
    }
}
