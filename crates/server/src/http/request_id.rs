//! `x-request-id` on every response: the client's own if it sent a sane one, else a new one.

use axum::extract::Request;
use axum::http::{HeaderName, HeaderValue};
use axum::middleware::Next;
use axum::response::Response;
use tracing::Instrument;

pub static X_REQUEST_ID: HeaderName = HeaderName::from_static("x-request-id");

/// The id of the request being served, available to handlers as an extension.
#[derive(Debug, Clone)]
pub struct RequestId(pub String);

pub async fn layer(mut request: Request, next: Next) -> Response {
    let id = request
        .headers()
        .get(&X_REQUEST_ID)
        .and_then(|v| v.to_str().ok())
        .filter(|v| is_sane(v))
        .map(str::to_owned)
        .unwrap_or_else(new_id);
    request.extensions_mut().insert(RequestId(id.clone()));
    let span = tracing::info_span!("request", request_id = %id);
    let mut response = next.run(request).instrument(span).await;
    if let Ok(value) = HeaderValue::from_str(&id) {
        response.headers_mut().insert(X_REQUEST_ID.clone(), value);
    }
    response
}

fn is_sane(value: &str) -> bool {
    !value.is_empty()
        && value.len() <= 128
        && value
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.'))
}

/// `req_` followed by 24 hex digits.
pub fn new_id() -> String {
    format!(
        "req_{}",
        uuid::Uuid::new_v4()
            .simple()
            .to_string()
            .get(..24)
            .unwrap_or_default()
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn ids_are_unique_and_shaped() {
        let a = new_id();
        let b = new_id();
        assert_ne!(a, b);
        assert_eq!(a.len(), 28);
        assert!(a.starts_with("req_"));
    }

    #[test]
    fn client_ids_are_checked() {
        assert!(is_sane("abc-123_x.y"));
        assert!(!is_sane(""));
        assert!(!is_sane("a b"));
        assert!(!is_sane(&"x".repeat(129)));
    }
}
