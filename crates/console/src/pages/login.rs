//! `/login`, `/logout` and `/`.

use std::net::SocketAddr;

use askama::Template;
use axum::extract::State;
use axum::extract::{ConnectInfo, FromRequestParts};
use axum::http::StatusCode;
use axum::http::header::{HeaderMap, SET_COOKIE};
use axum::http::request::Parts;
use axum::response::{Html, IntoResponse, Redirect, Response};
use serde::Deserialize;

use crate::auth::{verify_against_dummy, verify_password};
use crate::check_line::CheckLine;
use crate::client_addr::{client_ip, limit_key};
use crate::cookies::{self, LOGIN_COOKIE, SESSION_COOKIE};
use crate::csrf;
use crate::error::{ConsoleError, PageResult};
use crate::extract::SignedIn;
use crate::form::{HtmlForm, HtmlQuery};
use crate::layout::{FlashView, Layout};
use crate::pages::{ConfirmPage, render};
use crate::ratelimit::{Attempt, Subject};
use crate::session::{Flash, Session, SessionToken};
use crate::state::ConsoleState;

/// Lifetime of the login form's CSRF cookie, in seconds.
const LOGIN_COOKIE_SECONDS: u64 = 3600;

#[derive(Template)]
#[template(path = "login.html")]
struct LoginPage {
    layout: Layout,
    csrf: String,
    next: String,
    username: String,
}

#[derive(Debug, Default, Deserialize)]
#[serde(default)]
pub(crate) struct LoginQuery {
    next: String,
    signed_out: String,
}

/// The posted sign-in form. No `Debug`: it holds a password.
#[derive(Default, Deserialize)]
#[serde(default)]
pub(crate) struct LoginForm {
    username: String,
    password: String,
    next: String,
}

/// The address of the client (see [`client_addr`](crate::client_addr)), when the server was
/// started with connect info.
pub(crate) struct ClientIp(Option<String>);

impl FromRequestParts<ConsoleState> for ClientIp {
    type Rejection = std::convert::Infallible;

    async fn from_request_parts(parts: &mut Parts, state: &ConsoleState) -> Result<Self, Self::Rejection> {
        let ip = parts
            .extensions
            .get::<ConnectInfo<SocketAddr>>()
            .map(|ConnectInfo(addr)| {
                limit_key(client_ip(
                    addr.ip(),
                    &parts.headers,
                    &state.config.trusted_proxies,
                ))
            });
        Ok(Self(ip))
    }
}

/// Password checks: 4 at once, and at most 64 waiting (at a few milliseconds each, a wait of well
/// under a second); a sign-in past them is told the console is busy.
static PASSWORD_CHECKS: CheckLine = CheckLine::new(4, 64);

/// Only same-site absolute paths are followed after sign-in. Control characters are refused:
/// browsers drop tabs and line breaks from a URL, so `/<tab>/evil.example` would become
/// `//evil.example`, another site (and a line break cannot go in a `Location` header).
fn safe_next(next: &str) -> &str {
    let ok = next.starts_with('/')
        && !next.starts_with("//")
        && !next.contains('\\')
        && !next.chars().any(char::is_control)
        && !next.starts_with("/login");
    if ok { next } else { "/keys" }
}

fn secure(state: &ConsoleState, headers: &HeaderMap) -> bool {
    cookies::should_be_secure(
        headers,
        state.config.secure_cookies,
        state.config.base_url_hint.as_deref(),
    )
}

/// `GET /`: the keys page (which sends signed-out visitors to the login page).
pub(crate) async fn home() -> Redirect {
    Redirect::to("/keys")
}

fn login_page(
    state: &ConsoleState,
    headers: &HeaderMap,
    status: StatusCode,
    next: &str,
    username: &str,
    flash: Option<Flash>,
) -> PageResult {
    // Keep the token of an open login form valid (several tabs), else start a new one.
    let csrf = cookies::read(headers, LOGIN_COOKIE)
        .filter(|t| t.len() == 64 && t.bytes().all(|b| b.is_ascii_hexdigit()))
        .unwrap_or_else(csrf::new_token);
    let mut layout = Layout::bare("Sign in");
    layout.flashes = flash.into_iter().map(FlashView::from).collect();
    let page = LoginPage {
        layout,
        csrf: csrf.clone(),
        next: next.to_owned(),
        username: username.to_owned(),
    };
    let cookie = cookies::set(LOGIN_COOKIE, &csrf, LOGIN_COOKIE_SECONDS, secure(state, headers));
    Ok((status, [(SET_COOKIE, cookie)], Html(page.render()?)).into_response())
}

/// `GET /login`
pub(crate) async fn form(
    State(state): State<ConsoleState>,
    headers: HeaderMap,
    HtmlQuery(query): HtmlQuery<LoginQuery>,
) -> PageResult {
    let flash = (!query.signed_out.is_empty()).then(|| Flash::success("You are signed out."));
    login_page(&state, &headers, StatusCode::OK, &query.next, "", flash)
}

/// The answer to a sign-in refused by the failure limits.
fn too_many(
    state: &ConsoleState,
    headers: &HeaderMap,
    ip: &str,
    next: &str,
    username: &str,
    wait: std::time::Duration,
) -> PageResult {
    let minutes = wait.as_secs().div_ceil(60).max(1);
    tracing::warn!(ip = %ip, "console sign-in refused: too many failures");
    let flash = Flash::error(format!(
        "Too many failed sign-ins. Try again in {minutes} minute{}.",
        if minutes == 1 { "" } else { "s" }
    ));
    login_page(
        state,
        headers,
        StatusCode::TOO_MANY_REQUESTS,
        next,
        username,
        Some(flash),
    )
}

/// `POST /login` (its CSRF token was checked against the login cookie by the middleware).
pub(crate) async fn submit(
    State(state): State<ConsoleState>,
    ClientIp(ip): ClientIp,
    headers: HeaderMap,
    HtmlForm(form): HtmlForm<LoginForm>,
) -> PageResult {
    let username = form.username.trim().to_owned();
    let limit = &state.config.login_limit;
    let mut subjects = vec![
        Subject::user_from(&username, ip.as_deref().unwrap_or_default(), limit),
        Subject::user(&username, limit),
    ];
    subjects.extend(ip.as_deref().map(|ip| Subject::address(ip, limit)));
    let ip = ip.unwrap_or_default();
    let attempt = match state.login_counting.begin_attempt(&subjects).await? {
        Ok(attempt) => attempt,
        Err(wait) => return too_many(&state, &headers, &ip, &form.next, &username, wait),
    };
    let answer = check_and_sign_in(&state, &headers, form, &username, &ip, &subjects, attempt.clone()).await;
    if answer.as_ref().is_err_and(ConsoleError::is_unavailable) {
        // Not checked (the database or Redis was out of reach): a visitor who tries again as
        // asked must not use up their attempts.
        state.login_counting.withdraw(&subjects, attempt).await;
    }
    answer
}

/// Checks the password of a counted sign-in attempt and, if right, starts the session.
async fn check_and_sign_in(
    state: &ConsoleState,
    headers: &HeaderMap,
    form: LoginForm,
    username: &str,
    ip: &str,
    subjects: &[Subject],
    attempt: Attempt,
) -> PageResult {
    let password = form.password;
    // Each check holds about 19 MiB for a few milliseconds: a few at a time, however many
    // sign-ins arrive together (from many addresses, each within its own limit). The user is read
    // once a check may start, so a password reset made while this one waited is the one checked.
    let (user, hash, verified) = {
        // Held for the read and the check only, not the session and counting work after them.
        let Some(_permit) = PASSWORD_CHECKS.enter().await else {
            return Err(ConsoleError::Busy);
        };
        let user = state.store.user_by_name(username).await?;
        let hash = user.as_ref().and_then(|u| u.password_hash.clone());
        let checked = hash.clone();
        let verified = tokio::task::spawn_blocking(move || match checked {
            Some(hash) => verify_password(&password, &hash),
            None => {
                verify_against_dummy(&password);
                false
            }
        })
        .await
        .unwrap_or(false);
        (user, hash, verified)
    };
    let signed_in = user.zip(hash).filter(|_| verified);
    let Some((user, hash)) = signed_in else {
        // Already counted by `begin_attempt`.
        tracing::info!(ip = %ip, "console sign-in failed");
        let flash = Flash::error("Wrong user name or password.");
        return login_page(
            state,
            headers,
            StatusCode::UNAUTHORIZED,
            &form.next,
            username,
            Some(flash),
        );
    };
    state.login_counting.succeeded(subjects, attempt).await?;
    // A new token on every sign-in (no session fixation); drop any previous session.
    if let Some(old) = cookies::read(headers, SESSION_COOKIE).and_then(|v| SessionToken::parse(&v)) {
        state.sessions.remove(&old.key()).await?;
    }
    let token = SessionToken::generate();
    let mut session = Session::new(user.id, &hash, state.config.session_ttl);
    session
        .flash
        .push(Flash::success(format!("Signed in as {}.", user.name)));
    state.sessions.put(&token.key(), session).await?;
    tracing::info!(user = %user.name, "console sign-in");
    let secure = secure(state, headers);
    let mut response = Redirect::to(safe_next(&form.next)).into_response();
    let cookies = response.headers_mut();
    cookies.append(
        SET_COOKIE,
        cookies::set(
            SESSION_COOKIE,
            token.expose(),
            state.config.session_ttl.as_secs(),
            secure,
        ),
    );
    cookies.append(SET_COOKIE, cookies::clear(LOGIN_COOKIE, secure));
    Ok(response)
}

/// `GET /logout`: a confirmation form (signing out changes state, so it is a POST).
pub(crate) async fn logout_form(State(state): State<ConsoleState>, mut me: SignedIn) -> PageResult {
    let layout = me.layout(&state, "Sign out", "").await?;
    render(&ConfirmPage {
        layout,
        heading: "Sign out".to_owned(),
        message: format!("Sign out {} from this browser?", me.user.name),
        action: "/logout".to_owned(),
        button: "Sign out",
        cancel: "/keys",
    })
}

/// `POST /logout`
pub(crate) async fn logout(
    State(state): State<ConsoleState>,
    headers: HeaderMap,
) -> Result<Response, ConsoleError> {
    if let Some(token) = cookies::read(&headers, SESSION_COOKIE).and_then(|v| SessionToken::parse(&v)) {
        state.sessions.remove(&token.key()).await?;
    }
    let mut response = Redirect::to("/login?signed_out=1").into_response();
    response.headers_mut().append(
        SET_COOKIE,
        cookies::clear(SESSION_COOKIE, secure(&state, &headers)),
    );
    Ok(response)
}

#[cfg(test)]
mod tests {
    use super::safe_next;

    #[test]
    fn next_stays_on_this_site() {
        assert_eq!(safe_next("/usage?key=3"), "/usage?key=3");
        assert_eq!(safe_next("//evil.example"), "/keys");
        assert_eq!(safe_next("https://evil.example"), "/keys");
        assert_eq!(safe_next("/\\evil.example"), "/keys");
        assert_eq!(safe_next(""), "/keys");
        assert_eq!(safe_next("/login"), "/keys");
        assert_eq!(safe_next("/\t/evil.example"), "/keys");
        assert_eq!(safe_next("/\n/evil.example"), "/keys");
        assert_eq!(safe_next("/keys\r\nSet-Cookie: x=y"), "/keys");
        assert_eq!(safe_next("/usage\u{7f}"), "/keys");
    }
}
