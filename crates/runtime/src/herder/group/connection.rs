//! One plaintext connection to a broker speaking Kafka's classic request framing:
//! `size:i32 header body`, answered in order with the same correlation id.

use std::time::Duration;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{
    ApiKey, FindCoordinatorRequest, FindCoordinatorResponse, HeartbeatRequest, HeartbeatResponse, JoinGroupRequest, JoinGroupResponse,
    LeaveGroupRequest, LeaveGroupResponse, RequestHeader, ResponseHeader, SyncGroupRequest, SyncGroupResponse,
};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, StrBytes};
use tokio::io::{AsyncReadExt, AsyncWriteExt};
use tokio::net::TcpStream;

use super::GroupError;

/// Responses larger than this are refused (a group of many workers stays far below it).
const MAX_RESPONSE: usize = 64 << 20;

/// A request this client sends and the response it decodes. (`kafka_protocol`'s own
/// `Request` trait also wants requests to decode, which only its `broker` feature provides.)
pub(super) trait Call: Encodable + HeaderVersion {
    const KEY: ApiKey;
    type Response: Decodable + HeaderVersion;
}

macro_rules! call {
    ($req:ty, $resp:ty, $key:ident) => {
        impl Call for $req {
            const KEY: ApiKey = ApiKey::$key;
            type Response = $resp;
        }
    };
}
call!(FindCoordinatorRequest, FindCoordinatorResponse, FindCoordinator);
call!(JoinGroupRequest, JoinGroupResponse, JoinGroup);
call!(SyncGroupRequest, SyncGroupResponse, SyncGroup);
call!(HeartbeatRequest, HeartbeatResponse, Heartbeat);
call!(LeaveGroupRequest, LeaveGroupResponse, LeaveGroup);

pub(super) struct Connection {
    stream: TcpStream,
    correlation: i32,
    client_id: String,
    pub(super) addr: String,
}

impl Connection {
    pub(super) async fn open(addr: &str, client_id: &str, timeout: Duration) -> Result<Self, GroupError> {
        let stream = tokio::time::timeout(timeout, TcpStream::connect(addr))
            .await
            .map_err(|_| GroupError::Timeout { what: "connect", addr: addr.to_owned() })?
            .map_err(|source| GroupError::Io { addr: addr.to_owned(), source })?;
        stream.set_nodelay(true).ok();
        Ok(Self { stream, correlation: 0, client_id: client_id.to_owned(), addr: addr.to_owned() })
    }

    /// Sends `req` at `version` and waits (at most `timeout`) for its response.
    pub(super) async fn call<R: Call>(&mut self, req: &R, version: i16, timeout: Duration) -> Result<R::Response, GroupError> {
        let what = std::any::type_name::<R>().rsplit("::").next().unwrap_or("request");
        match tokio::time::timeout(timeout, self.exchange(req, version)).await {
            Ok(r) => r,
            Err(_) => Err(GroupError::Timeout { what, addr: self.addr.clone() }),
        }
    }

    async fn exchange<R: Call>(&mut self, req: &R, version: i16) -> Result<R::Response, GroupError> {
        self.correlation = self.correlation.wrapping_add(1);
        let header = RequestHeader::default()
            .with_request_api_key(R::KEY as i16)
            .with_request_api_version(version)
            .with_correlation_id(self.correlation)
            .with_client_id(Some(StrBytes::from_string(self.client_id.clone())));
        let mut body = BytesMut::new();
        header.encode(&mut body, R::header_version(version)).map_err(GroupError::encode)?;
        req.encode(&mut body, version).map_err(GroupError::encode)?;
        let mut frame = BytesMut::with_capacity(4 + body.len());
        frame.put_i32(body.len() as i32);
        frame.extend_from_slice(&body);
        let io = |source| GroupError::Io { addr: self.addr.clone(), source };
        self.stream.write_all(&frame).await.map_err(io)?;
        let len = self.stream.read_i32().await.map_err(|source| GroupError::Io { addr: self.addr.clone(), source })?;
        if len < 0 || len as usize > MAX_RESPONSE {
            return Err(GroupError::Malformed(format!("response of {len} bytes from {}", self.addr)));
        }
        let mut buf = vec![0u8; len as usize];
        self.stream.read_exact(&mut buf).await.map_err(|source| GroupError::Io { addr: self.addr.clone(), source })?;
        let mut buf = Bytes::from(buf);
        let header =
            ResponseHeader::decode(&mut buf, <R::Response as HeaderVersion>::header_version(version)).map_err(GroupError::decode)?;
        if header.correlation_id != self.correlation {
            return Err(GroupError::Malformed(format!(
                "correlation id {} from {}, expected {}",
                header.correlation_id, self.addr, self.correlation
            )));
        }
        let response = R::Response::decode(&mut buf, version).map_err(GroupError::decode)?;
        if buf.has_remaining() {
            tracing::debug!(addr = %self.addr, left = buf.remaining(), "response had trailing bytes");
        }
        Ok(response)
    }
}
