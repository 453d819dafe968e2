//! [`ConsoleError`]: what can go wrong while serving a page, and the error page it becomes.

use askama::Template;
use axum::http::header::RETRY_AFTER;
use axum::http::{HeaderValue, StatusCode};
use axum::response::{Html, IntoResponse, Response};
use imagegate_store::StoreError;

use crate::layout::Layout;
use crate::session::SessionError;

/// A page could not be served.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum ConsoleError {
    /// The store failed.
    #[error(transparent)]
    Store(#[from] StoreError),
    /// The session store failed.
    #[error(transparent)]
    Session(#[from] SessionError),
    /// A template failed to render.
    #[error("template: {0}")]
    Render(#[from] askama::Error),
    /// No such page or record (or not the user's).
    #[error("not found")]
    NotFound,
    /// The page is for admins.
    #[error("forbidden")]
    Forbidden,
    /// A POST came without the right CSRF token.
    #[error("missing or invalid CSRF token")]
    CsrfRejected,
    /// The request cannot be understood.
    #[error("bad request: {0}")]
    BadRequest(String),
    /// Too many sign-ins are waiting for their password checks.
    #[error("too many sign-ins at once")]
    Busy,
    /// A page asked with a method it does not take.
    #[error("method not allowed")]
    MethodNotAllowed,
}

#[derive(Template)]
#[template(path = "error.html")]
struct ErrorPage {
    layout: Layout,
    heading: &'static str,
    detail: String,
}

/// Seconds a visitor is asked to wait (`Retry-After`) when the database or session store is
/// out of reach.
const RETRY_AFTER_UNAVAILABLE_SECS: u32 = 5;

impl ConsoleError {
    /// Whether the page may work again in a moment (the database or the session store could not
    /// be reached, or too many sign-ins were waiting), rather than failing on this request.
    pub fn is_unavailable(&self) -> bool {
        match self {
            Self::Store(error) => error.is_unavailable(),
            Self::Session(error) => error.is_unavailable(),
            Self::Busy => true,
            _ => false,
        }
    }

    fn status_and_text(&self) -> (StatusCode, &'static str, String) {
        match self {
            Self::NotFound | Self::Store(StoreError::NotFound { .. }) => (
                StatusCode::NOT_FOUND,
                "Not found",
                "There is nothing here, or it is not yours.".to_owned(),
            ),
            Self::Forbidden => (
                StatusCode::FORBIDDEN,
                "Admins only",
                "This page is for administrators. Ask an admin if you need access.".to_owned(),
            ),
            Self::CsrfRejected => (
                StatusCode::FORBIDDEN,
                "Form expired",
                "The form was missing its security token or it has expired. Go back, reload the page and try again."
                    .to_owned(),
            ),
            Self::Store(StoreError::Forbidden(detail)) => (StatusCode::FORBIDDEN, "Not allowed", detail.clone()),
            Self::BadRequest(detail) => (StatusCode::BAD_REQUEST, "Bad request", detail.clone()),
            Self::MethodNotAllowed => (
                StatusCode::METHOD_NOT_ALLOWED,
                "Method not allowed",
                "This page does not take that kind of request.".to_owned(),
            ),
            Self::Store(StoreError::Invalid(detail)) => (StatusCode::BAD_REQUEST, "Bad request", detail.clone()),
            Self::Busy => (
                StatusCode::SERVICE_UNAVAILABLE,
                "Busy",
                "Too many sign-ins are being checked at the moment. Wait a few seconds and try again."
                    .to_owned(),
            ),
            _ if self.is_unavailable() => (
                StatusCode::SERVICE_UNAVAILABLE,
                "Temporarily unavailable",
                "The console cannot reach its database or its session store at the moment. Wait a few seconds and try again."
                    .to_owned(),
            ),
            Self::Store(_) | Self::Session(_) | Self::Render(_) => (
                StatusCode::INTERNAL_SERVER_ERROR,
                "Something went wrong",
                "The server could not complete this request. Try again; if it keeps failing, check the server log."
                    .to_owned(),
            ),
        }
    }
}

impl IntoResponse for ConsoleError {
    fn into_response(self) -> Response {
        let (status, heading, detail) = self.status_and_text();
        if matches!(self, Self::Busy) {
            // Under the very load it turns away: one line each would flood the log.
            tracing::debug!("console sign-in turned away: too many waiting");
        } else if status == StatusCode::SERVICE_UNAVAILABLE {
            tracing::warn!(error = %self, "console page unavailable");
        } else if status.is_server_error() {
            tracing::error!(error = %self, "console page failed");
        }
        let page = ErrorPage {
            layout: Layout::bare(heading),
            heading,
            detail,
        };
        let mut response = match page.render() {
            Ok(html) => (status, Html(html)).into_response(),
            Err(_) => (status, heading).into_response(),
        };
        if status == StatusCode::SERVICE_UNAVAILABLE {
            response
                .headers_mut()
                .insert(RETRY_AFTER, HeaderValue::from(RETRY_AFTER_UNAVAILABLE_SECS));
        }
        response
    }
}

/// Result of a page handler.
pub(crate) type PageResult<T = Response> = Result<T, ConsoleError>;

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used)]

    use super::*;

    fn status_and_retry_after(error: ConsoleError) -> (StatusCode, Option<String>) {
        let response = error.into_response();
        let retry_after = response
            .headers()
            .get(RETRY_AFTER)
            .map(|v| v.to_str().unwrap().to_owned());
        (response.status(), retry_after)
    }

    #[test]
    fn an_unreachable_store_asks_the_visitor_to_come_back() {
        for error in [
            ConsoleError::Session(SessionError::unavailable("redis: connection refused")),
            ConsoleError::Store(StoreError::Unavailable("pool timed out".to_owned())),
            ConsoleError::Busy,
        ] {
            assert_eq!(
                status_and_retry_after(error),
                (StatusCode::SERVICE_UNAVAILABLE, Some("5".to_owned()))
            );
        }
    }

    #[test]
    fn other_store_failures_stay_internal_errors() {
        for error in [
            ConsoleError::Session(SessionError::new("cannot seal the session")),
            ConsoleError::Store(StoreError::Corrupt("role".to_owned())),
        ] {
            assert_eq!(
                status_and_retry_after(error),
                (StatusCode::INTERNAL_SERVER_ERROR, None)
            );
        }
    }
}
