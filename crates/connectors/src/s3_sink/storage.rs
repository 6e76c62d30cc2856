//! The object store: an `aws-sdk-s3` client built from the connector config, and
//! [`Upload`], one object being written with bounded memory.
//!
//! An object is buffered up to `s3.part.size` bytes; a bigger object becomes a multipart
//! upload whose full parts are sent as soon as they are full, so memory per open object stays
//! below about one part. Nothing is visible under the object's key until
//! [`Upload::complete`] succeeds (PutObject or CompleteMultipartUpload are atomic), so a
//! crash never leaves a partial object; it may leave an incomplete multipart upload, which
//! [`Upload::abort`] (on close) or a bucket lifecycle rule removes.
//!
//! Every method leaves the upload in a state from which it can simply be called again: a
//! part is dropped from the buffer only after S3 acknowledged it. The SDK retries 5xx,
//! throttling and timeouts `s3.part.retries` times with exponential backoff; what still
//! fails is returned as a retriable error (the runtime redelivers the batch and the writer
//! resumes where it was), except answers that retrying cannot change (bad credentials,
//! missing bucket), which are fatal.
//!
//! Every write carries the configured server-side encryption (`s3.ssea.name`,
//! `s3.sse.kms.key.id`, `s3.sse.customer.key`) and canned ACL (`s3.acl.canned`). The SSE-C key
//! is held only in the request headers; the SDK redacts it in its debug output.

use std::time::Duration;

use aws_sdk_s3::config::http::HttpResponse;
use aws_sdk_s3::config::interceptors::FinalizerInterceptorContextRef;
use aws_sdk_s3::config::retry::RetryConfig;
use aws_sdk_s3::config::timeout::TimeoutConfig;
use aws_sdk_s3::config::{
    BehaviorVersion, ConfigBag, Credentials, Intercept, Region, RequestChecksumCalculation, ResponseChecksumValidation, RuntimeComponents,
};
use aws_sdk_s3::error::{ProvideErrorMetadata, SdkError};
use aws_sdk_s3::primitives::ByteStream;
use aws_sdk_s3::types::{CompletedMultipartUpload, CompletedPart, ObjectCannedAcl, ServerSideEncryption};
use aws_sdk_s3::Client;
use sluice_api::{ConnectError, ConnectResult, Setbacks};

use super::config::{Encryption, S3SinkConfig};

/// The bucket and a client for it.
#[derive(Clone)]
pub struct Store {
    client: Client,
    bucket: String,
    headers: WriteHeaders,
}

/// What every object write carries: server-side encryption and the canned ACL, as Confluent's
/// `S3OutputStream` sends them (on PutObject and CreateMultipartUpload; the SSE-C key also on
/// every UploadPart).
#[derive(Clone, Default)]
struct WriteHeaders {
    sse: Option<ServerSideEncryption>,
    kms_key_id: Option<String>,
    /// SSE-C: algorithm, key (base64), key MD5 (base64).
    customer: Option<(String, String, String)>,
    acl: Option<ObjectCannedAcl>,
}

impl WriteHeaders {
    fn new(cfg: &S3SinkConfig) -> Self {
        let mut h = Self { acl: cfg.canned_acl.as_deref().map(ObjectCannedAcl::from), ..Self::default() };
        match &cfg.encryption {
            Encryption::None => {}
            Encryption::S3 => h.sse = Some(ServerSideEncryption::Aes256),
            Encryption::Kms { algorithm, key_id } => {
                h.sse = Some(ServerSideEncryption::from(*algorithm));
                h.kms_key_id = key_id.clone();
            }
            Encryption::Customer { key, key_md5 } => h.customer = Some(("AES256".to_owned(), key.expose().to_owned(), key_md5.clone())),
        }
        h
    }

    fn customer(&self) -> (Option<String>, Option<String>, Option<String>) {
        match &self.customer {
            Some((a, k, m)) => (Some(a.clone()), Some(k.clone()), Some(m.clone())),
            None => (None, None, None),
        }
    }
}

/// Notes every S3 request attempt that failed as a setback of the task: the SDK retries
/// them itself (`s3.part.retries`), and a failure it got past would otherwise leave no
/// trace in the task's status.
#[derive(Debug)]
struct FailedAttempts(Setbacks);

impl Intercept for FailedAttempts {
    fn name(&self) -> &'static str {
        "sluice-failed-attempts"
    }

    fn read_after_attempt(
        &self,
        context: &FinalizerInterceptorContextRef<'_>,
        _components: &RuntimeComponents,
        _cfg: &mut ConfigBag,
    ) -> Result<(), Box<dyn std::error::Error + Send + Sync>> {
        if let Some(Err(e)) = context.output_or_error() {
            // The error and its causes, without the debug dump of DisplayErrorContext.
            let text = sluice_api::error::chain(e).map(|c| c.to_string()).collect::<Vec<_>>().join(": ");
            self.0.note(&ConnectError::retriable(format!("an S3 request failed ({text}); it is retried")));
        }
        Ok(())
    }
}

impl Store {
    /// A client for the store; `setbacks`: where a task's failed attempts are noted.
    pub async fn connect(cfg: &S3SinkConfig, setbacks: Option<Setbacks>) -> Self {
        let mut loader = aws_config::defaults(BehaviorVersion::latest()).region(Region::new(cfg.region.clone()));
        if let Some(id) = &cfg.access_key_id {
            loader = loader.credentials_provider(Credentials::new(id, cfg.secret_access_key.expose(), None, None, "connector-config"));
        }
        let sdk = loader.load().await;
        let retry = RetryConfig::standard()
            .with_max_attempts(cfg.part_retries + 1)
            .with_initial_backoff(Duration::from_millis(cfg.retry_backoff_ms.max(1)))
            .with_max_backoff(Duration::from_secs(20));
        let timeouts =
            TimeoutConfig::builder().connect_timeout(Duration::from_secs(5)).operation_attempt_timeout(Duration::from_secs(120)).build();
        let mut conf = aws_sdk_s3::config::Builder::from(&sdk).retry_config(retry).timeout_config(timeouts);
        if let Some(setbacks) = setbacks {
            conf = conf.interceptor(FailedAttempts(setbacks));
        }
        if let Some(url) = &cfg.store_url {
            // Third-party stores: path-style addressing, and checksums only where S3 requires
            // them (several reject the SDK's default CRC32 trailers).
            conf = conf
                .endpoint_url(url)
                .force_path_style(cfg.path_style)
                .request_checksum_calculation(RequestChecksumCalculation::WhenRequired)
                .response_checksum_validation(ResponseChecksumValidation::WhenRequired);
        }
        Self { client: Client::from_conf(conf.build()), bucket: cfg.bucket.clone(), headers: WriteHeaders::new(cfg) }
    }

    /// Checks that the bucket exists and the credentials may use it. Definite answers
    /// (403, 404) are fatal; an unreachable store is retriable.
    pub async fn check_bucket(&self) -> ConnectResult<()> {
        match self.client.head_bucket().bucket(&self.bucket).send().await {
            Ok(_) => Ok(()),
            Err(e) => Err(self.classify("checking the bucket", None, e)),
        }
    }

    /// Aborts the unfinished multipart uploads under `prefix` whose file name starts with
    /// `name_prefix`: what a crashed predecessor of this task left behind for a partition it
    /// now owns. Best effort: returns how many were aborted, logs failures.
    pub async fn abort_stale_uploads(&self, prefix: &str, name_prefix: &str) -> usize {
        let mut aborted = 0;
        let (mut key_marker, mut id_marker) = (None, None);
        loop {
            let page = match self
                .client
                .list_multipart_uploads()
                .bucket(&self.bucket)
                .prefix(prefix)
                .set_key_marker(key_marker)
                .set_upload_id_marker(id_marker)
                .send()
                .await
            {
                Ok(p) => p,
                Err(e) => {
                    tracing::warn!(prefix, error = %sluice_api::error::trace_of(&e), "could not list unfinished multipart uploads; leaving them to a bucket lifecycle rule");
                    return aborted;
                }
            };
            for u in page.uploads() {
                let (Some(key), Some(id)) = (u.key(), u.upload_id()) else { continue };
                if !key.rsplit('/').next().is_some_and(|name| name.starts_with(name_prefix)) {
                    continue;
                }
                match self.client.abort_multipart_upload().bucket(&self.bucket).key(key).upload_id(id).send().await {
                    Ok(_) => aborted += 1,
                    Err(e) => {
                        tracing::warn!(key, error = %sluice_api::error::trace_of(&e), "could not abort an unfinished multipart upload")
                    }
                }
            }
            if page.is_truncated() != Some(true) {
                return aborted;
            }
            key_marker = page.next_key_marker().map(str::to_owned);
            id_marker = page.next_upload_id_marker().map(str::to_owned);
        }
    }

    pub fn upload(&self, key: String, part_size: usize) -> Upload {
        Upload { key, buf: Vec::new(), upload_id: None, parts: Vec::new(), part_size }
    }

    /// Turns an SDK error into a retriable or fatal error that says what to do.
    pub fn classify<E>(&self, what: &str, key: Option<&str>, err: SdkError<E, HttpResponse>) -> ConnectError
    where
        E: ProvideErrorMetadata + std::error::Error + Send + Sync + 'static,
    {
        let target = match key {
            Some(k) => format!("s3://{}/{k}", self.bucket),
            None => format!("s3://{}", self.bucket),
        };
        let (status, code, message) = match &err {
            SdkError::ServiceError(se) => {
                (Some(se.raw().status().as_u16()), se.err().code().map(str::to_owned), se.err().message().map(str::to_owned))
            }
            SdkError::ResponseError(r) => (Some(r.raw().status().as_u16()), None, None),
            _ => (None, None, None),
        };
        let detail = match (&code, &message, status) {
            (Some(c), Some(m), _) => format!("{c}: {m}"),
            (Some(c), None, _) => c.clone(),
            (None, _, Some(s)) => format!("HTTP {s}"),
            (None, _, None) => "connection failed or timed out".to_owned(),
        };
        let code = code.unwrap_or_default();
        if code == "NoSuchBucket" || (status == Some(404) && key.is_none()) {
            return ConnectError::fatal_from(
                format!("{what} failed: the bucket {:?} does not exist ({detail}); create it or fix s3.bucket.name", self.bucket),
                err,
            );
        }
        match (status, code.as_str()) {
            (_, "InvalidAccessKeyId" | "SignatureDoesNotMatch" | "AccessDenied" | "InvalidToken" | "ExpiredToken" | "AuthorizationHeaderMalformed")
            | (Some(401 | 403), _) => ConnectError::fatal_from(
                format!("{what} for {target} was refused ({detail}); check aws.access.key.id / aws.secret.access.key (or the default AWS credentials) and the bucket policy"),
                err,
            ),
            (Some(s), _) if s >= 500 || s == 429 => ConnectError::retriable_from(format!("{what} for {target} failed ({detail}); will retry"), err),
            (_, "RequestTimeout" | "SlowDown" | "Throttling" | "ThrottlingException" | "InternalError" | "ServiceUnavailable") => {
                ConnectError::retriable_from(format!("{what} for {target} failed ({detail}); will retry"), err)
            }
            (None, _) => match err {
                SdkError::ConstructionFailure(_) => ConnectError::fatal_from(format!("{what} for {target}: the request could not be built"), err),
                other => ConnectError::retriable_from(format!("{what} for {target} failed: the store did not answer ({detail}); will retry"), other),
            },
            _ => ConnectError::fatal_from(format!("{what} for {target} failed ({detail})"), err),
        }
    }
}

/// One object being written. See the module docs for the guarantees.
pub struct Upload {
    pub key: String,
    buf: Vec<u8>,
    upload_id: Option<String>,
    parts: Vec<CompletedPart>,
    part_size: usize,
}

impl Upload {
    /// Where encoders append the object's bytes.
    pub fn buffer(&mut self) -> &mut Vec<u8> {
        &mut self.buf
    }

    /// Sends every full part in the buffer (starting the multipart upload if needed).
    pub async fn ship_full_parts(&mut self, store: &Store) -> ConnectResult<()> {
        while self.buf.len() >= self.part_size {
            self.send_part(store, self.part_size).await?;
        }
        Ok(())
    }

    async fn send_part(&mut self, store: &Store, len: usize) -> ConnectResult<()> {
        let id = match &self.upload_id {
            Some(id) => id.clone(),
            None => {
                let h = &store.headers;
                let (algorithm, customer_key, customer_key_md5) = h.customer();
                let out = store
                    .client
                    .create_multipart_upload()
                    .bucket(&store.bucket)
                    .key(&self.key)
                    .set_server_side_encryption(h.sse.clone())
                    .set_ssekms_key_id(h.kms_key_id.clone())
                    .set_sse_customer_algorithm(algorithm)
                    .set_sse_customer_key(customer_key)
                    .set_sse_customer_key_md5(customer_key_md5)
                    .set_acl(h.acl.clone())
                    .send()
                    .await
                    .map_err(|e| store.classify("starting a multipart upload", Some(&self.key), e))?;
                let id = out.upload_id.ok_or_else(|| {
                    ConnectError::retriable(format!("the store started a multipart upload of {} without an upload id", self.key))
                })?;
                self.upload_id = Some(id.clone());
                id
            }
        };
        let number = self.parts.len() as i32 + 1;
        let body = ByteStream::from(self.buf[..len].to_vec());
        let (algorithm, customer_key, customer_key_md5) = store.headers.customer();
        let out = store
            .client
            .upload_part()
            .bucket(&store.bucket)
            .key(&self.key)
            .upload_id(&id)
            .part_number(number)
            .set_sse_customer_algorithm(algorithm)
            .set_sse_customer_key(customer_key)
            .set_sse_customer_key_md5(customer_key_md5)
            .body(body)
            .send()
            .await
            .map_err(|e| store.classify(&format!("uploading part {number}"), Some(&self.key), e))?;
        self.parts.push(CompletedPart::builder().part_number(number).set_e_tag(out.e_tag).build());
        self.buf.drain(..len);
        tracing::debug!(key = %self.key, part = number, "uploaded part");
        Ok(())
    }

    /// Makes the object visible with everything written to the buffer.
    pub async fn complete(&mut self, store: &Store) -> ConnectResult<()> {
        let Some(id) = self.upload_id.clone() else {
            let body = ByteStream::from(self.buf.clone());
            let h = &store.headers;
            let (algorithm, customer_key, customer_key_md5) = h.customer();
            store
                .client
                .put_object()
                .bucket(&store.bucket)
                .key(&self.key)
                .set_server_side_encryption(h.sse.clone())
                .set_ssekms_key_id(h.kms_key_id.clone())
                .set_sse_customer_algorithm(algorithm)
                .set_sse_customer_key(customer_key)
                .set_sse_customer_key_md5(customer_key_md5)
                .set_acl(h.acl.clone())
                .body(body)
                .send()
                .await
                .map_err(|e| store.classify("writing the object", Some(&self.key), e))?;
            self.buf.clear();
            return Ok(());
        };
        if !self.buf.is_empty() {
            let len = self.buf.len();
            self.send_part(store, len).await?;
        }
        let done = CompletedMultipartUpload::builder().set_parts(Some(self.parts.clone())).build();
        let res = store
            .client
            .complete_multipart_upload()
            .bucket(&store.bucket)
            .key(&self.key)
            .upload_id(&id)
            .multipart_upload(done)
            .send()
            .await;
        match res {
            Ok(_) => {}
            // A retry after a lost answer: the first attempt completed it.
            Err(e) if e.code() == Some("NoSuchUpload") && self.exists(store).await => {}
            Err(e) => return Err(store.classify("completing the multipart upload", Some(&self.key), e)),
        }
        self.upload_id = None;
        self.parts.clear();
        Ok(())
    }

    async fn exists(&self, store: &Store) -> bool {
        let (algorithm, customer_key, customer_key_md5) = store.headers.customer();
        store
            .client
            .head_object()
            .bucket(&store.bucket)
            .key(&self.key)
            .set_sse_customer_algorithm(algorithm)
            .set_sse_customer_key(customer_key)
            .set_sse_customer_key_md5(customer_key_md5)
            .send()
            .await
            .is_ok()
    }

    /// Drops an unfinished multipart upload (best effort: logged, not returned).
    pub async fn abort(&mut self, store: &Store) {
        self.buf = Vec::new();
        let Some(id) = self.upload_id.take() else { return };
        self.parts.clear();
        if let Err(e) = store.client.abort_multipart_upload().bucket(&store.bucket).key(&self.key).upload_id(&id).send().await {
            tracing::warn!(key = %self.key, error = %sluice_api::error::trace_of(&e), "could not abort an incomplete multipart upload; a bucket lifecycle rule can remove it");
        }
    }
}
