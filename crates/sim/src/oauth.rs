//! The OAuth side of a ChatGPT-subscription upstream: which refresh tokens the token endpoint
//! accepts, and what it issues for them.
//!
//! A refresh token is accepted once: the grant rotates it (like the real service), and using it
//! again is refused as `refresh_token_reused`. Issued tokens are `sim-at-<n>` (access) and
//! `sim-rt-<n>` (refresh). A refresh token may carry a ChatGPT account id, which the issued
//! `id_token` claims and the rotated refresh token keeps.

use std::collections::{HashMap, HashSet};
use std::sync::{Mutex, PoisonError};

use base64::Engine as _;
use base64::engine::general_purpose::URL_SAFE_NO_PAD;
use serde_json::json;

/// What a refresh token gives.
#[derive(Clone, Debug, PartialEq, Eq)]
pub enum Exchange {
    /// New tokens.
    Issued(IssuedTokens),
    /// The token was never issued nor registered.
    Unknown,
    /// The token was already exchanged.
    Reused,
}

/// The tokens of one successful grant.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IssuedTokens {
    /// `sim-at-<n>`.
    pub access_token: String,
    /// `sim-rt-<n>` (the rotated refresh token).
    pub refresh_token: String,
    /// The ChatGPT account id the refresh token carried.
    pub account_id: Option<String>,
}

impl IssuedTokens {
    /// An unsigned JWT-shaped `id_token` with `exp` and, when known, the account id claim.
    pub fn id_token(&self, expires_at: u64) -> String {
        let header = URL_SAFE_NO_PAD.encode(br#"{"alg":"none","typ":"JWT"}"#);
        let mut claims = json!({"iss": "imagegate-sim", "exp": expires_at});
        if let Some(account_id) = &self.account_id {
            claims["https://api.openai.com/auth"] = json!({"chatgpt_account_id": account_id});
        }
        let claims = URL_SAFE_NO_PAD.encode(claims.to_string());
        format!("{header}.{claims}.")
    }
}

#[derive(Debug, Default)]
struct Book {
    /// Usable refresh tokens and the account id each carries.
    live: HashMap<String, Option<String>>,
    /// Refresh tokens already exchanged.
    used: HashSet<String>,
    /// The last token number issued.
    issued: u64,
}

/// The refresh tokens of one simulator.
#[derive(Debug, Default)]
pub struct TokenBook {
    inner: Mutex<Book>,
}

impl TokenBook {
    /// A book that accepts `registered` (without account ids).
    pub fn new(registered: impl IntoIterator<Item = String>) -> Self {
        let book = Self::default();
        for token in registered {
            book.register(token, None);
        }
        book
    }

    /// Makes `refresh_token` usable once more (also one that was used), carrying `account_id`.
    pub fn register(&self, refresh_token: String, account_id: Option<String>) {
        let mut book = self.lock();
        book.used.remove(&refresh_token);
        book.live.insert(refresh_token, account_id);
    }

    /// Exchanges `refresh_token` for new tokens, retiring it.
    pub fn exchange(&self, refresh_token: &str) -> Exchange {
        let mut book = self.lock();
        let Some(account_id) = book.live.remove(refresh_token) else {
            return if book.used.contains(refresh_token) {
                Exchange::Reused
            } else {
                Exchange::Unknown
            };
        };
        book.used.insert(refresh_token.to_owned());
        book.issued += 1;
        let n = book.issued;
        let issued = IssuedTokens {
            access_token: format!("sim-at-{n}"),
            refresh_token: format!("sim-rt-{n}"),
            account_id,
        };
        book.live
            .insert(issued.refresh_token.clone(), issued.account_id.clone());
        Exchange::Issued(issued)
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, Book> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn refresh_tokens_rotate_and_are_accepted_once() {
        let book = TokenBook::new(["rt-seed".to_owned()]);
        let Exchange::Issued(first) = book.exchange("rt-seed") else {
            panic!("the seeded token is accepted");
        };
        assert_eq!(
            (first.access_token.as_str(), first.refresh_token.as_str()),
            ("sim-at-1", "sim-rt-1")
        );
        assert_eq!(book.exchange("rt-seed"), Exchange::Reused);
        assert_eq!(book.exchange("rt-never"), Exchange::Unknown);
        let Exchange::Issued(second) = book.exchange("sim-rt-1") else {
            panic!("the issued token is accepted");
        };
        assert_eq!(second.access_token, "sim-at-2");
        book.register("rt-seed".to_owned(), Some("acct-7".to_owned()));
        let Exchange::Issued(third) = book.exchange("rt-seed") else {
            panic!("a registered token is accepted again");
        };
        assert_eq!(third.account_id.as_deref(), Some("acct-7"));
    }

    #[test]
    fn the_id_token_carries_the_account_id_claim() {
        let tokens = IssuedTokens {
            access_token: "sim-at-1".into(),
            refresh_token: "sim-rt-1".into(),
            account_id: Some("acct-9".into()),
        };
        let id_token = tokens.id_token(1_800_000_000);
        let claims = id_token.split('.').nth(1).unwrap();
        let claims: serde_json::Value =
            serde_json::from_slice(&URL_SAFE_NO_PAD.decode(claims).unwrap()).unwrap();
        assert_eq!(claims["exp"], 1_800_000_000);
        assert_eq!(
            claims["https://api.openai.com/auth"]["chatgpt_account_id"],
            "acct-9"
        );
    }
}
