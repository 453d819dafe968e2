//! The OAuth `refresh_token` grant: `POST {token_url}` with
//! `{"client_id", "grant_type": "refresh_token", "refresh_token", "scope": "openid profile email"}`,
//! answered by `{"access_token", "refresh_token"?, "expires_in"?, "id_token"?}`.

use bytes::{Bytes, BytesMut};
use reqwest::header::{ACCEPT, CONTENT_TYPE};
use serde::{Deserialize, Serialize};
use serde_json::Value;
use tokio::time::timeout_at;

use super::credential::{CodexCredential, jwt_account_id, jwt_expiry};
use crate::client::CodexAuthConfig;
use crate::failure::{Failure, FailureKind, classify_transport};
use crate::openai::Deadline;

/// Largest token endpoint answer read.
const MAX_ANSWER_BYTES: usize = 256 * 1024;

/// Why a refresh did not give a new access token. Never carries a token.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub(crate) enum RefreshError {
    /// The credential has no refresh token.
    #[error("the credential has no refresh token")]
    NoRefreshToken,
    /// The token endpoint refused the refresh token (expired, revoked or already used).
    #[error("the token endpoint refused the refresh token (HTTP {status}{})", code_suffix(.code))]
    Refused { status: u16, code: Option<String> },
    /// The token endpoint could not be reached or failed (worth trying again later).
    #[error("{0}")]
    Unavailable(String),
    /// The token endpoint answered something that is not a token answer.
    #[error("the token endpoint answer is not a token: {0}")]
    Malformed(String),
    /// The call's deadline passed.
    #[error("the call's deadline passed while refreshing")]
    Timeout,
}

fn code_suffix(code: &Option<String>) -> String {
    code.as_deref()
        .map(|code| format!(", {code}"))
        .unwrap_or_default()
}

impl RefreshError {
    /// The failure of the call that needed the refresh; `context` says why it was refreshed.
    /// Refusals (and a missing refresh token) are [`FailureKind::Unauthorized`]: the account
    /// needs a new sign-in. An unreachable or failing token endpoint is
    /// [`FailureKind::Transient`], a garbled answer [`FailureKind::Protocol`].
    pub(crate) fn into_failure(self, context: &str, deadline: Deadline) -> Failure {
        let kind = match &self {
            Self::NoRefreshToken | Self::Refused { .. } => FailureKind::Unauthorized,
            Self::Unavailable(_) => FailureKind::Transient,
            Self::Malformed(_) => FailureKind::Protocol,
            Self::Timeout => return deadline.failure(),
        };
        let failure = Failure::new(kind, format!("{context}: {self}"));
        match self {
            Self::Refused { status, .. } => failure.with_status(status),
            _ => failure,
        }
    }
}

#[derive(Serialize)]
struct Grant<'a> {
    client_id: &'a str,
    grant_type: &'static str,
    refresh_token: &'a str,
    scope: &'static str,
}

#[derive(Deserialize)]
struct TokenAnswer {
    access_token: String,
    refresh_token: Option<String>,
    expires_in: Option<Value>,
    id_token: Option<String>,
}

/// Renews `credential` at the token endpoint; `now` is unix seconds (for `expires_in`).
pub(crate) async fn refresh(
    client: &reqwest::Client,
    config: &CodexAuthConfig,
    credential: &CodexCredential,
    now: i64,
    deadline: Deadline,
) -> Result<CodexCredential, RefreshError> {
    let refresh_token = credential
        .refresh_token
        .as_deref()
        .ok_or(RefreshError::NoRefreshToken)?;
    let grant = Grant {
        client_id: &config.client_id,
        grant_type: "refresh_token",
        refresh_token,
        scope: "openid profile email",
    };
    let body = serde_json::to_vec(&grant)
        .map_err(|err| RefreshError::Malformed(format!("encoding the grant failed: {err}")))?;
    let request = client
        .post(&config.token_url)
        .header(CONTENT_TYPE, "application/json")
        .header(ACCEPT, "application/json")
        .body(body)
        .send();
    let mut response = match timeout_at(deadline.at, request).await {
        Err(_elapsed) => return Err(RefreshError::Timeout),
        Ok(Err(err)) => {
            let cause = classify_transport(&err).message;
            return Err(RefreshError::Unavailable(format!(
                "the token endpoint could not be reached ({cause})"
            )));
        }
        Ok(Ok(response)) => response,
    };
    let status = response.status().as_u16();
    let answer = read_bounded(&mut response, deadline).await?;
    match status {
        200..=299 => renewed(credential, &answer, now),
        _ => Err(refusal_or_outage(status, &answer)),
    }
}

/// What a token endpoint answer other than a success says: a refusal of the refresh token (the
/// account needs a new sign-in) only when its error code says so; any other answer (a proxy's
/// HTML page, `invalid_client` from a wrong client id, a 5xx) is an outage, not held against the
/// account for good.
fn refusal_or_outage(status: u16, answer: &[u8]) -> RefreshError {
    let code = error_code(answer);
    let refused = matches!(status, 400 | 401 | 403)
        && code
            .as_deref()
            .is_some_and(|code| code == "invalid_grant" || code.starts_with("refresh_token_"));
    if refused {
        return RefreshError::Refused { status, code };
    }
    RefreshError::Unavailable(format!(
        "the token endpoint answered HTTP {status}{}",
        code_suffix(&code)
    ))
}

impl RefreshError {
    /// Whether the refresh token was refused because it was used already: another replica's
    /// refresh of the same token, whose answer is in the store soon.
    pub(crate) fn used_elsewhere(&self) -> bool {
        matches!(self, Self::Refused { code: Some(code), .. } if code == "refresh_token_reused")
    }
}

/// The credential after a successful answer: the new access token, the rotated refresh token
/// (or the old one), the new expiry and the account id (kept, or read from the new tokens).
fn renewed(old: &CodexCredential, answer: &[u8], now: i64) -> Result<CodexCredential, RefreshError> {
    let answer: TokenAnswer = serde_json::from_slice(answer).map_err(|err| {
        RefreshError::Malformed(format!(
            "line {}, column {} ({:?})",
            err.line(),
            err.column(),
            err.classify()
        ))
    })?;
    if answer.access_token.is_empty() {
        return Err(RefreshError::Malformed("the access_token is empty".to_owned()));
    }
    let expires_in = answer.expires_in.as_ref().and_then(|value| match value {
        Value::Number(number) => number.as_i64(),
        Value::String(text) => text.trim().parse().ok(),
        _ => None,
    });
    let expires_at = expires_in
        .map(|secs| now.saturating_add(secs))
        .or_else(|| jwt_expiry(&answer.access_token));
    let account_id = old
        .account_id
        .clone()
        .or_else(|| answer.id_token.as_deref().and_then(jwt_account_id))
        .or_else(|| jwt_account_id(&answer.access_token));
    let refresh_token = answer
        .refresh_token
        .filter(|token| !token.is_empty())
        .or_else(|| old.refresh_token.clone());
    Ok(CodexCredential {
        access_token: answer.access_token,
        refresh_token,
        expires_at,
        account_id,
    })
}

/// The OAuth error code of a refusal: `{"error": "invalid_grant"}` or
/// `{"error": {"code": "refresh_token_reused", ...}}`. Only plain identifiers are kept.
fn error_code(answer: &[u8]) -> Option<String> {
    let body: Value = serde_json::from_slice(answer).ok()?;
    let code = match body.get("error")? {
        Value::String(code) => code.as_str(),
        Value::Object(error) => error
            .get("code")
            .and_then(Value::as_str)
            .or_else(|| error.get("type").and_then(Value::as_str))?,
        _ => return None,
    };
    let plain = !code.is_empty()
        && code.len() <= 64
        && code
            .bytes()
            .all(|b| b.is_ascii_alphanumeric() || matches!(b, b'_' | b'-' | b'.'));
    plain.then(|| code.to_owned())
}

async fn read_bounded(response: &mut reqwest::Response, deadline: Deadline) -> Result<Bytes, RefreshError> {
    let mut body = BytesMut::new();
    loop {
        match timeout_at(deadline.at, response.chunk()).await {
            Err(_elapsed) => return Err(RefreshError::Timeout),
            Ok(Err(err)) => {
                let cause = classify_transport(&err).message;
                return Err(RefreshError::Unavailable(format!(
                    "reading the token endpoint answer failed ({cause})"
                )));
            }
            Ok(Ok(None)) => return Ok(body.freeze()),
            Ok(Ok(Some(chunk))) => {
                if body.len().saturating_add(chunk.len()) > MAX_ANSWER_BYTES {
                    return Err(RefreshError::Malformed(format!(
                        "larger than {MAX_ANSWER_BYTES} bytes"
                    )));
                }
                body.extend_from_slice(&chunk);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn old() -> CodexCredential {
        CodexCredential {
            access_token: "at-old".into(),
            refresh_token: Some("rt-old".into()),
            expires_at: Some(100),
            account_id: Some("acc-1".into()),
        }
    }

    #[test]
    fn a_rotated_answer_replaces_both_tokens_and_sets_the_expiry() {
        let answer =
            br#"{"access_token":"at-new","refresh_token":"rt-new","expires_in":3600,"token_type":"Bearer"}"#;
        let fresh = renewed(&old(), answer, 1_000).unwrap();
        assert_eq!(fresh.access_token, "at-new");
        assert_eq!(fresh.refresh_token.as_deref(), Some("rt-new"));
        assert_eq!(fresh.expires_at, Some(4_600));
        assert_eq!(fresh.account_id.as_deref(), Some("acc-1"));
    }

    #[test]
    fn without_rotation_the_old_refresh_token_is_kept() {
        let fresh = renewed(&old(), br#"{"access_token":"at-new"}"#, 1_000).unwrap();
        assert_eq!(fresh.refresh_token.as_deref(), Some("rt-old"));
        assert_eq!(fresh.expires_at, None);
    }

    #[test]
    fn garbled_answers_are_malformed_without_quoting_them() {
        let err = renewed(&old(), br#"{"access_token": 987654321}"#, 0).unwrap_err();
        assert!(matches!(err, RefreshError::Malformed(_)));
        assert!(!err.to_string().contains("987654321"), "{err}");
        let err = renewed(&old(), br#"{"access_token": ""}"#, 0).unwrap_err();
        assert!(matches!(err, RefreshError::Malformed(_)));
    }

    #[test]
    fn error_codes_are_read_from_both_shapes() {
        assert_eq!(
            error_code(br#"{"error":"invalid_grant","error_description":"nope"}"#).as_deref(),
            Some("invalid_grant")
        );
        assert_eq!(
            error_code(br#"{"error":{"message":"used","type":"invalid_request_error","code":"refresh_token_reused"}}"#)
                .as_deref(),
            Some("refresh_token_reused")
        );
        assert_eq!(error_code(br#"{"error":"has spaces and rt-secret"}"#), None);
        assert_eq!(error_code(b"<html>"), None);
    }

    #[test]
    fn only_a_refused_grant_is_a_refusal() {
        let refused =
            |status, answer: &[u8]| matches!(refusal_or_outage(status, answer), RefreshError::Refused { .. });
        assert!(refused(400, br#"{"error":"invalid_grant"}"#));
        assert!(refused(
            401,
            br#"{"error":{"code":"refresh_token_reused","type":"invalid_request_error"}}"#
        ));
        assert!(refused(401, br#"{"error":{"code":"refresh_token_expired"}}"#));
        // A proxy's page, a wrong client id, an error without a code: outages.
        assert!(!refused(403, b"<html>Just a moment...</html>"));
        assert!(!refused(401, br#"{"error":"invalid_client"}"#));
        assert!(!refused(400, br#"{"error":{"message":"bad"}}"#));
        assert!(!refused(500, br#"{"error":"invalid_grant"}"#));
        let outage = refusal_or_outage(401, br#"{"error":"invalid_client"}"#);
        assert_eq!(
            outage.to_string(),
            "the token endpoint answered HTTP 401, invalid_client"
        );
        assert!(
            RefreshError::Refused {
                status: 401,
                code: Some("refresh_token_reused".into())
            }
            .used_elsewhere()
        );
        assert!(
            !RefreshError::Refused {
                status: 400,
                code: Some("invalid_grant".into())
            }
            .used_elsewhere()
        );
    }

    #[test]
    fn refusals_are_unauthorized_and_outages_transient() {
        let deadline = Deadline::from_now(std::time::Duration::from_secs(1));
        let refused = RefreshError::Refused {
            status: 400,
            code: Some("invalid_grant".into()),
        }
        .into_failure("refreshing failed", deadline);
        assert_eq!(refused.kind, FailureKind::Unauthorized);
        assert_eq!(refused.status, Some(400));
        assert_eq!(
            refused.message,
            "refreshing failed: the token endpoint refused the refresh token (HTTP 400, invalid_grant)"
        );
        let down = RefreshError::Unavailable("the token endpoint answered HTTP 503".into())
            .into_failure("x", deadline);
        assert_eq!(down.kind, FailureKind::Transient);
        assert_eq!(
            RefreshError::Timeout.into_failure("x", deadline).kind,
            FailureKind::Timeout
        );
    }
}
