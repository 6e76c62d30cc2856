//! A TLS connector for tokio-postgres that says which configuration key to look at when the
//! server refuses the client's certificate (or wants one and got none).
//!
//! With TLS 1.3 the server checks the client's certificate after the client has finished
//! its side of the handshake, so its alert arrives with the first read of the session, not
//! from the handshake itself: both the handshake and the stream map such an alert into a
//! [`CertificateRefused`] error, which `catalog::classify_connect_error` and the sink's
//! status trace show as they are.

use std::future::Future;
use std::io;
use std::path::PathBuf;
use std::pin::Pin;
use std::task::{Context, Poll};

use rustls::AlertDescription;
use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio_postgres::tls::{ChannelBinding, MakeTlsConnect, TlsConnect, TlsStream};
use tokio_postgres_rustls::MakeRustlsConnect;

use super::KeyNames;

/// The server turned the client's certificate down (or asked for one and got none).
#[derive(Debug)]
pub struct CertificateRefused {
    /// The configuration key to change.
    pub key: &'static str,
    pub message: String,
}

impl std::fmt::Display for CertificateRefused {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

impl std::error::Error for CertificateRefused {}

/// The [`CertificateRefused`] somewhere in `e`'s source chain.
pub fn find_refusal<'a>(e: &'a (dyn std::error::Error + 'static)) -> Option<&'a CertificateRefused> {
    sluice_api::error::chain(e).find_map(|err| {
        err.downcast_ref::<CertificateRefused>()
            .or_else(|| err.downcast_ref::<io::Error>().and_then(|io| io.get_ref()).and_then(|i| i.downcast_ref::<CertificateRefused>()))
    })
}

/// What turns a TLS alert into a [`CertificateRefused`].
#[derive(Debug, Clone)]
struct Explain {
    names: &'static KeyNames,
    cert: Option<PathBuf>,
}

impl Explain {
    fn map(&self, e: io::Error) -> io::Error {
        let Some(alert) = e.get_ref().and_then(|i| i.downcast_ref::<rustls::Error>()).and_then(|t| match t {
            rustls::Error::AlertReceived(a) => Some(*a),
            _ => None,
        }) else {
            return e;
        };
        use AlertDescription as A;
        let about_cert = matches!(
            alert,
            A::BadCertificate
                | A::UnsupportedCertificate
                | A::CertificateRevoked
                | A::CertificateExpired
                | A::CertificateUnknown
                | A::UnknownCA
                | A::AccessDenied
                | A::CertificateRequired
                | A::DecryptError
                | A::HandshakeFailure
        );
        if !about_cert {
            return e;
        }
        let refused = match &self.cert {
            Some(path) => CertificateRefused {
                key: self.names.cert,
                message: format!(
                    "the server refused the client certificate in {} {} (TLS alert {alert:?}); is it signed by a CA in the server's ssl_ca_file, \
                     and not expired?",
                    self.names.cert,
                    path.display()
                ),
            },
            None => CertificateRefused {
                key: self.names.cert,
                message: format!(
                    "the server wants a client certificate (TLS alert {alert:?}); set {} and {}",
                    self.names.cert, self.names.key
                ),
            },
        };
        io::Error::new(e.kind(), refused)
    }
}

/// [`MakeRustlsConnect`] with refusals explained.
pub struct ExplainingConnect {
    inner: MakeRustlsConnect,
    explain: Explain,
}

impl ExplainingConnect {
    pub(super) fn new(inner: MakeRustlsConnect, names: &'static KeyNames, cert: Option<PathBuf>) -> Self {
        Self { inner, explain: Explain { names, cert } }
    }
}

impl<S> MakeTlsConnect<S> for ExplainingConnect
where
    S: AsyncRead + AsyncWrite + Unpin + Send + 'static,
{
    type Stream = ExplainingStream<<MakeRustlsConnect as MakeTlsConnect<S>>::Stream>;
    type TlsConnect = ExplainingTlsConnect<<MakeRustlsConnect as MakeTlsConnect<S>>::TlsConnect>;
    type Error = <MakeRustlsConnect as MakeTlsConnect<S>>::Error;

    fn make_tls_connect(&mut self, domain: &str) -> Result<Self::TlsConnect, Self::Error> {
        let inner = <MakeRustlsConnect as MakeTlsConnect<S>>::make_tls_connect(&mut self.inner, domain)?;
        Ok(ExplainingTlsConnect { inner, explain: self.explain.clone() })
    }
}

pub struct ExplainingTlsConnect<T> {
    inner: T,
    explain: Explain,
}

impl<S, T> TlsConnect<S> for ExplainingTlsConnect<T>
where
    T: TlsConnect<S, Error = io::Error>,
    T::Future: Unpin,
{
    type Stream = ExplainingStream<T::Stream>;
    type Error = io::Error;
    type Future = ExplainingFuture<T::Future>;

    fn connect(self, stream: S) -> Self::Future {
        ExplainingFuture { inner: self.inner.connect(stream), explain: Some(self.explain) }
    }
}

pub struct ExplainingFuture<F> {
    inner: F,
    explain: Option<Explain>,
}

impl<F, St> Future for ExplainingFuture<F>
where
    F: Future<Output = io::Result<St>> + Unpin,
{
    type Output = io::Result<ExplainingStream<St>>;

    fn poll(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<Self::Output> {
        let this = &mut *self;
        match Pin::new(&mut this.inner).poll(cx) {
            Poll::Pending => Poll::Pending,
            Poll::Ready(r) => {
                let explain = this.explain.take().expect("ExplainingFuture polled after completion");
                Poll::Ready(match r {
                    Ok(inner) => Ok(ExplainingStream { inner, explain }),
                    Err(e) => Err(explain.map(e)),
                })
            }
        }
    }
}

pub struct ExplainingStream<S> {
    inner: S,
    explain: Explain,
}

impl<S: TlsStream + Unpin> TlsStream for ExplainingStream<S> {
    fn channel_binding(&self) -> ChannelBinding {
        self.inner.channel_binding()
    }
}

impl<S: AsyncRead + Unpin> AsyncRead for ExplainingStream<S> {
    fn poll_read(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &mut ReadBuf<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        Pin::new(&mut this.inner).poll_read(cx, buf).map_err(|e| this.explain.map(e))
    }
}

impl<S: AsyncWrite + Unpin> AsyncWrite for ExplainingStream<S> {
    fn poll_write(mut self: Pin<&mut Self>, cx: &mut Context<'_>, buf: &[u8]) -> Poll<io::Result<usize>> {
        let this = &mut *self;
        Pin::new(&mut this.inner).poll_write(cx, buf).map_err(|e| this.explain.map(e))
    }

    fn poll_flush(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        Pin::new(&mut this.inner).poll_flush(cx).map_err(|e| this.explain.map(e))
    }

    fn poll_shutdown(mut self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        let this = &mut *self;
        Pin::new(&mut this.inner).poll_shutdown(cx).map_err(|e| this.explain.map(e))
    }
}
