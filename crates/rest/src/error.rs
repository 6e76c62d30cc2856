//! The one error shape of the API, Connect's `ErrorMessage`: `{"error_code": N, "message": "…"}`
//! with the HTTP status equal to `error_code`.

use axum::http::StatusCode;
use axum::response::{IntoResponse, Response};
use axum::Json;
use serde::Serialize;
use sluice_runtime::herder::HerderError;
use sluice_runtime::logging::LoggingError;

/// An error response. Every handler and extractor fails with this type, so no request can
/// end in a body of another shape.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct ApiError {
    status: StatusCode,
    message: String,
}

#[derive(Serialize)]
struct ErrorMessage<'a> {
    error_code: u16,
    message: &'a str,
}

impl ApiError {
    pub fn new(status: StatusCode, message: impl Into<String>) -> Self {
        Self { status, message: message.into() }
    }

    pub fn bad_request(message: impl Into<String>) -> Self {
        Self::new(StatusCode::BAD_REQUEST, message)
    }

    pub fn not_found(message: impl Into<String>) -> Self {
        Self::new(StatusCode::NOT_FOUND, message)
    }

    /// What Connect (Jersey) answers for a path no resource serves, including a task id that
    /// is not a number.
    pub fn no_such_path() -> Self {
        Self::not_found("HTTP 404 Not Found")
    }

    /// What Connect answers for a known path with a method it does not serve.
    pub fn method_not_allowed() -> Self {
        Self::new(StatusCode::METHOD_NOT_ALLOWED, "HTTP 405 Method Not Allowed")
    }

    /// What Connect answers for a body whose `Content-Type` is not JSON.
    pub fn unsupported_media_type() -> Self {
        Self::new(StatusCode::UNSUPPORTED_MEDIA_TYPE, "HTTP 415 Unsupported Media Type")
    }

    pub fn status(&self) -> StatusCode {
        self.status
    }

    pub fn message(&self) -> &str {
        &self.message
    }
}

impl std::fmt::Display for ApiError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{} {}", self.status.as_u16(), self.message)
    }
}

impl std::error::Error for ApiError {}

impl IntoResponse for ApiError {
    fn into_response(self) -> Response {
        if self.status.is_server_error() {
            tracing::warn!(status = self.status.as_u16(), message = %self.message, "request failed");
        }
        let body = ErrorMessage { error_code: self.status.as_u16(), message: &self.message };
        (self.status, Json(body)).into_response()
    }
}

impl From<HerderError> for ApiError {
    fn from(e: HerderError) -> Self {
        let status = StatusCode::from_u16(e.status_code()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        Self::new(status, e.to_string())
    }
}

impl From<LoggingError> for ApiError {
    /// An unknown level is 404, as in Connect's `LoggingResource` (it throws `NotFoundException`
    /// with "invalid log level 'X'."); a name that cannot be a target is 400; failing to swap
    /// the filter is ours, 500.
    fn from(e: LoggingError) -> Self {
        let status = match e {
            LoggingError::InvalidLevel(_) | LoggingError::UnknownLogger(_) => StatusCode::NOT_FOUND,
            LoggingError::InvalidName(_) | LoggingError::InvalidDirective(_) => StatusCode::BAD_REQUEST,
            LoggingError::Apply(_) => StatusCode::INTERNAL_SERVER_ERROR,
        };
        Self::new(status, e.to_string())
    }
}

/// What handlers return.
pub type ApiResult<T> = Result<T, ApiError>;
