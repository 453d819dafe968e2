//! [`ConsoleError`]: what can go wrong while serving a page, and the error page it becomes.

use askama::Template;
use axum::http::StatusCode;
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
}

#[derive(Template)]
#[template(path = "error.html")]
struct ErrorPage {
    layout: Layout,
    heading: &'static str,
    detail: String,
}

impl ConsoleError {
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
            Self::BadRequest(detail) => (StatusCode::BAD_REQUEST, "Bad request", detail.clone()),
            Self::Store(StoreError::Invalid(detail)) => (StatusCode::BAD_REQUEST, "Bad request", detail.clone()),
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
        if status.is_server_error() {
            tracing::error!(error = %self, "console page failed");
        }
        let page = ErrorPage {
            layout: Layout::bare(heading),
            heading,
            detail,
        };
        match page.render() {
            Ok(html) => (status, Html(html)).into_response(),
            Err(_) => (status, heading).into_response(),
        }
    }
}

/// Result of a page handler.
pub(crate) type PageResult<T = Response> = Result<T, ConsoleError>;
