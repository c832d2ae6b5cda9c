//! What crosses the wire between manager replicas, and how Meridian node ids map to raft ids.

use std::fmt;

use meridian_core::NodeId;
use protobuf::Message as _;
use raft::eraftpb::Message;
use serde::{Deserialize, Serialize};

/// A raft-rs message, protobuf-encoded. Our wire speaks serde + postcard and raft-rs speaks protobuf, so the
/// message travels as opaque bytes and is decoded only by the receiving [`super::RaftCore`], which reports
/// undecodable bytes as an error instead of panicking.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct RaftMsg(pub(super) Vec<u8>);

impl RaftMsg {
    pub(super) fn encode(msg: &Message) -> RaftMsg {
        RaftMsg(msg.write_to_bytes().expect("proto3 messages without required fields always encode"))
    }

    pub(super) fn decode(&self) -> Result<Message, String> {
        Message::parse_from_bytes(&self.0).map_err(|e| e.to_string())
    }

    /// Encoded size, for bounding queues and batches.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// Shows the decoded header, which is what a trace reader wants; the bytes themselves say nothing.
impl fmt::Debug for RaftMsg {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        match self.decode() {
            Ok(m) => write!(
                f,
                "RaftMsg({:?} {}→{} term {} index {} entries {} commit {})",
                m.get_msg_type(),
                m.from,
                m.to,
                m.term,
                m.index,
                m.entries.len(),
                m.commit
            ),
            Err(e) => write!(f, "RaftMsg(undecodable, {} bytes: {e})", self.0.len()),
        }
    }
}

/// raft-rs reserves id 0 for "nobody", so node `n` is raft peer `n + 1`; every `NodeId` has a raft id.
pub(super) fn raft_id(node: NodeId) -> u64 {
    u64::from(node.0) + 1
}

/// The node behind a raft id; `None` for 0 ("nobody") and for ids no `NodeId` maps to.
pub(super) fn node_id(raft_id: u64) -> Option<NodeId> {
    raft_id.checked_sub(1).and_then(|n| u32::try_from(n).ok()).map(NodeId)
}

#[cfg(test)]
mod tests {
    use super::*;
    use raft::eraftpb::MessageType;

    #[test]
    fn ids_map_both_ways_and_zero_is_nobody() {
        for n in [0, 1, 7, u32::MAX] {
            assert_eq!(node_id(raft_id(NodeId(n))), Some(NodeId(n)));
        }
        assert_eq!(node_id(0), None);
        assert_eq!(node_id(u64::from(u32::MAX) + 2), None);
    }

    #[test]
    fn messages_survive_postcard_and_garbage_is_an_error() {
        let m = Message { msg_type: MessageType::MsgHeartbeat, from: 2, to: 3, term: 9, ..Message::default() };
        let wire = postcard::to_stdvec(&RaftMsg::encode(&m)).unwrap();
        let back: RaftMsg = postcard::from_bytes(&wire).unwrap();
        assert_eq!(back.decode().unwrap(), m);
        assert!(format!("{back:?}").contains("MsgHeartbeat"));
        assert!(RaftMsg(vec![0xff; 7]).decode().is_err());
    }
}
