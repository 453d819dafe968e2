//! The embedded stylesheet and script.

use axum::http::header::{self, HeaderValue};
use axum::response::IntoResponse;

const STYLE_CSS: &str = include_str!("../assets/style.css");
const CONSOLE_JS: &str = include_str!("../assets/console.js");

/// Cached for an hour: the files only change with the binary.
const CACHE: HeaderValue = HeaderValue::from_static("public, max-age=3600");

/// `GET /assets/style.css`
pub(crate) async fn stylesheet() -> impl IntoResponse {
    (
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/css; charset=utf-8"),
            ),
            (header::CACHE_CONTROL, CACHE),
        ],
        STYLE_CSS,
    )
}

/// `GET /assets/console.js`
pub(crate) async fn script() -> impl IntoResponse {
    (
        [
            (
                header::CONTENT_TYPE,
                HeaderValue::from_static("text/javascript; charset=utf-8"),
            ),
            (header::CACHE_CONTROL, CACHE),
        ],
        CONSOLE_JS,
    )
}
