//! One connection to a broker speaking Kafka's classic request framing:
//! `size:i32 header body`, answered in order with the same correlation id. Over TLS and
//! authenticated with SASL when the worker's `security.protocol` says so (see
//! [`super::security`]).

use std::time::Duration;

use bytes::{Buf, BufMut, Bytes, BytesMut};
use kafka_protocol::messages::{
    ApiKey, FindCoordinatorRequest, FindCoordinatorResponse, HeartbeatRequest, HeartbeatResponse, JoinGroupRequest, JoinGroupResponse,
    LeaveGroupRequest, LeaveGroupResponse, RequestHeader, ResponseHeader, SaslAuthenticateRequest, SaslAuthenticateResponse,
    SaslHandshakeRequest, SaslHandshakeResponse, SyncGroupRequest, SyncGroupResponse,
};
use kafka_protocol::protocol::{Decodable, Encodable, HeaderVersion, StrBytes};
use tokio::io::{AsyncRead, AsyncReadExt, AsyncWrite, AsyncWriteExt};
use tokio::net::TcpStream;

use super::security::{server_name, GroupSecurity, Mechanism, SaslSettings, Scram};
use super::GroupError;

const SASL_HANDSHAKE_V: i16 = 1;
const SASL_AUTHENTICATE_V: i16 = 1;

trait Stream: AsyncRead + AsyncWrite + Unpin + Send {}
impl<T: AsyncRead + AsyncWrite + Unpin + Send> Stream for T {}

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
call!(SaslHandshakeRequest, SaslHandshakeResponse, SaslHandshake);
call!(SaslAuthenticateRequest, SaslAuthenticateResponse, SaslAuthenticate);

pub(super) struct Connection {
    stream: Box<dyn Stream>,
    correlation: i32,
    client_id: String,
    pub(super) addr: String,
}

impl Connection {
    pub(super) async fn open(addr: &str, client_id: &str, timeout: Duration, security: &GroupSecurity) -> Result<Self, GroupError> {
        let tcp = tokio::time::timeout(timeout, TcpStream::connect(addr))
            .await
            .map_err(|_| GroupError::Timeout { what: "connect", addr: addr.to_owned() })?
            .map_err(|source| GroupError::Io { addr: addr.to_owned(), source })?;
        tcp.set_nodelay(true).ok();
        let stream: Box<dyn Stream> = match &security.tls {
            None => Box::new(tcp),
            Some(tls) => {
                let refused = |message: String| GroupError::Tls { addr: addr.to_owned(), message };
                let config = tls.client_config().map_err(refused)?;
                let name = server_name(addr).map_err(refused)?;
                let handshake = tokio_rustls::TlsConnector::from(config).connect(name, tcp);
                let tls = tokio::time::timeout(timeout, handshake)
                    .await
                    .map_err(|_| GroupError::Timeout { what: "TLS handshake", addr: addr.to_owned() })?
                    .map_err(|e| refused(e.to_string()))?;
                Box::new(tls)
            }
        };
        let mut conn = Self { stream, correlation: 0, client_id: client_id.to_owned(), addr: addr.to_owned() };
        if let Some(sasl) = &security.sasl {
            conn.authenticate(sasl, timeout).await?;
        }
        Ok(conn)
    }

    /// SaslHandshake, then the mechanism's exchange in SaslAuthenticate requests.
    async fn authenticate(&mut self, sasl: &SaslSettings, timeout: Duration) -> Result<(), GroupError> {
        let name = sasl.mechanism.name();
        let req = SaslHandshakeRequest::default().with_mechanism(StrBytes::from_static_str(name));
        let resp = self.call(&req, SASL_HANDSHAKE_V, timeout).await?;
        if resp.error_code != 0 {
            let offered: Vec<&str> = resp.mechanisms.iter().map(|m| m.as_str()).collect();
            return Err(self.auth_failed(format!("the broker does not accept sasl.mechanism={name} (it offers {})", offered.join(", "))));
        }
        match sasl.mechanism {
            Mechanism::Plain => {
                let message = format!("\0{}\0{}", sasl.username, sasl.password.expose());
                self.sasl_step(message.into_bytes(), &sasl.username, timeout).await?;
            }
            Mechanism::ScramSha256 | Mechanism::ScramSha512 => {
                let mut scram = Scram::new(sasl.mechanism, &sasl.username, &sasl.password);
                let first = self.sasl_step(scram.client_first().into_bytes(), &sasl.username, timeout).await?;
                let first = String::from_utf8(first).map_err(|_| self.auth_failed("the broker's SCRAM message is not UTF-8".to_owned()))?;
                let last = scram.client_final(&first).map_err(|m| self.auth_failed(m))?;
                let fin = self.sasl_step(last.into_bytes(), &sasl.username, timeout).await?;
                scram.verify_server_final(&String::from_utf8_lossy(&fin)).map_err(|m| self.auth_failed(m))?;
            }
        }
        Ok(())
    }

    /// One SaslAuthenticate round trip; the broker's bytes back.
    async fn sasl_step(&mut self, bytes: Vec<u8>, username: &str, timeout: Duration) -> Result<Vec<u8>, GroupError> {
        let req = SaslAuthenticateRequest::default().with_auth_bytes(bytes.into());
        let resp = self.call(&req, SASL_AUTHENTICATE_V, timeout).await?;
        if resp.error_code != 0 {
            let why = resp.error_message.as_ref().map_or("no message", |m| m.as_str());
            return Err(self.auth_failed(format!("the broker refused user {username:?} (error {}: {why})", resp.error_code)));
        }
        Ok(resp.auth_bytes.to_vec())
    }

    fn auth_failed(&self, message: String) -> GroupError {
        GroupError::Authentication { addr: self.addr.clone(), message }
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
