//! The web console of imagegate: sign-in, a user's API keys and usage, and admin pages for
//! upstream accounts, groups, users and everyone's usage.
//!
//! Pages are rendered on the server from [askama](https://docs.rs/askama) templates compiled into
//! the binary, with one embedded stylesheet and one tiny script (the copy button). [`router`]
//! returns an axum [`Router`](axum::Router) that mounts every page at the root, to be merged with
//! the gateway's `/v1` router:
//!
//! | path | who | what |
//! |---|---|---|
//! | `/login`, `/logout` | anyone | sign in and out |
//! | `/keys` | signed in | own keys: create (shown once, with curl and Python snippets), disable, delete |
//! | `/usage` | signed in | own requests, filters, totals, daily SVG chart |
//! | `/admin/accounts` | admins | accounts with live pool state; add, edit, disable, test |
//! | `/admin/groups`, `/admin/users` | admins | groups and users |
//! | `/admin/usage` (`.csv`) | admins | everyone's usage with filters and CSV export |
//!
//! Security: passwords are argon2id hashes ([`hash_password`]); the session cookie carries a random
//! 256-bit token (HttpOnly, SameSite=Lax, Secure over TLS or when configured) whose SHA-256 keys a
//! server-side [`SessionStore`]; every POST must carry the session's CSRF token (checked in one
//! middleware, in constant time); failed logins are limited per user name and per client address;
//! upstream credentials can be written but are never rendered.
//!
//! The gateway supplies live pool state and account tests through [`ConsoleBackend`].
//!
//! ```
//! use std::sync::Arc;
//! use axum::body::Body;
//! use axum::http::{Request, StatusCode};
//! use imagegate_console::{ConsoleConfig, ConsoleState, StubBackend, router};
//! use imagegate_store::{MasterKey, connect};
//! use tower::ServiceExt;
//!
//! # #[tokio::main(flavor = "current_thread")]
//! # async fn main() -> Result<(), Box<dyn std::error::Error>> {
//! let dir = tempfile::tempdir()?;
//! let master_key = MasterKey::load_or_create(dir.path(), None)?;
//! let url = format!("sqlite://{}?mode=rwc", dir.path().join("imagegate.db").display());
//! let store = connect(&url, &master_key).await?;
//!
//! let state = ConsoleState::new(store, Arc::new(StubBackend::default()), ConsoleConfig::default());
//! let app = router(state);
//!
//! // Signed-out visitors are sent to the login page.
//! let response = app.clone().oneshot(Request::get("/keys").body(Body::empty())?).await?;
//! assert_eq!(response.status(), StatusCode::SEE_OTHER);
//! assert_eq!(response.headers()["location"], "/login?next=%2Fkeys");
//!
//! let login = app.oneshot(Request::get("/login").body(Body::empty())?).await?;
//! assert_eq!(login.status(), StatusCode::OK);
//! # Ok(())
//! # }
//! ```

mod assets;
mod auth;
mod backend;
mod chart;
mod check_line;
mod client_addr;
mod cookies;
mod csrf;
mod csv;
mod dates;
mod error;
mod extract;
mod form;
mod headers;
mod layout;
mod pages;
mod ratelimit;
mod session;
mod state;

pub use auth::{
    MAX_PASSWORD_LEN, MIN_PASSWORD_LEN, PasswordError, generate_password, hash_password, verify_password,
};
pub use backend::{ConsoleBackend, StubBackend};
pub use error::ConsoleError;
pub use ratelimit::{LoginLimit, SharedLoginCounter, Subject as LoginSubject};
pub use session::{
    Flash, FlashKind, MemorySessionStore, PasswordStamp, Reveal, Session, SessionError, SessionKey,
    SessionStore, SessionToken,
};
pub use state::{ConsoleConfig, ConsoleState};

use axum::Router;
use axum::routing::{get, post};

/// The console's pages and assets, mounted at the root, with security headers and the CSRF check
/// on every POST. Merge it with the gateway's API router.
pub fn router(state: ConsoleState) -> Router {
    let user_pages = Router::new()
        .route("/", get(pages::login::home))
        .route("/login", get(pages::login::form).post(pages::login::submit))
        .route(
            "/logout",
            get(pages::login::logout_form).post(pages::login::logout),
        )
        .route("/keys", get(pages::keys::list).post(pages::keys::create))
        .route("/keys/{id}/disable", post(pages::keys::disable))
        .route("/keys/{id}/enable", post(pages::keys::enable))
        .route(
            "/keys/{id}/delete",
            get(pages::keys::confirm_delete).post(pages::keys::delete),
        )
        .route("/usage", get(pages::usage::page));
    let admin_pages = Router::new()
        .route("/admin", get(pages::admin_accounts::home))
        .route(
            "/admin/accounts",
            get(pages::admin_accounts::list).post(pages::admin_accounts::create),
        )
        .route(
            "/admin/accounts/{id}",
            get(pages::admin_accounts::edit_form).post(pages::admin_accounts::update),
        )
        .route(
            "/admin/accounts/{id}/disable",
            post(pages::admin_accounts::disable),
        )
        .route("/admin/accounts/{id}/enable", post(pages::admin_accounts::enable))
        .route("/admin/accounts/{id}/test", post(pages::admin_accounts::test))
        .route(
            "/admin/accounts/{id}/delete",
            get(pages::admin_accounts::confirm_delete).post(pages::admin_accounts::delete),
        )
        .route(
            "/admin/groups",
            get(pages::admin_groups::list).post(pages::admin_groups::create),
        )
        .route("/admin/groups/{id}/access", post(pages::admin_groups::set_access))
        .route(
            "/admin/users",
            get(pages::admin_users::list).post(pages::admin_users::create),
        )
        .route(
            "/admin/users/{id}/password",
            post(pages::admin_users::reset_password),
        )
        .route("/admin/users/{id}/admin", post(pages::admin_users::set_admin))
        .route("/admin/usage", get(pages::admin_usage::page))
        .route("/admin/usage.csv", get(pages::admin_usage::csv_export));
    Router::new()
        .merge(user_pages)
        .merge(admin_pages)
        .layer(axum::middleware::from_fn_with_state(
            state.clone(),
            csrf::require_token,
        ))
        // After the CSRF check (a method no page takes has no form to check), before the security
        // headers, which its page gets like every page.
        .method_not_allowed_fallback(|| async { ConsoleError::MethodNotAllowed })
        .route("/assets/style.css", get(assets::stylesheet))
        .route("/assets/console.js", get(assets::script))
        .layer(axum::middleware::from_fn(headers::security_headers))
        .with_state(state)
}
