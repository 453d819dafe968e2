//! The OAuth credential of ChatGPT-subscription accounts: which access token a call uses, when it
//! is refreshed, and where the refreshed credential goes.
//!
//! - Each request carries `Authorization: Bearer <access_token>`, `chatgpt-account-id` (when
//!   known), `OpenAI-Beta: responses=experimental` and `originator: codex_cli_rs`.
//! - The access token is refreshed before a call when it expires within
//!   [`crate::CodexAuthConfig::refresh_skew`], and once when the upstream answers 401 (the call is
//!   then sent again once with the new token).
//! - At most one refresh per account runs at a time: callers of the same account wait on its lock
//!   and use the token the first one got.
//! - A refresh runs to its end in a task of its own, under a limit of its own (30 s), even when the
//!   request that started it is dropped or its deadline passes (its client left, a late failover
//!   try had little time left): the token endpoint may already have used up the old refresh
//!   token, so the new one must be kept and saved whatever happens to the request.
//! - A refused refresh reads the account's stored credential for up to 3 s before it counts as a
//!   refusal: another replica that used the refresh token first may still be saving its refresh.
//! - The refreshed credential is kept here, keyed by account, and given once to the
//!   [`CredentialStore`]. The account's stored credential (in [`AccountTarget::credential`]) is
//!   still recognised as the one this process replaced, so the cached credential keeps being used
//!   until the account's credential is changed from outside.

mod credential;
mod refresh;

use std::collections::HashMap;
use std::fmt;
use std::sync::{Arc, Mutex, PoisonError};

use reqwest::header::{HeaderMap, HeaderName, HeaderValue};
use tokio::time::timeout_at;

use self::credential::CodexCredential;
use self::refresh::RefreshError;
use crate::call::Endpoint;
use crate::client::UpstreamConfig;
use crate::credential_store::CredentialStore;
use crate::failure::{Failure, FailureKind};
use crate::openai::{self, Deadline, Outgoing, RequestBody, bearer_headers};
use crate::target::{AccountTarget, Secret};

/// How many credentials an account's cache remembers as replaced by its refreshed one.
const REPLACED_KEPT: usize = 8;

/// How long a refresh may take, whatever is left of the call that started it: the token endpoint
/// uses up the refresh token however late it answers, so its answer must still be kept and saved.
const REFRESH_LIMIT: std::time::Duration = std::time::Duration::from_secs(30);

/// How long a refused refresh looks for another replica's in the store before it counts as a
/// refusal: a replica may have replaced the credential a moment ago.
const REFUSAL_RECHECK: std::time::Duration = std::time::Duration::from_secs(3);

/// The same when the refresh token was refused as used already: the replica that used it first
/// may still be waiting for a slow token endpoint's answer, and then saving it. (A token used
/// outside the gateway, by the same sign-in in another client, is never saved: the account is
/// marked after this wait.)
const REUSED_RECHECK: std::time::Duration = std::time::Duration::from_secs(10);

/// How long one read or write of the credential store may take: a database that stopped answering
/// must not hold the account's lock (and every call of the account) for long.
const STORE_LIMIT: std::time::Duration = std::time::Duration::from_secs(5);

/// After a refresh failed for a reason other than a refusal, how long a token that is still
/// valid is used without trying again: calls queued behind a slow token endpoint do not each wait
/// out a refresh of their own.
const RETRY_REFRESH_AFTER: std::time::Duration = std::time::Duration::from_secs(10);

/// How often the store is read again meanwhile.
const REFUSAL_RECHECK_EVERY: std::time::Duration = std::time::Duration::from_millis(200);

/// Refreshed credentials per account, and the store they are saved to.
pub(crate) struct CodexAuth {
    store: Option<Arc<dyn CredentialStore>>,
    accounts: Mutex<HashMap<i64, Arc<AccountSlot>>>,
}

impl fmt::Debug for CodexAuth {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        let accounts = self.accounts.lock().map_or(0, |accounts| accounts.len());
        f.debug_struct("CodexAuth")
            .field("has_store", &self.store.is_some())
            .field("accounts", &accounts)
            .finish()
    }
}

/// One account: its lock (held while its credential is read or refreshed) and cache.
#[derive(Default)]
struct AccountSlot {
    cached: Arc<tokio::sync::Mutex<Option<Cached>>>,
    /// When a refresh last failed for a reason other than a refusal, until one succeeds.
    refresh_failed_at: Mutex<Option<tokio::time::Instant>>,
}

impl AccountSlot {
    fn refresh_failed_recently(&self) -> bool {
        let failed_at = *self
            .refresh_failed_at
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        failed_at.is_some_and(|at| at.elapsed() < RETRY_REFRESH_AFTER)
    }

    fn note_refresh(&self, result: &Result<CodexCredential, RefreshError>) {
        let mut failed_at = self
            .refresh_failed_at
            .lock()
            .unwrap_or_else(PoisonError::into_inner);
        *failed_at = match result {
            Err(RefreshError::Refused { .. }) | Ok(_) => None,
            Err(_) => Some(tokio::time::Instant::now()),
        };
    }
}

/// The account's cache, locked; owned, so that a refresh task can hold it.
type CacheGuard = tokio::sync::OwnedMutexGuard<Option<Cached>>;

/// A credential this process refreshed.
struct Cached {
    /// The refreshed credential.
    credential: CodexCredential,
    /// Its stored form (what was given to the store).
    saved: Secret,
    /// Stored forms it replaced: a target still carrying one of them gets the refreshed one.
    replaced: Vec<Secret>,
}

/// A call to one codex account.
#[derive(Clone, Copy, Debug)]
pub(crate) struct Session<'a> {
    pub(crate) client: &'a reqwest::Client,
    pub(crate) config: &'a UpstreamConfig,
    pub(crate) auth: &'a Arc<CodexAuth>,
    pub(crate) target: &'a AccountTarget,
}

impl Session<'_> {
    /// Sends a JSON request with the account's access token (refreshed first when it is about
    /// to expire). On 401 the token is refreshed once and the request sent again once.
    pub(crate) async fn send(
        &self,
        endpoint: Endpoint,
        body: impl Fn() -> Result<RequestBody, Failure>,
        is_stream: bool,
        deadline: Deadline,
    ) -> Result<reqwest::Response, Failure> {
        let credential = self.auth.current(self, deadline).await?;
        let first = self.send_with(&credential, endpoint, body()?, is_stream, deadline);
        let failure = match first.await {
            Err(failure) if failure.kind == FailureKind::Unauthorized => failure,
            other => return other,
        };
        tracing::info!(
            account_id = self.target.account_id,
            "the upstream refused the access token; refreshing it"
        );
        let renewed = self
            .auth
            .after_refusal(self, &credential.access_token, deadline)
            .await?;
        let second = self.send_with(&renewed, endpoint, body()?, is_stream, deadline);
        second.await.map_err(|again| {
            if again.kind == FailureKind::Unauthorized {
                Failure::new(
                    FailureKind::Unauthorized,
                    "the upstream refused the refreshed access token too (HTTP 401): the account \
                     needs a new sign-in",
                )
                .with_status(again.status.or(failure.status).unwrap_or(401))
            } else {
                again
            }
        })
    }

    async fn send_with(
        &self,
        credential: &CodexCredential,
        endpoint: Endpoint,
        body: RequestBody,
        is_stream: bool,
        deadline: Deadline,
    ) -> Result<reqwest::Response, Failure> {
        let auth = codex_headers(credential)?;
        let outgoing = Outgoing {
            target: self.target,
            auth: &auth,
            endpoint,
            body,
            is_stream,
            deadline,
        };
        openai::send(self.client, self.config, outgoing).await
    }
}

/// The headers of a ChatGPT-subscription request.
fn codex_headers(credential: &CodexCredential) -> Result<HeaderMap, Failure> {
    let mut headers = bearer_headers(&credential.access_token)?;
    if let Some(account_id) = &credential.account_id {
        let value = HeaderValue::from_str(account_id).map_err(|_| {
            Failure::new(
                FailureKind::Unauthorized,
                "the credential's account_id cannot be sent in a header",
            )
        })?;
        headers.insert(HeaderName::from_static("chatgpt-account-id"), value);
    }
    headers.insert(
        HeaderName::from_static("openai-beta"),
        HeaderValue::from_static("responses=experimental"),
    );
    headers.insert(
        HeaderName::from_static("originator"),
        HeaderValue::from_static("codex_cli_rs"),
    );
    Ok(headers)
}

impl CodexAuth {
    /// An empty cache saving refreshed credentials to `store`.
    pub(crate) fn new(store: Option<Arc<dyn CredentialStore>>) -> Self {
        Self {
            store,
            accounts: Mutex::new(HashMap::new()),
        }
    }

    fn slot(&self, account_id: i64) -> Arc<AccountSlot> {
        let mut accounts = self.accounts.lock().unwrap_or_else(PoisonError::into_inner);
        Arc::clone(accounts.entry(account_id).or_default())
    }

    /// The credential to call with, refreshed first when it expires within the skew. When that
    /// refresh fails for a reason other than a refusal and the token has not expired yet, the
    /// token is used as it is.
    async fn current(&self, session: &Session<'_>, deadline: Deadline) -> Result<CodexCredential, Failure> {
        let slot = self.slot(session.target.account_id);
        let mut cached = timeout_at(deadline.at, Arc::clone(&slot.cached).lock_owned())
            .await
            .map_err(|_| deadline.failure())?;
        let credential = resolve(&mut cached, &session.target.credential)?;
        let now = now_seconds();
        let skew = i64::try_from(session.config.codex.refresh_skew.as_secs()).unwrap_or(i64::MAX);
        if !credential.expires_within(now, skew) || credential.refresh_token.is_none() {
            return Ok(credential);
        }
        // A refresh failed a moment ago and the token still works: no call waits for another.
        if !credential.is_expired(now) && slot.refresh_failed_recently() {
            return Ok(credential);
        }
        let context = "refreshing the expiring access token failed";
        let refreshed = self.refresh(cached, session, &credential, deadline).await;
        slot.note_refresh(&refreshed);
        match refreshed {
            Ok(fresh) => Ok(fresh),
            Err(error) if !matches!(error, RefreshError::Refused { .. }) && !credential.is_expired(now) => {
                tracing::warn!(
                    account_id = session.target.account_id,
                    error = %error,
                    "could not refresh the expiring access token; using it until it expires"
                );
                Ok(credential)
            }
            Err(error) => Err(error.into_failure(context, deadline)),
        }
    }

    /// The credential to try again with after the upstream refused `refused_token`: the one
    /// another call refreshed meanwhile, else a freshly refreshed one.
    async fn after_refusal(
        &self,
        session: &Session<'_>,
        refused_token: &str,
        deadline: Deadline,
    ) -> Result<CodexCredential, Failure> {
        let slot = self.slot(session.target.account_id);
        let mut cached = timeout_at(deadline.at, Arc::clone(&slot.cached).lock_owned())
            .await
            .map_err(|_| deadline.failure())?;
        let credential = resolve(&mut cached, &session.target.credential)?;
        if credential.access_token != refused_token {
            return Ok(credential);
        }
        let refreshed = self.refresh(cached, session, &credential, deadline).await;
        slot.note_refresh(&refreshed);
        refreshed.map_err(|error| {
            let context = "the upstream refused the access token (HTTP 401) and refreshing it failed";
            error.into_failure(context, deadline)
        })
    }

    /// Refreshes `credential` with the account's lock held, caches the result and saves it to
    /// the store, in a task that finishes even if the caller is dropped (the lock goes with it).
    async fn refresh(
        &self,
        cached: CacheGuard,
        session: &Session<'_>,
        credential: &CodexCredential,
        deadline: Deadline,
    ) -> Result<CodexCredential, RefreshError> {
        let refresh = Refresh {
            cached,
            client: session.client.clone(),
            codex: session.config.codex.clone(),
            credential: credential.clone(),
            stored: session.target.credential.clone(),
            account_id: session.target.account_id,
            store: self.store.clone(),
            deadline: Deadline::from_now(REFRESH_LIMIT),
        };
        // A task so that a refresh the caller stops waiting for (dropped, or past its deadline)
        // still saves the new tokens (the refresh token is single-use); awaited here.
        #[expect(clippy::disallowed_methods, reason = "awaited; must outlive a dropped caller")]
        let task = tokio::spawn(refresh.run());
        match timeout_at(deadline.at, task).await {
            Err(_elapsed) => Err(RefreshError::Timeout),
            Ok(joined) => joined.unwrap_or_else(|error| {
                Err(RefreshError::Unavailable(format!(
                    "the refresh task failed: {error}"
                )))
            }),
        }
    }
}

/// Everything a refresh needs, owned by the task that runs it.
struct Refresh {
    cached: CacheGuard,
    client: reqwest::Client,
    codex: crate::client::CodexAuthConfig,
    credential: CodexCredential,
    /// The account's stored credential, which the refreshed one replaces.
    stored: Secret,
    account_id: i64,
    store: Option<Arc<dyn CredentialStore>>,
    deadline: Deadline,
}

impl Refresh {
    async fn run(mut self) -> Result<CodexCredential, RefreshError> {
        let account_id = self.account_id;
        // What is refreshed: the cached refresh, or the account's stored credential.
        let mut from = self
            .cached
            .as_ref()
            .map_or_else(|| self.stored.clone(), |cached| cached.saved.clone());
        // Another replica may have refreshed it first, using up its refresh token: the store
        // then holds the new credential, which is used (or refreshed in turn) instead.
        if let Some((current, credential)) = self.stored_elsewhere(&from).await {
            let skew = i64::try_from(self.codex.refresh_skew.as_secs()).unwrap_or(i64::MAX);
            if !credential.expires_within(now_seconds(), skew) || credential.refresh_token.is_none() {
                return Ok(self.adopt(current, credential, &from));
            }
            self.credential = self.adopt(current.clone(), credential, &from);
            from = current;
        }
        let fresh = match refresh::refresh(
            &self.client,
            &self.codex,
            &self.credential,
            now_seconds(),
            self.deadline,
        )
        .await
        {
            Ok(fresh) => fresh,
            // Refused because another replica used the refresh token meanwhile? Then its
            // refresh is in the store, or soon will be.
            Err(error @ RefreshError::Refused { .. }) => {
                let recheck = if error.used_elsewhere() {
                    REUSED_RECHECK
                } else {
                    REFUSAL_RECHECK
                };
                return match self.stored_elsewhere_soon(&from, recheck).await {
                    Some((current, credential)) => Ok(self.adopt(current, credential, &from)),
                    None => Err(error),
                };
            }
            Err(error) => return Err(error),
        };
        let saved = fresh.to_secret();
        self.keep(fresh.clone(), saved.clone(), &from);
        tracing::info!(
            account_id,
            expires_at = fresh.expires_at,
            "access token refreshed"
        );
        if let Some(store) = self.store.clone()
            && tokio::time::timeout(2 * STORE_LIMIT, self.save(store.as_ref(), &from, saved))
                .await
                .is_err()
        {
            tracing::warn!(
                account_id,
                "the store did not take the refreshed credential in time; this process keeps using it"
            );
        }
        Ok(fresh)
    }

    /// The account's stored credential with what it reads as, if it is no longer `from` (another
    /// replica refreshed it, or an operator replaced it) and can still be used: its access token
    /// is valid, or it has a refresh token (an operator's new sign-in may hold only that).
    async fn stored_elsewhere(&self, from: &Secret) -> Option<(Secret, CodexCredential)> {
        let store = self.store.as_ref()?;
        let limit = self.deadline.at.min(tokio::time::Instant::now() + STORE_LIMIT);
        let loaded = timeout_at(limit, store.load(self.account_id)).await;
        let current = match loaded {
            // Not one this process replaced itself (its save of the refresh may have failed).
            Ok(Ok(Some(current))) if current != *from && !self.replaced_here(&current) => current,
            Ok(Ok(_)) | Err(_) => return None,
            Ok(Err(error)) => {
                tracing::warn!(
                    account_id = self.account_id,
                    error = %error,
                    "could not read the stored credential before refreshing"
                );
                return None;
            }
        };
        let credential = CodexCredential::parse(&current).ok()?;
        let usable = !credential.is_expired(now_seconds()) || credential.refresh_token.is_some();
        usable.then_some((current, credential))
    }

    /// [`Refresh::stored_elsewhere`] with a valid access token, read again for up to `recheck`
    /// while it finds nothing new.
    async fn stored_elsewhere_soon(
        &self,
        from: &Secret,
        recheck: std::time::Duration,
    ) -> Option<(Secret, CodexCredential)> {
        self.store.as_ref()?;
        let until = tokio::time::Instant::now() + recheck;
        loop {
            if let Some(found) = self.stored_elsewhere(from).await
                && !found.1.is_expired(now_seconds())
            {
                return Some(found);
            }
            // Past the refresh's own deadline too: the other replica's may take as long.
            let next = tokio::time::Instant::now() + REFUSAL_RECHECK_EVERY;
            if next > until {
                return None;
            }
            tokio::time::sleep_until(next).await;
        }
    }

    /// Whether this process refreshed `credential` into its cached one.
    fn replaced_here(&self, credential: &Secret) -> bool {
        self.cached
            .as_ref()
            .is_some_and(|cached| cached.replaced.contains(credential))
    }

    /// Saves `saved`, the refresh of `from`, over the stored credential if that is still `from`,
    /// or one this process replaced before (a save that failed then); never over anyone else's.
    async fn save(&self, store: &dyn CredentialStore, from: &Secret, saved: Secret) {
        let account_id = self.account_id;
        let mut previous = from.clone();
        // At most twice: over `from`, then over an older credential of this process's.
        for _ in 0..2 {
            match store.save(account_id, &previous, saved.clone()).await {
                Ok(true) => return,
                Ok(false) => match store.load(account_id).await {
                    Ok(Some(current)) if current != previous && self.replaced_here(&current) => {
                        previous = current;
                    }
                    _ => {
                        tracing::info!(
                            account_id,
                            "the account's credential changed while it was refreshed; the stored one is kept"
                        );
                        return;
                    }
                },
                Err(error) => {
                    tracing::warn!(
                        account_id,
                        error = %error,
                        "the refreshed credential could not be saved; this process keeps using it"
                    );
                    return;
                }
            }
        }
    }

    /// Uses `credential`, stored as `current` by someone else, in place of `from`.
    fn adopt(&mut self, current: Secret, credential: CodexCredential, from: &Secret) -> CodexCredential {
        tracing::info!(
            account_id = self.account_id,
            "the account's credential was refreshed or replaced elsewhere; using the stored one"
        );
        self.keep(credential.clone(), current, from);
        credential
    }

    /// Caches `credential` (stored as `saved`) as the one that replaces `from` and the account's
    /// credential in the directory.
    fn keep(&mut self, credential: CodexCredential, saved: Secret, from: &Secret) {
        let mut replaced = self.cached.take().map(|old| old.replaced).unwrap_or_default();
        for old in [&self.stored, from] {
            if *old != saved && !replaced.contains(old) {
                replaced.push(old.clone());
            }
        }
        let excess = replaced.len().saturating_sub(REPLACED_KEPT);
        replaced.drain(..excess);
        *self.cached = Some(Cached {
            credential,
            saved,
            replaced,
        });
    }
}

/// The credential of `stored`: the cached refresh of it, else `stored` itself (which then
/// replaces the cache: the account's credential was changed from outside).
fn resolve(cached: &mut Option<Cached>, stored: &Secret) -> Result<CodexCredential, Failure> {
    if let Some(entry) = cached.as_ref()
        && (entry.saved == *stored || entry.replaced.contains(stored))
    {
        return Ok(entry.credential.clone());
    }
    *cached = None;
    CodexCredential::parse(stored).map_err(|error| {
        Failure::new(
            FailureKind::Unauthorized,
            format!("the codex account's credential cannot be used: {error}"),
        )
    })
}

fn now_seconds() -> i64 {
    i64::try_from(openai::now_unix_ms() / 1000).unwrap_or(i64::MAX)
}
