//! HKEYS, HVALS and HSTRLEN: like HGETALL, one read of the whole hash at its key's query node, picked apart
//! here. A missing key is an empty hash; a string gets WRONGTYPE.

use super::commands::{Action, Session};
use super::frame::Frame;
use super::frontend::Frontend;
use super::hashes::read_fields;
use bytes::Bytes;

/// HKEYS key: the fields, in the order HGETALL gives them.
pub(super) fn hkeys(args: &mut [Bytes], session: &mut Session, frontend: &Frontend) -> Action {
    read_fields(session, frontend, &args[1], |fields| {
        Frame::Array(fields.into_iter().map(|(field, _)| Frame::Bulk(field)).collect())
    })
}

/// HVALS key: the values, in the same order.
pub(super) fn hvals(args: &mut [Bytes], session: &mut Session, frontend: &Frontend) -> Action {
    read_fields(session, frontend, &args[1], |fields| {
        Frame::Array(fields.into_iter().map(|(_, value)| Frame::Bulk(value)).collect())
    })
}

/// HSTRLEN key field: the length of the field's value, 0 if there is no such field.
pub(super) fn hstrlen(args: &mut [Bytes], session: &mut Session, frontend: &Frontend) -> Action {
    let field = std::mem::take(&mut args[2]);
    read_fields(session, frontend, &args[1], move |fields| {
        let value = fields.iter().find(|(f, _)| *f == field);
        Frame::Integer(value.map_or(0, |(_, v)| v.len() as i64))
    })
}

#[cfg(test)]
mod tests {
    use super::super::commands::Session;
    use super::super::testing::Scripted;
    use super::*;
    use meridian_core::{ErrorKind, Read, Reply, Request};

    fn hash() -> std::sync::Arc<Scripted> {
        let pair =
            |f: &'static str, v: &'static str| (Bytes::from_static(f.as_bytes()), Bytes::from_static(v.as_bytes()));
        Scripted::new(move |_| Reply::Fields(vec![pair("a", "1"), pair("b", "22"), pair("c", "333")]))
    }

    #[tokio::test]
    async fn fields_and_values_come_from_one_read_of_the_hash() {
        let core = hash();
        let mut session = Session::new(1);
        let bulks = |words: &[&str]| Frame::Array(words.iter().map(|w| Frame::bulk(*w)).collect());
        assert_eq!(core.run(&mut session, &["HKEYS", "h"]).await, bulks(&["a", "b", "c"]));
        assert_eq!(core.run(&mut session, &["HVALS", "h"]).await, bulks(&["1", "22", "333"]));
        assert_eq!(core.run(&mut session, &["HSTRLEN", "h", "c"]).await, Frame::Integer(3));
        assert_eq!(core.run(&mut session, &["HSTRLEN", "h", "zz"]).await, Frame::Integer(0));
        assert!(core.asked().iter().all(|r| matches!(r, Request::Get { read: Read::Hash, .. })));
    }

    #[tokio::test]
    async fn a_missing_key_is_empty_and_a_string_refused() {
        let missing = Scripted::new(|_| Reply::Fields(Vec::new()));
        let mut session = Session::new(1);
        assert_eq!(missing.run(&mut session, &["HKEYS", "m"]).await, Frame::Array(Vec::new()));
        assert_eq!(missing.run(&mut session, &["HVALS", "m"]).await, Frame::Array(Vec::new()));
        assert_eq!(missing.run(&mut session, &["HSTRLEN", "m", "f"]).await, Frame::Integer(0));
        let string = Scripted::new(|_| Reply::Error(ErrorKind::WrongType, "wrong kind".into()));
        assert_eq!(string.run(&mut session, &["HKEYS", "s"]).await, Frame::error("WRONGTYPE wrong kind"));
    }
}
