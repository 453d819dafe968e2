//! Extractors for signed-in users ([`SignedIn`]) and admins ([`Admin`]), and the session updates
//! a page makes (flashes, one-time secrets, redirects).

use axum::extract::FromRequestParts;
use axum::http::Method;
use axum::http::request::Parts;
use axum::response::{IntoResponse, Redirect, Response};
use imagegate_store::{StoreError, User};

use crate::cookies::{self, SESSION_COOKIE};
use crate::error::{ConsoleError, PageResult};
use crate::layout::{FlashView, Layout, NavUser};
use crate::session::{Flash, Reveal, Session, SessionKey, SessionToken};
use crate::state::ConsoleState;

/// A request from a signed-in user (anyone else is sent to `/login`).
#[derive(Debug)]
pub(crate) struct SignedIn {
    pub user: User,
    pub key: SessionKey,
    pub session: Session,
}

/// A request from a signed-in admin (anyone else signed in gets 403).
#[derive(Debug)]
pub(crate) struct Admin(pub SignedIn);

/// Where to send a signed-out visitor: the login page, coming back here afterwards for GETs.
fn to_login(parts: &Parts) -> Response {
    if parts.method != Method::GET {
        return Redirect::to("/login").into_response();
    }
    let here = parts.uri.path_and_query().map_or("/", |pq| pq.as_str());
    match serde_html_form::to_string([("next", here)]) {
        Ok(query) => Redirect::to(&format!("/login?{query}")).into_response(),
        Err(_) => Redirect::to("/login").into_response(),
    }
}

impl FromRequestParts<ConsoleState> for SignedIn {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &ConsoleState) -> Result<Self, Self::Rejection> {
        let Some(token) = cookies::read(&parts.headers, SESSION_COOKIE).and_then(|v| SessionToken::parse(&v))
        else {
            return Err(to_login(parts));
        };
        let key = token.key();
        let session = state
            .sessions
            .get(&key)
            .await
            .map_err(|e| ConsoleError::from(e).into_response())?;
        let Some(session) = session else {
            return Err(to_login(parts));
        };
        let user = match state.store.user(session.user_id).await {
            Ok(user)
                if user
                    .password_hash
                    .as_deref()
                    .is_some_and(|hash| session.password_stamp.matches(hash)) =>
            {
                user
            }
            // Deleted, no longer allowed to sign in, or its password changed since (by an admin
            // here, on another replica or from the command line): end the session.
            Ok(_) | Err(StoreError::NotFound { .. }) => {
                state
                    .sessions
                    .remove(&key)
                    .await
                    .map_err(|e| ConsoleError::from(e).into_response())?;
                return Err(to_login(parts));
            }
            Err(err) => return Err(ConsoleError::from(err).into_response()),
        };
        Ok(Self { user, key, session })
    }
}

impl FromRequestParts<ConsoleState> for Admin {
    type Rejection = Response;

    async fn from_request_parts(parts: &mut Parts, state: &ConsoleState) -> Result<Self, Self::Rejection> {
        let signed_in = SignedIn::from_request_parts(parts, state).await?;
        if !signed_in.user.is_admin {
            return Err(ConsoleError::Forbidden.into_response());
        }
        Ok(Self(signed_in))
    }
}

/// The most flash messages a session keeps for its next page.
const MAX_PENDING_FLASHES: usize = 5;

impl SignedIn {
    /// The page frame, consuming the pending flash messages.
    pub async fn layout(
        &mut self,
        state: &ConsoleState,
        title: &str,
        active: &'static str,
    ) -> PageResult<Layout> {
        let flashes: Vec<FlashView> = std::mem::take(&mut self.session.flash)
            .into_iter()
            .map(FlashView::from)
            .collect();
        if !flashes.is_empty() {
            self.save(state).await?;
        }
        Ok(Layout {
            title: title.to_owned(),
            user: Some(NavUser {
                name: self.user.name.clone(),
                is_admin: self.user.is_admin,
            }),
            csrf: self.session.csrf_token.clone(),
            flashes,
            active,
        })
    }

    /// The pending one-time secret, removed from the session.
    pub async fn take_reveal(&mut self, state: &ConsoleState) -> PageResult<Option<Reveal>> {
        let reveal = self.session.reveal.take();
        if reveal.is_some() {
            self.save(state).await?;
        }
        Ok(reveal)
    }

    /// Queues `flash` for the next page and redirects (303) to `to`. Only the newest
    /// [`MAX_PENDING_FLASHES`] wait: a client that posts and never loads a page does not grow its
    /// session (copied, and in Redis sealed, on every request) without end.
    pub async fn redirect_with(&mut self, state: &ConsoleState, flash: Flash, to: &str) -> PageResult {
        let flashes = &mut self.session.flash;
        flashes.push(flash);
        let excess = flashes.len().saturating_sub(MAX_PENDING_FLASHES);
        flashes.drain(..excess);
        self.save(state).await?;
        Ok(Redirect::to(to).into_response())
    }

    /// Queues a one-time secret and a flash for the next page and redirects (303) to `to`.
    pub async fn redirect_revealing(
        &mut self,
        state: &ConsoleState,
        reveal: Reveal,
        flash: Flash,
        to: &str,
    ) -> PageResult {
        self.session.reveal = Some(reveal);
        self.redirect_with(state, flash, to).await
    }

    async fn save(&self, state: &ConsoleState) -> PageResult<()> {
        state.sessions.update(&self.key, self.session.clone()).await?;
        Ok(())
    }
}
