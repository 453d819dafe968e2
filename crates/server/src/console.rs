//! The gateway's side of the web console (`imagegate-console`): live pool state, one-off account
//! tests, key cache invalidation and account reloads.

use std::sync::Arc;
use std::time::{Duration, Instant};

use async_trait::async_trait;
use imagegate_console::ConsoleBackend;
use imagegate_dispatch::PoolSnapshot;
use imagegate_domain::{ImageParamsDraft, validate_generation};
use imagegate_store::AccountId;
use imagegate_upstream::UpstreamCall;

use crate::accounts::dispatch_id;
use crate::state::AppState;

/// How long the console's account test may take.
const TEST_DEADLINE: Duration = Duration::from_secs(120);

/// [`ConsoleBackend`] over the running gateway.
#[derive(Debug)]
pub struct GatewayConsole {
    pub app: Arc<AppState>,
}

#[async_trait]
impl ConsoleBackend for GatewayConsole {
    async fn pool_snapshot(&self) -> Result<PoolSnapshot, String> {
        self.app.dispatcher.snapshot().await.map_err(|e| e.to_string())
    }

    async fn test_account(&self, account_id: AccountId) -> Result<String, String> {
        let target = self
            .app
            .accounts
            .target(&dispatch_id(account_id))
            .ok_or_else(|| "the account has no usable base URL or credential".to_owned())?;
        let draft = ImageParamsDraft {
            model: Some(imagegate_domain::GPT_IMAGE_2.to_owned()),
            prompt: Some("imagegate console test: a small blue square".to_owned()),
            size: Some("1024x1024".to_owned()),
            quality: Some("low".to_owned()),
            ..ImageParamsDraft::default()
        };
        let params = validate_generation(draft, &self.app.catalog).map_err(|e| e.to_string())?;
        let started = Instant::now();
        let reply = self
            .app
            .upstream
            .call(&target, UpstreamCall::Generate { params: &params }, TEST_DEADLINE)
            .await
            .map_err(|failure| failure.client_error().message)?;
        let body = reply
            .into_json()
            .await
            .map_err(|failure| failure.client_error().message)?;
        let summary = imagegate_codec::usage_scan::scan(&body);
        Ok(format!(
            "{} image(s), {} {}, {} tokens, in {:.1} s",
            summary.images,
            summary.size.as_deref().unwrap_or("?"),
            summary.output_format.as_deref().unwrap_or("?"),
            summary.usage.map_or(0, |u| u.total_tokens),
            started.elapsed().as_secs_f64()
        ))
    }

    fn invalidate_key(&self, public_id: &str) {
        self.app.keys.invalidate(public_id);
    }

    async fn accounts_changed(&self) {
        if let Err(err) = self.app.accounts.refresh().await {
            tracing::warn!(error = %err, "could not reload accounts after a console change");
        }
    }
}
