//! [`HttpUpstream`]: the [`Upstream`] of the real gateway, one pooled HTTP client for every account,
//! routing each call to the transport of the account's kind.

use std::sync::Arc;
use std::time::Duration;

use crate::call::UpstreamCall;
use crate::codex::auth::CodexAuth;
use crate::credential_store::CredentialStore;
use crate::failure::{Failure, SpentSoFar};
use crate::reply::Reply;
use crate::target::{AccountKind, AccountTarget};
use crate::{Upstream, codex, openai};

/// Settings of the HTTP client shared by every upstream call.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UpstreamConfig {
    /// Longest wait for a TCP + TLS connection (a failure is [`crate::FailureKind::Transient`]).
    pub connect_timeout: Duration,
    /// Largest non-streaming success body read (larger: [`crate::FailureKind::Protocol`]).
    pub max_body_bytes: usize,
    /// Largest error body read for classification (the rest is not read).
    pub max_error_body_bytes: usize,
    /// How long an idle pooled connection is kept.
    pub pool_idle_timeout: Duration,
    /// Most idle pooled connections kept per upstream host.
    pub pool_max_idle_per_host: usize,
    /// The `User-Agent` sent upstream.
    pub user_agent: String,
    /// How ChatGPT-subscription access tokens are refreshed.
    pub codex: CodexAuthConfig,
}

impl Default for UpstreamConfig {
    /// Connect timeout 10 s, bodies up to 256 MiB, error bodies up to 1 MiB, idle connections kept
    /// 90 s (32 per host), `User-Agent: imagegate/<version>`.
    fn default() -> Self {
        Self {
            connect_timeout: Duration::from_secs(10),
            max_body_bytes: 256 * 1024 * 1024,
            max_error_body_bytes: 1024 * 1024,
            pool_idle_timeout: Duration::from_secs(90),
            pool_max_idle_per_host: 32,
            user_agent: concat!("imagegate/", env!("CARGO_PKG_VERSION")).to_owned(),
            codex: CodexAuthConfig::default(),
        }
    }
}

/// The OAuth refresh of ChatGPT-subscription ([`AccountKind::Codex`]) access tokens.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct CodexAuthConfig {
    /// The token endpoint: `POST` with a JSON `refresh_token` grant.
    pub token_url: String,
    /// The OAuth client id sent with the grant.
    pub client_id: String,
    /// An access token whose `expires_at` is less than this far away is refreshed before the call.
    pub refresh_skew: Duration,
}

impl CodexAuthConfig {
    /// The token endpoint of OpenAI's sign-in service.
    pub const DEFAULT_TOKEN_URL: &'static str = "https://auth.openai.com/oauth/token";
    /// The public OAuth client id of the Codex CLI.
    pub const DEFAULT_CLIENT_ID: &'static str = "app_EMoamEEZ73f0CkXaXp7hrann";
}

impl Default for CodexAuthConfig {
    /// [`Self::DEFAULT_TOKEN_URL`], [`Self::DEFAULT_CLIENT_ID`], a 60 s skew.
    fn default() -> Self {
        Self {
            token_url: Self::DEFAULT_TOKEN_URL.to_owned(),
            client_id: Self::DEFAULT_CLIENT_ID.to_owned(),
            refresh_skew: Duration::from_secs(60),
        }
    }
}

/// The HTTP client could not be built (e.g. no TLS backend).
#[derive(Debug, thiserror::Error)]
#[error("building the upstream HTTP client failed: {0}")]
pub struct BuildError(#[from] reqwest::Error);

/// Calls real upstreams over HTTP (rustls, pooled connections, no redirects, no proxy from the
/// environment). Cheap to clone; clones share the connection pool and the refreshed
/// subscription credentials.
///
/// Account kinds: [`AccountKind::OpenAi`] and [`AccountKind::Sim`] use the OpenAI wire;
/// [`AccountKind::Codex`] turns Images requests into Responses calls with a forced
/// `image_generation` tool (see the crate docs) and refreshes its OAuth access token when it is
/// about to expire or is refused.
#[derive(Clone, Debug)]
pub struct HttpUpstream {
    client: reqwest::Client,
    config: UpstreamConfig,
    codex_auth: Arc<CodexAuth>,
}

impl HttpUpstream {
    /// Builds the client from `config`.
    pub fn new(config: UpstreamConfig) -> Result<Self, BuildError> {
        let client = reqwest::Client::builder()
            .connect_timeout(config.connect_timeout)
            .pool_idle_timeout(config.pool_idle_timeout)
            .pool_max_idle_per_host(config.pool_max_idle_per_host)
            .user_agent(config.user_agent.clone())
            .redirect(reqwest::redirect::Policy::none())
            .no_proxy()
            .tcp_nodelay(true)
            .build()?;
        Ok(Self {
            client,
            config,
            codex_auth: Arc::new(CodexAuth::new(None)),
        })
    }

    /// Saves refreshed subscription credentials through `store` (once per refresh). Without a
    /// store, refreshed credentials live in this process only. Set it before cloning: the
    /// refreshed credentials kept so far are dropped.
    #[must_use]
    pub fn with_credential_store(mut self, store: Arc<dyn CredentialStore>) -> Self {
        self.codex_auth = Arc::new(CodexAuth::new(Some(store)));
        self
    }

    /// The settings in use.
    pub fn config(&self) -> &UpstreamConfig {
        &self.config
    }
}

#[async_trait::async_trait]
impl Upstream for HttpUpstream {
    async fn call_reporting(
        &self,
        target: &AccountTarget,
        call: UpstreamCall<'_>,
        deadline: Duration,
        spent: &SpentSoFar,
    ) -> Result<Reply, Failure> {
        match target.kind {
            AccountKind::OpenAi | AccountKind::Sim => {
                openai::call(&self.client, &self.config, target, call, deadline).await
            }
            AccountKind::Codex => {
                let session = codex::auth::Session {
                    client: &self.client,
                    config: &self.config,
                    auth: &self.codex_auth,
                    target,
                };
                codex::call(session, call, deadline, spent).await
            }
        }
    }
}
