//! The one place where errors become HTTP responses: the OpenAI envelope plus retry headers.

use std::time::Duration;

use axum::http::{HeaderName, HeaderValue, StatusCode, header};
use axum::response::{IntoResponse, Response};
use imagegate_codec::ApiError;
use imagegate_domain::RequestError;

/// An error on its way to the client.
#[derive(Debug)]
pub struct HttpError {
    pub api: ApiError,
    pub retry_after: Option<Duration>,
    /// `x-should-retry` when it depends on more than the error's class (see [`Self::with_should_retry`]).
    pub should_retry: Option<bool>,
}

impl HttpError {
    pub fn new(api: ApiError) -> Self {
        Self {
            api,
            retry_after: None,
            should_retry: None,
        }
    }

    pub fn with_retry_after(mut self, retry_after: Option<Duration>) -> Self {
        self.retry_after = retry_after;
        self
    }

    /// Overrides the class's `x-should-retry` advice, e.g. for a usage limit that resets soon
    /// enough for the SDKs to wait it out.
    pub fn with_should_retry(mut self, retry: bool) -> Self {
        self.should_retry = Some(retry);
        self
    }
}

impl From<ApiError> for HttpError {
    fn from(api: ApiError) -> Self {
        Self::new(api)
    }
}

impl From<RequestError> for HttpError {
    fn from(err: RequestError) -> Self {
        Self::new(ApiError::from(err))
    }
}

impl IntoResponse for HttpError {
    fn into_response(self) -> Response {
        let status = StatusCode::from_u16(self.api.status()).unwrap_or(StatusCode::INTERNAL_SERVER_ERROR);
        let mut response = (status, self.api.to_json_bytes()).into_response();
        let headers = response.headers_mut();
        headers.insert(header::CONTENT_TYPE, HeaderValue::from_static("application/json"));
        if let Some(wait) = self.retry_after {
            let secs = wait.as_secs() + u64::from(wait.subsec_nanos() > 0);
            headers.insert(header::RETRY_AFTER, HeaderValue::from(secs.max(1)));
            if let Ok(ms) = HeaderValue::from_str(&wait.as_millis().max(1).to_string()) {
                headers.insert(HeaderName::from_static("retry-after-ms"), ms);
            }
        }
        if let Some(retry) = self.should_retry.or_else(|| self.api.should_retry()) {
            let value = HeaderValue::from_static(if retry { "true" } else { "false" });
            headers.insert(HeaderName::from_static("x-should-retry"), value);
        }
        response
    }
}
