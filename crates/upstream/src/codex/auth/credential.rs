//! The credential of a ChatGPT-subscription account: an OAuth access token, the refresh token that
//! renews it, when it expires and the ChatGPT account id.
//!
//! Stored as a JSON object `{"access_token", "refresh_token", "expires_at", "account_id"}`
//! (`expires_at` in unix seconds; every key but one token optional). The nested form of the Codex
//! CLI's `auth.json` (`{"tokens": {...}}`) is read too, and a bare string is an access token
//! without refresh. When the JSON does not say, the expiry and the account id are read from the
//! tokens' JWT claims (`exp`; `chatgpt_account_id`) where present.

use std::fmt;

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde::{Deserialize, Serialize};
use serde_json::{Map, Value};

use crate::target::Secret;

/// The JWT claim object that carries the ChatGPT account id.
const AUTH_CLAIM: &str = "https://api.openai.com/auth";

/// A parsed subscription credential. `Debug` never shows the tokens.
#[derive(Clone, PartialEq, Eq, Serialize)]
pub(crate) struct CodexCredential {
    /// Sent as `Authorization: Bearer <access_token>`; empty when only a refresh token was given.
    pub(crate) access_token: String,
    /// Renews the access token; `None`: the access token is used until it is refused.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) refresh_token: Option<String>,
    /// When the access token expires, unix seconds.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) expires_at: Option<i64>,
    /// Sent as `chatgpt-account-id`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub(crate) account_id: Option<String>,
}

impl fmt::Debug for CodexCredential {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("CodexCredential")
            .field("has_refresh_token", &self.refresh_token.is_some())
            .field("expires_at", &self.expires_at)
            .field("account_id", &self.account_id)
            .finish_non_exhaustive()
    }
}

/// Why a stored credential cannot be used. The messages never quote the credential.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum CredentialError {
    /// It starts like a JSON object but is not one.
    #[error("the credential is not valid JSON (line {line}, column {column})")]
    NotJson { line: usize, column: usize },
    /// It holds neither an access token nor a refresh token.
    #[error("the credential holds neither an access_token nor a refresh_token")]
    NoToken,
    /// It is empty.
    #[error("the credential is empty")]
    Empty,
}

/// The keys read from the JSON form (unknown keys are ignored).
#[derive(Deserialize)]
struct StoredForm {
    access_token: Option<String>,
    refresh_token: Option<String>,
    expires_at: Option<Value>,
    account_id: Option<String>,
    id_token: Option<String>,
    tokens: Option<Box<StoredForm>>,
}

impl CodexCredential {
    /// Reads a stored credential: a JSON object (flat, or nested under `tokens`) or a bare access
    /// token.
    pub(crate) fn parse(stored: &Secret) -> Result<Self, CredentialError> {
        let text = stored.expose().trim();
        if text.is_empty() {
            return Err(CredentialError::Empty);
        }
        if !text.starts_with('{') {
            return Ok(Self {
                access_token: text.to_owned(),
                refresh_token: None,
                expires_at: jwt_expiry(text),
                account_id: jwt_account_id(text),
            });
        }
        let form: StoredForm = serde_json::from_str(text).map_err(|err| CredentialError::NotJson {
            line: err.line(),
            column: err.column(),
        })?;
        let form = match form.tokens {
            Some(tokens) if form.access_token.is_none() && form.refresh_token.is_none() => *tokens,
            _ => form,
        };
        Self::from_form(form)
    }

    fn from_form(form: StoredForm) -> Result<Self, CredentialError> {
        let access_token = form.access_token.filter(|token| !token.is_empty());
        let refresh_token = form.refresh_token.filter(|token| !token.is_empty());
        let Some(access_token) = access_token else {
            // Only a refresh token: the access token counts as expired, so the first call renews it.
            return match refresh_token {
                Some(refresh_token) => Ok(Self {
                    access_token: String::new(),
                    refresh_token: Some(refresh_token),
                    expires_at: Some(0),
                    account_id: form
                        .account_id
                        .or_else(|| form.id_token.as_deref().and_then(jwt_account_id)),
                }),
                None => Err(CredentialError::NoToken),
            };
        };
        let expires_at = form
            .expires_at
            .as_ref()
            .and_then(unix_seconds)
            .or_else(|| jwt_expiry(&access_token));
        let account_id = form
            .account_id
            .filter(|id| !id.is_empty())
            .or_else(|| form.id_token.as_deref().and_then(jwt_account_id))
            .or_else(|| jwt_account_id(&access_token));
        Ok(Self {
            access_token,
            refresh_token,
            expires_at,
            account_id,
        })
    }

    /// The stored form: the flat JSON object.
    pub(crate) fn to_secret(&self) -> Secret {
        // Serializing strings and integers cannot fail; an empty object would only make the next
        // read fail with `NoToken`, never leak anything.
        Secret::new(serde_json::to_string(self).unwrap_or_else(|_| "{}".to_owned()))
    }

    /// Whether the access token expires before `now + skew` (unix seconds). Unknown expiry: no.
    pub(crate) fn expires_within(&self, now: i64, skew_secs: i64) -> bool {
        self.access_token.is_empty()
            || self
                .expires_at
                .is_some_and(|at| at <= now.saturating_add(skew_secs))
    }

    /// Whether the access token has expired at `now` (unix seconds).
    pub(crate) fn is_expired(&self, now: i64) -> bool {
        self.access_token.is_empty() || self.expires_at.is_some_and(|at| at <= now)
    }
}

/// A number of unix seconds (an integer or a float; milliseconds are recognised by their size).
fn unix_seconds(value: &Value) -> Option<i64> {
    let seconds = match value {
        Value::Number(number) => number.as_i64().or_else(|| number.as_f64().map(|f| f as i64))?,
        Value::String(text) => text.trim().parse().ok()?,
        _ => return None,
    };
    // Past the year 5000 in seconds: it was milliseconds.
    Some(if seconds > 100_000_000_000 {
        seconds / 1000
    } else {
        seconds
    })
}

/// The `exp` claim of a JWT.
pub(crate) fn jwt_expiry(token: &str) -> Option<i64> {
    jwt_claims(token)?.get("exp").and_then(unix_seconds)
}

/// The `chatgpt_account_id` of a JWT's OpenAI auth claim.
pub(crate) fn jwt_account_id(token: &str) -> Option<String> {
    let claims = jwt_claims(token)?;
    let auth = claims.get(AUTH_CLAIM)?.as_object()?;
    auth.get("chatgpt_account_id")?
        .as_str()
        .filter(|id| !id.is_empty())
        .map(str::to_owned)
}

/// The claims of a JWT, read without checking its signature (only to learn what the token says
/// about itself; the upstream checks it).
fn jwt_claims(token: &str) -> Option<Map<String, Value>> {
    let mut parts = token.split('.');
    let (_header, payload, _signature) = (parts.next()?, parts.next()?, parts.next()?);
    if parts.next().is_some() {
        return None;
    }
    let bytes = URL_SAFE_NO_PAD.decode(payload.trim_end_matches('=')).ok()?;
    match serde_json::from_slice(&bytes).ok()? {
        Value::Object(claims) => Some(claims),
        _ => None,
    }
}

#[cfg(test)]
#[path = "credential_tests.rs"]
mod tests;
