//! Connect's eager group protocol (`ConnectProtocol`, version 0), byte for byte:
//!
//! ```text
//! metadata   (JoinGroup):  version:i16  url:string  config_offset:i64
//! assignment (SyncGroup):  version:i16  error:i16  leader:string  leader_url:string  config_offset:i64
//!                          [connector:string  [task:i32]]      task -1 = the connector instance itself
//! ```
//! Strings are i16-length-prefixed UTF-8, arrays i32-count-prefixed (Kafka's classic types).

use bytes::{Buf, BufMut};

use crate::herder::ConnectorTaskId;

/// The protocol type every Connect worker joins with.
pub const PROTOCOL_TYPE: &str = "connect";
/// The eager protocol's name (Connect's `ConnectProtocolCompatibility.EAGER`).
pub const EAGER: &str = "default";
/// The task id that stands for the connector instance in an assignment.
pub const CONNECTOR_TASK: i32 = -1;
/// Assignment error codes.
pub const NO_ERROR: i16 = 0;
pub const CONFIG_MISMATCH: i16 = 1;

/// What a worker tells the group when it joins.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerState {
    /// The REST URL other workers forward requests to.
    pub url: String,
    /// The last config-topic offset this worker has read (-1: none).
    pub config_offset: i64,
}

/// What the leader hands a member.
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Assignment {
    pub error: i16,
    pub leader: String,
    pub leader_url: String,
    pub config_offset: i64,
    pub connectors: Vec<String>,
    pub tasks: Vec<ConnectorTaskId>,
}

/// A member's metadata or assignment that does not parse.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("malformed Connect group protocol data: {0}")]
pub struct ProtocolError(&'static str);

fn put_string(buf: &mut Vec<u8>, s: &str) {
    buf.put_i16(s.len() as i16);
    buf.put_slice(s.as_bytes());
}

fn get_i16(buf: &mut &[u8]) -> Result<i16, ProtocolError> {
    if buf.remaining() < 2 {
        return Err(ProtocolError("truncated int16"));
    }
    Ok(buf.get_i16())
}

fn get_i32(buf: &mut &[u8]) -> Result<i32, ProtocolError> {
    if buf.remaining() < 4 {
        return Err(ProtocolError("truncated int32"));
    }
    Ok(buf.get_i32())
}

fn get_i64(buf: &mut &[u8]) -> Result<i64, ProtocolError> {
    if buf.remaining() < 8 {
        return Err(ProtocolError("truncated int64"));
    }
    Ok(buf.get_i64())
}

fn get_string(buf: &mut &[u8]) -> Result<String, ProtocolError> {
    let len = get_i16(buf)?;
    if len < 0 {
        return Ok(String::new());
    }
    let len = len as usize;
    if buf.remaining() < len {
        return Err(ProtocolError("truncated string"));
    }
    let s = std::str::from_utf8(&buf[..len]).map_err(|_| ProtocolError("string is not UTF-8"))?.to_owned();
    buf.advance(len);
    Ok(s)
}

fn get_version(buf: &mut &[u8]) -> Result<i16, ProtocolError> {
    let version = get_i16(buf)?;
    // Later versions (cooperative) extend version 0; they parse as version 0.
    if version < 0 {
        return Err(ProtocolError("negative protocol version"));
    }
    Ok(version)
}

impl WorkerState {
    pub fn encode(&self) -> Vec<u8> {
        let mut buf = Vec::with_capacity(12 + self.url.len());
        buf.put_i16(0);
        put_string(&mut buf, &self.url);
        buf.put_i64(self.config_offset);
        buf
    }

    pub fn decode(mut buf: &[u8]) -> Result<Self, ProtocolError> {
        get_version(&mut buf)?;
        Ok(Self { url: get_string(&mut buf)?, config_offset: get_i64(&mut buf)? })
    }
}

impl Assignment {
    pub fn encode(&self) -> Vec<u8> {
        // Connectors in first-seen order, each with its sentinel first, then its tasks.
        let mut by_connector: Vec<(&str, Vec<i32>)> = Vec::new();
        let entries = self
            .connectors
            .iter()
            .map(|c| (c.as_str(), CONNECTOR_TASK))
            .chain(self.tasks.iter().map(|t| (t.connector.as_str(), t.task as i32)));
        for (name, task) in entries {
            match by_connector.iter_mut().find(|(n, _)| *n == name) {
                Some((_, tasks)) => tasks.push(task),
                None => by_connector.push((name, vec![task])),
            }
        }
        let mut buf = Vec::new();
        buf.put_i16(0);
        buf.put_i16(self.error);
        put_string(&mut buf, &self.leader);
        put_string(&mut buf, &self.leader_url);
        buf.put_i64(self.config_offset);
        buf.put_i32(by_connector.len() as i32);
        for (name, tasks) in by_connector {
            put_string(&mut buf, name);
            buf.put_i32(tasks.len() as i32);
            for t in tasks {
                buf.put_i32(t);
            }
        }
        buf
    }

    pub fn decode(mut buf: &[u8]) -> Result<Self, ProtocolError> {
        get_version(&mut buf)?;
        let mut a = Assignment {
            error: get_i16(&mut buf)?,
            leader: get_string(&mut buf)?,
            leader_url: get_string(&mut buf)?,
            config_offset: get_i64(&mut buf)?,
            ..Default::default()
        };
        let n = get_i32(&mut buf)?;
        for _ in 0..n.max(0) {
            let connector = get_string(&mut buf)?;
            let tasks = get_i32(&mut buf)?;
            for _ in 0..tasks.max(0) {
                match get_i32(&mut buf)? {
                    CONNECTOR_TASK => a.connectors.push(connector.clone()),
                    t if t >= 0 => a.tasks.push(ConnectorTaskId { connector: connector.clone(), task: t as u32 }),
                    _ => return Err(ProtocolError("negative task id")),
                }
            }
        }
        Ok(a)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn metadata_matches_connects_bytes() {
        let m = WorkerState { url: "http://w:8083/".into(), config_offset: 7 };
        let bytes = m.encode();
        let mut expected = vec![0, 0, 0, 14];
        expected.extend_from_slice(b"http://w:8083/");
        expected.extend_from_slice(&7i64.to_be_bytes());
        assert_eq!(bytes, expected);
        assert_eq!(WorkerState::decode(&bytes).unwrap(), m);
        assert!(WorkerState::decode(&bytes[..5]).is_err());
    }

    #[test]
    fn assignment_round_trips_with_the_connector_sentinel() {
        let a = Assignment {
            error: NO_ERROR,
            leader: "m1".into(),
            leader_url: "http://a:1/".into(),
            config_offset: 42,
            connectors: vec!["src".into()],
            tasks: vec![ConnectorTaskId { connector: "src".into(), task: 1 }, ConnectorTaskId { connector: "sink".into(), task: 0 }],
        };
        let bytes = a.encode();
        // version, error, "m1", "http://a:1/", offset, 2 connectors: src [-1, 1], sink [0]
        let mut expected = vec![0, 0, 0, 0, 0, 2, b'm', b'1', 0, 11];
        expected.extend_from_slice(b"http://a:1/");
        expected.extend_from_slice(&42i64.to_be_bytes());
        expected.extend_from_slice(&2i32.to_be_bytes());
        expected.extend_from_slice(&[0, 3, b's', b'r', b'c']);
        expected.extend_from_slice(&2i32.to_be_bytes());
        expected.extend_from_slice(&(-1i32).to_be_bytes());
        expected.extend_from_slice(&1i32.to_be_bytes());
        expected.extend_from_slice(&[0, 4, b's', b'i', b'n', b'k']);
        expected.extend_from_slice(&1i32.to_be_bytes());
        expected.extend_from_slice(&0i32.to_be_bytes());
        assert_eq!(bytes, expected);
        assert_eq!(Assignment::decode(&bytes).unwrap(), a);
    }
}
