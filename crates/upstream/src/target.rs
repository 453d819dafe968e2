//! Who to call: the account kind, its base URL and its credential.

use std::fmt;
use std::str::FromStr;

/// How an account is reached.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, serde::Serialize, serde::Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum AccountKind {
    /// An OpenAI-compatible API with an API key (Images API passthrough).
    OpenAi,
    /// A ChatGPT-subscription account (OAuth access token, refreshed with its refresh token;
    /// images through the Responses API).
    Codex,
    /// The simulator: the same wire as [`AccountKind::OpenAi`], against the simulator's base URL.
    Sim,
}

impl AccountKind {
    /// Every kind, in declaration order.
    pub const ALL: &'static [Self] = &[Self::OpenAi, Self::Codex, Self::Sim];

    /// The lowercase name: `openai`, `codex` or `sim`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Self::OpenAi => "openai",
            Self::Codex => "codex",
            Self::Sim => "sim",
        }
    }
}

impl fmt::Display for AccountKind {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// An account kind name that is not `openai`, `codex` or `sim`.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
#[error("unknown account kind '{0}': expected openai, codex or sim")]
pub struct UnknownAccountKind(pub String);

impl FromStr for AccountKind {
    type Err = UnknownAccountKind;

    fn from_str(value: &str) -> Result<Self, Self::Err> {
        Self::ALL
            .iter()
            .copied()
            .find(|kind| kind.as_str() == value)
            .ok_or_else(|| UnknownAccountKind(value.to_owned()))
    }
}

/// A credential (API key or access token). `Debug` and `Display` never show it.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(String);

impl Secret {
    /// Wraps a credential.
    pub fn new(value: impl Into<String>) -> Self {
        Self(value.into())
    }

    /// The credential itself, for the one place that sends it.
    pub fn expose(&self) -> &str {
        &self.0
    }
}

impl From<String> for Secret {
    fn from(value: String) -> Self {
        Self(value)
    }
}

impl From<&str> for Secret {
    fn from(value: &str) -> Self {
        Self(value.to_owned())
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret(***)")
    }
}

impl fmt::Display for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("***")
    }
}

/// What the transport needs to call one account.
#[derive(Clone, Debug)]
pub struct AccountTarget {
    /// The account's id in the store (for logs).
    pub account_id: i64,
    /// How the account is reached.
    pub kind: AccountKind,
    /// Base URL, e.g. `https://api.openai.com/v1`; paths such as `/images/generations` are appended
    /// to it (a trailing `/` is ignored).
    pub base_url: String,
    /// API key; for [`AccountKind::Codex`] the OAuth credential: a JSON object
    /// `{"access_token", "refresh_token", "expires_at" (unix seconds), "account_id"}` (only a token
    /// required), or a bare access token (never refreshed).
    pub credential: Secret,
    /// Codex: the main models in order of preference (the first one that the upstream supports is
    /// used). Ignored by the other kinds.
    pub main_models: Vec<String>,
}

impl AccountTarget {
    /// `{base_url}/{path}` with exactly one `/` between them.
    pub fn url(&self, path: &str) -> String {
        format!(
            "{}/{}",
            self.base_url.trim_end_matches('/'),
            path.trim_start_matches('/')
        )
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn secret_is_redacted_in_debug_and_display() {
        let secret = Secret::new("sk-live-abcdef");
        assert_eq!(format!("{secret:?}"), "Secret(***)");
        assert_eq!(secret.to_string(), "***");
        assert_eq!(secret.expose(), "sk-live-abcdef");
        let target = AccountTarget {
            account_id: 7,
            kind: AccountKind::OpenAi,
            base_url: "http://x/v1".into(),
            credential: secret,
            main_models: vec![],
        };
        assert!(!format!("{target:?}").contains("sk-live"));
    }

    #[test]
    fn url_joins_with_one_slash() {
        let mut target = AccountTarget {
            account_id: 1,
            kind: AccountKind::Sim,
            base_url: "http://127.0.0.1:9/v1/".into(),
            credential: Secret::from("k"),
            main_models: vec![],
        };
        assert_eq!(
            target.url("images/generations"),
            "http://127.0.0.1:9/v1/images/generations"
        );
        target.base_url = "http://127.0.0.1:9/v1".into();
        assert_eq!(target.url("/responses"), "http://127.0.0.1:9/v1/responses");
    }

    #[test]
    fn kind_names_round_trip() {
        for kind in AccountKind::ALL {
            assert_eq!(kind.as_str().parse::<AccountKind>(), Ok(*kind));
        }
        assert_eq!(
            "OpenAI".parse::<AccountKind>(),
            Err(UnknownAccountKind("OpenAI".into()))
        );
    }
}
