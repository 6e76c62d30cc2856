//! Connect's group protocols, byte for byte: the eager `ConnectProtocol` (version 0) and
//! the incremental cooperative `IncrementalCooperativeConnectProtocol` (versions 1 and 2,
//! which differ only in the version number).
//!
//! ```text
//! metadata v0   (JoinGroup):  version:i16  url:string  config_offset:i64
//! metadata v1/2 (JoinGroup):  version:i16  url:string  config_offset:i64  allocation:nullable_bytes
//!                             allocation = this worker's current assignment, encoded as below, or null
//! assignment v0 (SyncGroup):  version:i16  error:i16  leader:string  leader_url:string  config_offset:i64
//!                             assignment:[connector:string  [task:i32]]      task -1 = the connector itself
//! assignment v1/2:            … as v0 …  revoked:[connector:string  [task:i32]]  delay:i32
//! ```
//! Strings are i16-length-prefixed UTF-8, bytes i32-length-prefixed (-1: null), arrays
//! i32-count-prefixed (-1: null, read as empty), integers big-endian (Kafka's classic types).
//! As Connect does, fields missing at the end of a v1/v2 message read as their defaults
//! (no allocation, nothing revoked, delay 0), and versions above 2 parse as version 2.

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

/// Connect's `connect.protocol` modes (`ConnectProtocolCompatibility`).
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord)]
pub enum ConnectProtocol {
    /// `default`, version 0: every rebalance stops everything.
    Eager,
    /// `compatible`, version 1: incremental cooperative rebalancing.
    Compatible,
    /// `sessioned`, version 2: version 1 plus signed inter-worker requests (KIP-507).
    Sessioned,
}

impl ConnectProtocol {
    /// From the worker key `connect.protocol` (`eager`, `compatible`, `sessioned`; any case).
    pub fn from_config(value: &str) -> Option<Self> {
        match value.trim().to_ascii_lowercase().as_str() {
            "eager" => Some(Self::Eager),
            "compatible" => Some(Self::Compatible),
            "sessioned" => Some(Self::Sessioned),
            _ => None,
        }
    }

    /// The protocol name in JoinGroup.
    pub fn name(self) -> &'static str {
        match self {
            Self::Eager => EAGER,
            Self::Compatible => "compatible",
            Self::Sessioned => "sessioned",
        }
    }

    pub fn from_name(name: &str) -> Option<Self> {
        [Self::Eager, Self::Compatible, Self::Sessioned].into_iter().find(|p| p.name().eq_ignore_ascii_case(name))
    }

    pub fn version(self) -> i16 {
        match self {
            Self::Eager => 0,
            Self::Compatible => 1,
            Self::Sessioned => 2,
        }
    }

    pub fn is_cooperative(self) -> bool {
        self != Self::Eager
    }
}

/// What a worker tells the group when it joins.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct WorkerState {
    /// The REST URL other workers forward requests to.
    pub url: String,
    /// The last config-topic offset this worker has read (-1: none).
    pub config_offset: i64,
    /// Cooperative protocols: what this worker runs now (None before its first assignment).
    pub assignment: Option<Assignment>,
}

/// What the leader hands a member. Cooperative protocols send only what is *new* in
/// `connectors`/`tasks` and what the member must stop in `revoked_*`; the member adds the
/// new to what it kept ([`Assignment::merge_into`]).
#[derive(Debug, Clone, PartialEq, Eq, Default)]
pub struct Assignment {
    /// 0 (eager), 1 or 2 (cooperative).
    pub version: i16,
    pub error: i16,
    pub leader: String,
    pub leader_url: String,
    pub config_offset: i64,
    pub connectors: Vec<String>,
    pub tasks: Vec<ConnectorTaskId>,
    pub revoked_connectors: Vec<String>,
    pub revoked_tasks: Vec<ConnectorTaskId>,
    /// Milliseconds after which the members should rejoin (a scheduled rebalance), 0: none.
    pub delay: i32,
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
    // Later versions extend earlier ones; they parse as the latest we know.
    if version < 0 {
        return Err(ProtocolError("negative protocol version"));
    }
    Ok(version)
}

/// `[connector:string [task:i32]]`: connectors in first-seen order, each connector's
/// sentinel before its tasks (Connect's `asMap`/`revokedAsMap`).
fn put_units(buf: &mut Vec<u8>, connectors: &[String], tasks: &[ConnectorTaskId]) {
    let mut by_connector: Vec<(&str, Vec<i32>)> = Vec::new();
    let mut seen_connectors: Vec<&str> = Vec::new();
    let entries = connectors
        .iter()
        .filter(|c| {
            // Connect de-duplicates the connector ids.
            if seen_connectors.contains(&c.as_str()) {
                return false;
            }
            seen_connectors.push(c.as_str());
            true
        })
        .map(|c| (c.as_str(), CONNECTOR_TASK))
        .collect::<Vec<_>>()
        .into_iter()
        .chain(tasks.iter().map(|t| (t.connector.as_str(), t.task as i32)));
    for (name, task) in entries {
        match by_connector.iter_mut().find(|(n, _)| *n == name) {
            Some((_, tasks)) => tasks.push(task),
            None => by_connector.push((name, vec![task])),
        }
    }
    buf.put_i32(by_connector.len() as i32);
    for (name, tasks) in by_connector {
        put_string(buf, name);
        buf.put_i32(tasks.len() as i32);
        for t in tasks {
            buf.put_i32(t);
        }
    }
}

/// Reads a nullable `[connector [task]]` array (null reads as empty).
fn get_units(buf: &mut &[u8]) -> Result<(Vec<String>, Vec<ConnectorTaskId>), ProtocolError> {
    let (mut connectors, mut tasks) = (Vec::new(), Vec::new());
    let n = get_i32(buf)?;
    for _ in 0..n.max(0) {
        let connector = get_string(buf)?;
        let count = get_i32(buf)?;
        for _ in 0..count.max(0) {
            match get_i32(buf)? {
                CONNECTOR_TASK => connectors.push(connector.clone()),
                t if t >= 0 => tasks.push(ConnectorTaskId { connector: connector.clone(), task: t as u32 }),
                _ => return Err(ProtocolError("negative task id")),
            }
        }
    }
    Ok((connectors, tasks))
}

impl WorkerState {
    /// The metadata of protocol `version` (0 for eager; 1 or 2 carry the assignment).
    pub fn encode(&self, version: i16) -> Vec<u8> {
        let mut buf = Vec::with_capacity(16 + self.url.len());
        buf.put_i16(version);
        put_string(&mut buf, &self.url);
        buf.put_i64(self.config_offset);
        if version >= 1 {
            match &self.assignment {
                None => buf.put_i32(-1),
                Some(a) => {
                    let bytes = Assignment { version, ..a.clone() }.encode();
                    buf.put_i32(bytes.len() as i32);
                    buf.put_slice(&bytes);
                }
            }
        }
        buf
    }

    pub fn decode(mut buf: &[u8]) -> Result<Self, ProtocolError> {
        let version = get_version(&mut buf)?;
        let url = get_string(&mut buf)?;
        let config_offset = get_i64(&mut buf)?;
        let mut assignment = None;
        if version >= 1 && buf.remaining() >= 4 {
            let len = get_i32(&mut buf)?;
            if len >= 0 {
                let len = len as usize;
                if buf.remaining() < len {
                    return Err(ProtocolError("truncated allocation"));
                }
                assignment = Some(Assignment::decode(&buf[..len])?);
            }
        }
        Ok(Self { url, config_offset, assignment })
    }
}

impl Assignment {
    pub fn encode(&self) -> Vec<u8> {
        let mut buf = Vec::new();
        buf.put_i16(self.version);
        buf.put_i16(self.error);
        put_string(&mut buf, &self.leader);
        put_string(&mut buf, &self.leader_url);
        buf.put_i64(self.config_offset);
        put_units(&mut buf, &self.connectors, &self.tasks);
        if self.version >= 1 {
            put_units(&mut buf, &self.revoked_connectors, &self.revoked_tasks);
            buf.put_i32(self.delay);
        }
        buf
    }

    pub fn decode(mut buf: &[u8]) -> Result<Self, ProtocolError> {
        let version = get_version(&mut buf)?;
        let mut a = Assignment {
            version,
            error: get_i16(&mut buf)?,
            leader: get_string(&mut buf)?,
            leader_url: get_string(&mut buf)?,
            config_offset: get_i64(&mut buf)?,
            ..Default::default()
        };
        (a.connectors, a.tasks) = get_units(&mut buf)?;
        if version >= 1 {
            if buf.remaining() >= 4 {
                (a.revoked_connectors, a.revoked_tasks) = get_units(&mut buf)?;
            }
            if buf.remaining() >= 4 {
                a.delay = get_i32(&mut buf)?;
            }
        }
        Ok(a)
    }

    /// Cooperative protocols: `held` (what the member ran) minus what this assignment
    /// revokes, plus what it newly assigns — the member's whole assignment from now on
    /// (Connect's `WorkerCoordinator.onJoinComplete`). Leader, offset and delay are this
    /// assignment's; nothing is left revoked.
    pub fn merge_into(&self, held: Option<&Assignment>) -> Assignment {
        let mut out = Assignment { revoked_connectors: Vec::new(), revoked_tasks: Vec::new(), ..self.clone() };
        if let Some(held) = held {
            for c in &held.connectors {
                if !self.revoked_connectors.contains(c) && !out.connectors.contains(c) {
                    out.connectors.push(c.clone());
                }
            }
            for t in &held.tasks {
                if !self.revoked_tasks.contains(t) && !out.tasks.contains(t) {
                    out.tasks.push(t.clone());
                }
            }
        }
        out
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(c: &str, t: u32) -> ConnectorTaskId {
        ConnectorTaskId { connector: c.into(), task: t }
    }

    fn string(s: &str) -> Vec<u8> {
        let mut v = (s.len() as i16).to_be_bytes().to_vec();
        v.extend_from_slice(s.as_bytes());
        v
    }

    fn i32s(values: &[i32]) -> Vec<u8> {
        values.iter().flat_map(|v| v.to_be_bytes()).collect()
    }

    #[test]
    fn protocol_names_and_versions_are_connects() {
        assert_eq!(ConnectProtocol::from_config("Sessioned"), Some(ConnectProtocol::Sessioned));
        assert_eq!(ConnectProtocol::from_config("eager"), Some(ConnectProtocol::Eager));
        assert_eq!(ConnectProtocol::from_config("default"), None, "the key takes mode names, not protocol names");
        let names: Vec<(&str, i16)> = [ConnectProtocol::Eager, ConnectProtocol::Compatible, ConnectProtocol::Sessioned]
            .iter()
            .map(|p| (p.name(), p.version()))
            .collect();
        assert_eq!(names, [("default", 0), ("compatible", 1), ("sessioned", 2)]);
        assert_eq!(ConnectProtocol::from_name("compatible"), Some(ConnectProtocol::Compatible));
    }

    #[test]
    fn metadata_v0_matches_connects_bytes() {
        let m = WorkerState { url: "http://w:8083/".into(), config_offset: 7, assignment: None };
        let bytes = m.encode(0);
        let mut expected = vec![0, 0, 0, 14];
        expected.extend_from_slice(b"http://w:8083/");
        expected.extend_from_slice(&7i64.to_be_bytes());
        assert_eq!(bytes, expected);
        assert_eq!(WorkerState::decode(&bytes).unwrap(), m);
        assert!(WorkerState::decode(&bytes[..5]).is_err());
    }

    #[test]
    fn assignment_v0_round_trips_with_the_connector_sentinel() {
        let a = Assignment {
            error: NO_ERROR,
            leader: "m1".into(),
            leader_url: "http://a:1/".into(),
            config_offset: 42,
            connectors: vec!["src".into()],
            tasks: vec![task("src", 1), task("sink", 0)],
            ..Default::default()
        };
        let bytes = a.encode();
        // version, error, "m1", "http://a:1/", offset, 2 connectors: src [-1, 1], sink [0]
        let mut expected = vec![0, 0, 0, 0];
        expected.extend(string("m1"));
        expected.extend(string("http://a:1/"));
        expected.extend_from_slice(&42i64.to_be_bytes());
        expected.extend(i32s(&[2]));
        expected.extend(string("src"));
        expected.extend(i32s(&[2, -1, 1]));
        expected.extend(string("sink"));
        expected.extend(i32s(&[1, 0]));
        assert_eq!(bytes, expected);
        assert_eq!(Assignment::decode(&bytes).unwrap(), a);
    }

    /// `IncrementalCooperativeConnectProtocol.serializeAssignment` of an `ExtendedAssignment`
    /// (header, `ASSIGNMENT_V1`: error, leader, leader URL, offset, assignment array,
    /// revoked array, delay), derived field by field from its schema.
    fn v1_assignment_bytes(version: i16) -> Vec<u8> {
        let mut b = version.to_be_bytes().to_vec();
        b.extend_from_slice(&0i16.to_be_bytes());
        b.extend(string("leader-1"));
        b.extend(string("http://l:8083/"));
        b.extend_from_slice(&9i64.to_be_bytes());
        // assignment: a [-1, 0], b [2]
        b.extend(i32s(&[2]));
        b.extend(string("a"));
        b.extend(i32s(&[2, -1, 0]));
        b.extend(string("b"));
        b.extend(i32s(&[1, 2]));
        // revoked: c [-1], a [3]
        b.extend(i32s(&[2]));
        b.extend(string("c"));
        b.extend(i32s(&[1, -1]));
        b.extend(string("a"));
        b.extend(i32s(&[1, 3]));
        // delay
        b.extend(i32s(&[1500]));
        b
    }

    fn v1_assignment(version: i16) -> Assignment {
        Assignment {
            version,
            error: NO_ERROR,
            leader: "leader-1".into(),
            leader_url: "http://l:8083/".into(),
            config_offset: 9,
            connectors: vec!["a".into()],
            tasks: vec![task("a", 0), task("b", 2)],
            revoked_connectors: vec!["c".into()],
            revoked_tasks: vec![task("a", 3)],
            delay: 1500,
        }
    }

    #[test]
    fn assignment_v1_and_v2_match_connects_bytes() {
        for version in [1, 2] {
            let a = v1_assignment(version);
            assert_eq!(a.encode(), v1_assignment_bytes(version), "version {version}");
            assert_eq!(Assignment::decode(&v1_assignment_bytes(version)).unwrap(), a);
        }
    }

    #[test]
    fn empty_v1_assignment_has_empty_arrays_and_missing_fields_default() {
        let a = Assignment { version: 1, leader: "l".into(), leader_url: "u".into(), config_offset: -1, ..Default::default() };
        let mut expected = vec![0, 1, 0, 0];
        expected.extend(string("l"));
        expected.extend(string("u"));
        expected.extend_from_slice(&(-1i64).to_be_bytes());
        expected.extend(i32s(&[0, 0, 0]));
        assert_eq!(a.encode(), expected);
        // Tolerated as Connect does: no revoked array and no delay (an older writer), or null arrays.
        let short = &expected[..expected.len() - 8];
        assert_eq!(Assignment::decode(short).unwrap(), a);
        let mut nulls = expected[..expected.len() - 12].to_vec();
        nulls.extend(i32s(&[-1, -1, 0]));
        assert_eq!(Assignment::decode(&nulls).unwrap(), a);
    }

    #[test]
    fn metadata_v1_carries_the_current_assignment_as_nullable_bytes() {
        let held = Assignment { delay: 0, revoked_connectors: vec![], revoked_tasks: vec![], ..v1_assignment(1) };
        for version in [1i16, 2] {
            let m = WorkerState { url: "http://w:1/".into(), config_offset: 12, assignment: Some(held.clone()) };
            let bytes = m.encode(version);
            let allocation = Assignment { version, ..held.clone() }.encode();
            let mut expected = version.to_be_bytes().to_vec();
            expected.extend(string("http://w:1/"));
            expected.extend_from_slice(&12i64.to_be_bytes());
            expected.extend(i32s(&[allocation.len() as i32]));
            expected.extend(&allocation);
            assert_eq!(bytes, expected);
            // The allocation's own header carries the metadata's version.
            assert_eq!(&allocation[..2], &version.to_be_bytes());
            let back = WorkerState::decode(&bytes).unwrap();
            assert_eq!(back.assignment, Some(Assignment { version, ..held.clone() }));
        }
        // No assignment yet: a null allocation (-1).
        let fresh = WorkerState { url: "u".into(), config_offset: -1, assignment: None };
        let bytes = fresh.encode(1);
        let mut expected = vec![0, 1];
        expected.extend(string("u"));
        expected.extend_from_slice(&(-1i64).to_be_bytes());
        expected.extend(i32s(&[-1]));
        assert_eq!(bytes, expected);
        assert_eq!(WorkerState::decode(&bytes).unwrap(), fresh);
        // A v0 member's metadata read by a cooperative leader: no allocation.
        let v0 = WorkerState { url: "u".into(), config_offset: 3, assignment: None };
        assert_eq!(WorkerState::decode(&v0.encode(0)).unwrap(), v0);
    }

    #[test]
    fn merge_keeps_what_is_not_revoked_and_adds_what_is_new() {
        let held = Assignment {
            version: 1,
            connectors: vec!["a".into(), "c".into()],
            tasks: vec![task("a", 3), task("a", 1)],
            ..Default::default()
        };
        let next = v1_assignment(1);
        let merged = next.merge_into(Some(&held));
        assert_eq!(merged.connectors, ["a"]);
        assert_eq!(merged.tasks, [task("a", 0), task("b", 2), task("a", 1)]);
        assert!(merged.revoked_connectors.is_empty() && merged.revoked_tasks.is_empty());
        assert_eq!(merged.leader, "leader-1");
    }
}
