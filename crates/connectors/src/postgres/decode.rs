//! A decoder for the `pgoutput` logical replication protocol, version 1, text format.
//!
//! Begin and Commit messages are decoded by the transport (`pgwire-replication` hands them
//! over as their own events); this module decodes everything else a v1 stream carries:
//! Relation, Type, Insert, Update, Delete, Truncate, Origin and (transactional) Message.
//! Values stay in their text form, borrowed from the message (no copy per column):
//! [`super::mapping`] turns them into Connect values.

use std::fmt;

/// What pgoutput sends for one column of a tuple.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum Datum<'a> {
    Null,
    /// A TOASTed value that did not change and was not sent.
    UnchangedToast,
    Text(&'a str),
}

/// One column of a Relation message.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct RelationColumn {
    /// Part of the replica identity key.
    pub key: bool,
    pub name: String,
    pub type_oid: u32,
    pub type_modifier: i32,
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Relation {
    pub oid: u32,
    pub namespace: String,
    pub name: String,
    /// `d` default, `n` nothing, `f` full, `i` index.
    pub replica_identity: u8,
    pub columns: Vec<RelationColumn>,
}

/// The old row of an Update or Delete: the key columns only, or the whole row.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum OldTuple<'a> {
    Key(Vec<Datum<'a>>),
    Full(Vec<Datum<'a>>),
}

impl<'a> OldTuple<'a> {
    pub fn datums(&self) -> &[Datum<'a>] {
        match self {
            OldTuple::Key(d) | OldTuple::Full(d) => d,
        }
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Message<'a> {
    Relation(Relation),
    Type {
        oid: u32,
        namespace: String,
        name: String,
    },
    Insert {
        relation: u32,
        new: Vec<Datum<'a>>,
    },
    Update {
        relation: u32,
        old: Option<OldTuple<'a>>,
        new: Vec<Datum<'a>>,
    },
    Delete {
        relation: u32,
        old: OldTuple<'a>,
    },
    Truncate {
        relations: Vec<u32>,
        cascade: bool,
        restart_identity: bool,
    },
    Origin,
    /// `pg_logical_emit_message` content; not turned into records.
    Emitted,
    /// Begin/Commit when they reach the decoder anyway (the transport normally takes them).
    Boundary,
}

impl Message<'_> {
    /// True for the messages that are row changes.
    pub fn is_change(&self) -> bool {
        matches!(self, Message::Insert { .. } | Message::Update { .. } | Message::Delete { .. } | Message::Truncate { .. })
    }
}

#[derive(Debug, Clone, PartialEq, Eq)]
pub struct DecodeError(String);

impl fmt::Display for DecodeError {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "malformed pgoutput message: {}", self.0)
    }
}

impl std::error::Error for DecodeError {}

struct Reader<'a> {
    buf: &'a [u8],
}

impl<'a> Reader<'a> {
    fn take(&mut self, n: usize, what: &str) -> Result<&'a [u8], DecodeError> {
        if self.buf.len() < n {
            return Err(DecodeError(format!("truncated {what}: need {n} bytes, have {}", self.buf.len())));
        }
        let (head, tail) = self.buf.split_at(n);
        self.buf = tail;
        Ok(head)
    }

    fn u8(&mut self, what: &str) -> Result<u8, DecodeError> {
        Ok(self.take(1, what)?[0])
    }

    fn i16(&mut self, what: &str) -> Result<i16, DecodeError> {
        Ok(i16::from_be_bytes(self.take(2, what)?.try_into().expect("2 bytes")))
    }

    fn i32(&mut self, what: &str) -> Result<i32, DecodeError> {
        Ok(i32::from_be_bytes(self.take(4, what)?.try_into().expect("4 bytes")))
    }

    fn u32(&mut self, what: &str) -> Result<u32, DecodeError> {
        Ok(u32::from_be_bytes(self.take(4, what)?.try_into().expect("4 bytes")))
    }

    fn cstr(&mut self, what: &str) -> Result<String, DecodeError> {
        let end = self.buf.iter().position(|b| *b == 0).ok_or_else(|| DecodeError(format!("unterminated {what}")))?;
        let s = String::from_utf8(self.buf[..end].to_vec()).map_err(|_| DecodeError(format!("{what} is not UTF-8")))?;
        self.buf = &self.buf[end + 1..];
        Ok(s)
    }

    fn tuple(&mut self) -> Result<Vec<Datum<'a>>, DecodeError> {
        let n = self.i16("tuple column count")?;
        let mut out = Vec::with_capacity(n.max(0) as usize);
        for _ in 0..n {
            let datum = match self.u8("tuple column kind")? {
                b'n' => Datum::Null,
                b'u' => Datum::UnchangedToast,
                b't' => {
                    let len = self.i32("text length")?;
                    let bytes = self.take(len.max(0) as usize, "text value")?;
                    Datum::Text(std::str::from_utf8(bytes).map_err(|_| DecodeError("text value is not UTF-8".into()))?)
                }
                b'b' => return Err(DecodeError("binary tuple values are not requested by this connector".into())),
                other => return Err(DecodeError(format!("unknown tuple column kind {:?}", other as char))),
            };
            out.push(datum);
        }
        Ok(out)
    }
}

/// Decodes one pgoutput message (the payload of an XLogData).
pub fn decode(payload: &[u8]) -> Result<Message<'_>, DecodeError> {
    let mut r = Reader { buf: payload };
    let tag = r.u8("message tag")?;
    Ok(match tag {
        b'R' => {
            let oid = r.u32("relation oid")?;
            let namespace = r.cstr("namespace")?;
            let name = r.cstr("relation name")?;
            let replica_identity = r.u8("replica identity")?;
            let n = r.i16("column count")?;
            let mut columns = Vec::with_capacity(n.max(0) as usize);
            for _ in 0..n {
                let flags = r.u8("column flags")?;
                let name = r.cstr("column name")?;
                let type_oid = r.u32("column type")?;
                let type_modifier = r.i32("column type modifier")?;
                columns.push(RelationColumn { key: flags & 1 == 1, name, type_oid, type_modifier });
            }
            Message::Relation(Relation { oid, namespace, name, replica_identity, columns })
        }
        b'Y' => {
            let oid = r.u32("type oid")?;
            let namespace = r.cstr("type namespace")?;
            let name = r.cstr("type name")?;
            Message::Type { oid, namespace, name }
        }
        b'I' => {
            let relation = r.u32("relation oid")?;
            expect(&mut r, b'N')?;
            Message::Insert { relation, new: r.tuple()? }
        }
        b'U' => {
            let relation = r.u32("relation oid")?;
            let mut old = None;
            let mut kind = r.u8("update tuple kind")?;
            if kind == b'K' || kind == b'O' {
                let tuple = r.tuple()?;
                old = Some(if kind == b'K' { OldTuple::Key(tuple) } else { OldTuple::Full(tuple) });
                kind = r.u8("update new tuple kind")?;
            }
            if kind != b'N' {
                return Err(DecodeError(format!("update without new tuple (got {:?})", kind as char)));
            }
            Message::Update { relation, old, new: r.tuple()? }
        }
        b'D' => {
            let relation = r.u32("relation oid")?;
            let kind = r.u8("delete tuple kind")?;
            let tuple = r.tuple()?;
            let old = match kind {
                b'K' => OldTuple::Key(tuple),
                b'O' => OldTuple::Full(tuple),
                other => return Err(DecodeError(format!("delete with tuple kind {:?}", other as char))),
            };
            Message::Delete { relation, old }
        }
        b'T' => {
            let n = r.i32("truncate relation count")?;
            let options = r.u8("truncate options")?;
            let relations = (0..n.max(0)).map(|_| r.u32("truncated relation")).collect::<Result<_, _>>()?;
            Message::Truncate { relations, cascade: options & 1 != 0, restart_identity: options & 2 != 0 }
        }
        b'O' => Message::Origin,
        b'M' => Message::Emitted,
        b'B' | b'C' => Message::Boundary,
        other => return Err(DecodeError(format!("unknown message tag {:?}", other as char))),
    })
}

fn expect(r: &mut Reader<'_>, tag: u8) -> Result<(), DecodeError> {
    let got = r.u8("tuple marker")?;
    if got == tag {
        Ok(())
    } else {
        Err(DecodeError(format!("expected tuple marker {:?}, got {:?}", tag as char, got as char)))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn tuple(values: &[Option<&str>]) -> Vec<u8> {
        let mut out = (values.len() as i16).to_be_bytes().to_vec();
        for v in values {
            match v {
                None => out.push(b'n'),
                Some(s) => {
                    out.push(b't');
                    out.extend((s.len() as i32).to_be_bytes());
                    out.extend(s.as_bytes());
                }
            }
        }
        out
    }

    #[test]
    fn relation_and_insert() {
        let mut m = vec![b'R'];
        m.extend(16384u32.to_be_bytes());
        m.extend(b"public\0t\0");
        m.push(b'd');
        m.extend(2i16.to_be_bytes());
        m.push(1);
        m.extend(b"id\0");
        m.extend(23u32.to_be_bytes());
        m.extend((-1i32).to_be_bytes());
        m.push(0);
        m.extend(b"name\0");
        m.extend(25u32.to_be_bytes());
        m.extend((-1i32).to_be_bytes());
        let Message::Relation(rel) = decode(&m).unwrap() else { panic!() };
        assert_eq!((rel.namespace.as_str(), rel.name.as_str(), rel.columns.len()), ("public", "t", 2));
        assert!(rel.columns[0].key && !rel.columns[1].key);

        let mut m = vec![b'I'];
        m.extend(16384u32.to_be_bytes());
        m.push(b'N');
        m.extend(tuple(&[Some("1"), None]));
        assert_eq!(decode(&m).unwrap(), Message::Insert { relation: 16384, new: vec![Datum::Text("1"), Datum::Null] });
    }

    #[test]
    fn update_with_and_without_old_tuple() {
        let mut m = vec![b'U'];
        m.extend(7u32.to_be_bytes());
        m.push(b'N');
        m.extend(tuple(&[Some("2")]));
        assert_eq!(decode(&m).unwrap(), Message::Update { relation: 7, old: None, new: vec![Datum::Text("2")] });

        let mut m = vec![b'U'];
        m.extend(7u32.to_be_bytes());
        m.push(b'O');
        m.extend(tuple(&[Some("1")]));
        m.push(b'N');
        m.extend(tuple(&[Some("2")]));
        let Message::Update { old: Some(OldTuple::Full(old)), .. } = decode(&m).unwrap() else { panic!() };
        assert_eq!(old, vec![Datum::Text("1")]);
    }

    /// Mutations of valid messages (bytes flipped, set to edge values, cut, repeated,
    /// inserted): the decoder answers each with a message or an error, never a panic. A
    /// fixed seed keeps the run reproducible (`SLUICE_FUZZ_SEED` picks another); a panic
    /// names the input.
    #[test]
    fn mutated_messages_never_panic() {
        let mut relation = vec![b'R'];
        relation.extend(16384u32.to_be_bytes());
        relation.extend(b"public\0t\0d");
        relation.extend(2i16.to_be_bytes());
        for (flag, name, oid) in [(1u8, "id", 23u32), (0, "name", 25)] {
            relation.push(flag);
            relation.extend(name.as_bytes());
            relation.push(0);
            relation.extend(oid.to_be_bytes());
            relation.extend((-1i32).to_be_bytes());
        }
        let with = |tag: u8, parts: &[&[u8]]| {
            let mut m = vec![tag];
            m.extend(7u32.to_be_bytes());
            for p in parts {
                m.extend_from_slice(p);
            }
            m
        };
        let new = tuple(&[Some("1"), None, Some("héllo")]);
        let old = tuple(&[Some("0"), Some("x")]);
        let seeds: Vec<Vec<u8>> = vec![
            relation,
            with(b'I', &[b"N", &new]),
            with(b'U', &[b"O", &old, b"N", &new]),
            with(b'U', &[b"K", &old, b"N", &new]),
            with(b'D', &[b"K", &old]),
            vec![b'T', 0, 0, 0, 2, 1, 0, 0, 0, 7, 0, 0, 0, 8],
            vec![b'B', 0, 0, 0, 0, 1, 2, 3, 4, 0, 0, 0, 0, 0, 0, 0, 9, 0, 0, 0, 42],
            vec![b'C', 0, 0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 0, 0, 0, 0, 2, 0, 0, 0, 0, 0, 0, 0, 3],
            vec![b'Y', 0, 0, 0, 9, b'p', b'u', b'b', 0, b'm', b'o', b'o', b'd', 0],
        ];
        let mut rng = fastrand::Rng::with_seed(std::env::var("SLUICE_FUZZ_SEED").ok().and_then(|s| s.parse().ok()).unwrap_or(0x5eed));
        let edges = [0u8, 0x7f, 0x80, 0xff, b'n', b't', b'u', b'b', b'N', b'O', b'K'];
        for _ in 0..200_000 {
            let mut m = seeds[rng.usize(..seeds.len())].clone();
            for _ in 0..rng.usize(1..4) {
                if m.is_empty() {
                    m.push(rng.u8(..));
                    continue;
                }
                let at = rng.usize(..m.len());
                match rng.u8(..6) {
                    0 => m[at] ^= 1 << rng.u8(..8),
                    1 => m[at] = edges[rng.usize(..edges.len())],
                    2 => m.truncate(at),
                    3 => m.insert(at, rng.u8(..)),
                    4 => {
                        let piece = m[at..].to_vec();
                        m.extend(piece);
                    }
                    _ => m[at] = rng.u8(..),
                }
            }
            let outcome = std::panic::catch_unwind(|| {
                let _ = decode(&m);
            });
            assert!(outcome.is_ok(), "decode panicked on {m:?}");
        }
    }

    #[test]
    fn truncated_input_is_an_error_not_a_panic() {
        assert!(decode(&[b'I', 0, 0]).is_err());
        assert!(decode(&[]).is_err());
        assert!(decode(b"Z").unwrap_err().to_string().contains("unknown message tag"));
    }
}
