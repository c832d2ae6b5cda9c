//! A hash value's fields as a datastore keeps them (the data of a [`crate::stored::Kind::Hash`] value): each
//! field and its value as a length (u32, big-endian) and bytes, fields in byte order, so one hash always has
//! one encoding.

use bytes::{BufMut, Bytes, BytesMut};
use std::collections::BTreeMap;

pub type Fields = BTreeMap<Bytes, Bytes>;

pub fn encode(fields: &Fields) -> Bytes {
    let size: usize = fields.iter().map(|(f, v)| 8 + f.len() + v.len()).sum();
    let mut out = BytesMut::with_capacity(size);
    for (field, value) in fields {
        for part in [field, value] {
            out.put_u32(u32::try_from(part.len()).expect("fields and values are bounded by the value limit"));
            out.put_slice(part);
        }
    }
    out.freeze()
}

/// Damaged data that [`decode`] refuses: it ends inside a field.
#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum DamagedHash {
    #[error("a hash's field length is cut short")]
    LengthCutShort,
    #[error("a hash's field is cut short")]
    FieldCutShort,
}

/// The fields of an encoded hash; the parts share `data`'s buffer.
pub fn decode(data: &Bytes) -> Result<Fields, DamagedHash> {
    let mut fields = Fields::new();
    let mut at = 0;
    let part = |at: &mut usize| -> Result<Bytes, DamagedHash> {
        let len = data.get(*at..*at + 4).ok_or(DamagedHash::LengthCutShort)?;
        let len = u32::from_be_bytes(len.try_into().expect("4 bytes")) as usize;
        let start = *at + 4;
        let bytes = data.get(start..start + len).ok_or(DamagedHash::FieldCutShort)?;
        *at = start + len;
        Ok(data.slice_ref(bytes))
    };
    while at < data.len() {
        let field = part(&mut at)?;
        let value = part(&mut at)?;
        fields.insert(field, value);
    }
    Ok(fields)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn fields_round_trip_and_damage_is_refused() {
        let fields: Fields =
            [("b", "2"), ("a", ""), ("", "x")].into_iter().map(|(f, v)| (Bytes::from(f), Bytes::from(v))).collect();
        let data = encode(&fields);
        assert_eq!(decode(&data).unwrap(), fields);
        assert_eq!(decode(&Bytes::new()).unwrap(), Fields::new());
        assert_eq!(decode(&data.slice(..data.len() - 1)), Err(DamagedHash::FieldCutShort));
        assert_eq!(decode(&Bytes::from_static(&[0, 0, 0, 9, b'x'])), Err(DamagedHash::FieldCutShort));
        assert_eq!(decode(&Bytes::from_static(&[0, 0, 1])), Err(DamagedHash::LengthCutShort));
    }
}
