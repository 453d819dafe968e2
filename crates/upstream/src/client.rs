//! [`HttpUpstream`]: the [`Upstream`] of the real gateway, one pooled HTTP client for every account,
//! routing each call to the transport of the account's kind.

use std::time::Duration;

use crate::call::UpstreamCall;
use crate::failure::Failure;
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
        }
    }
}

/// The HTTP client could not be built (e.g. no TLS backend).
#[derive(Debug, thiserror::Error)]
#[error("building the upstream HTTP client failed: {0}")]
pub struct BuildError(#[from] reqwest::Error);

/// Calls real upstreams over HTTP (rustls, pooled connections, no redirects, no proxy from the
/// environment). Cheap to clone; clones share the connection pool.
///
/// Account kinds: [`AccountKind::OpenAi`] and [`AccountKind::Sim`] use the OpenAI wire;
/// [`AccountKind::Codex`] turns Images requests into Responses calls with a forced
/// `image_generation` tool (see the crate docs).
#[derive(Clone, Debug)]
pub struct HttpUpstream {
    client: reqwest::Client,
    config: UpstreamConfig,
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
        Ok(Self { client, config })
    }

    /// The settings in use.
    pub fn config(&self) -> &UpstreamConfig {
        &self.config
    }
}

#[async_trait::async_trait]
impl Upstream for HttpUpstream {
    async fn call(
        &self,
        target: &AccountTarget,
        call: UpstreamCall<'_>,
        deadline: Duration,
    ) -> Result<Reply, Failure> {
        match target.kind {
            AccountKind::OpenAi | AccountKind::Sim => {
                openai::call(&self.client, &self.config, target, call, deadline).await
            }
            AccountKind::Codex => codex::call(&self.client, &self.config, target, call, deadline).await,
        }
    }
}
