//! Request counters: totals per path and per bearer token, faults injected, and requests in flight (current
//! and the maximum seen) overall and per token. A request stays in flight until its response body ends.
//! Per token also the last `chatgpt-account-id` header and the main models of Responses calls; and the
//! refresh grants of the OAuth token endpoint.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, PoisonError};

use serde::Serialize;

/// Counters of one bearer token.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct TokenStats {
    /// Requests seen.
    pub requests: u64,
    /// Requests per path.
    pub by_path: BTreeMap<String, u64>,
    /// Requests whose response has not finished.
    pub in_flight: u64,
    /// Highest `in_flight` since the last reset.
    pub max_in_flight: u64,
    /// The last `chatgpt-account-id` header sent with this token.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub chatgpt_account_id: Option<String>,
    /// Responses calls per main `model` (unsupported ones included).
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub main_models: BTreeMap<String, u64>,
}

/// Counters of the OAuth token endpoint (`POST /oauth/token`).
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct OAuthStats {
    /// Refresh grants answered with new tokens.
    pub refreshes: u64,
    /// Grants refused (unknown or used refresh token, wrong grant type, no client id).
    pub rejected: u64,
    /// The `client_id` of the last grant.
    pub last_client_id: Option<String>,
}

/// What `GET /sim/stats` returns.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct StatsSnapshot {
    /// Requests seen on `/v1/...`.
    pub requests: u64,
    /// Requests per path.
    pub by_path: BTreeMap<String, u64>,
    /// Counters per bearer token (requests without a token are not listed here).
    pub by_token: BTreeMap<String, TokenStats>,
    /// Faults injected, by canonical fault name.
    pub faults: BTreeMap<String, u64>,
    /// Requests whose response has not finished.
    pub in_flight: u64,
    /// Highest `in_flight` since the last reset.
    pub max_in_flight: u64,
    /// The OAuth token endpoint.
    pub oauth: OAuthStats,
    /// The files of the last edit received, in form order (images, then the mask).
    pub last_edit_inputs: Vec<EditInput>,
}

/// One file of an edit, as the simulator received it.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize)]
pub struct EditInput {
    /// The part name (`image[]`, `mask`, ...).
    pub field: String,
    /// The file's size in bytes.
    pub bytes: u64,
    /// The SHA-256 of the file, lowercase hex.
    pub sha256: String,
}

impl StatsSnapshot {
    /// Requests made with `token` (0 if never seen).
    pub fn requests_for(&self, token: &str) -> u64 {
        self.by_token.get(token).map_or(0, |t| t.requests)
    }
}

/// Shared request counters.
#[derive(Debug, Default)]
pub struct Stats {
    inner: Mutex<StatsSnapshot>,
}

impl Stats {
    /// Counts a request and marks it in flight until the returned guard is dropped.
    pub fn begin(self: &Arc<Self>, token: Option<&str>, path: &str) -> InFlight {
        let mut inner = self.lock();
        inner.requests += 1;
        *inner.by_path.entry(path.to_owned()).or_default() += 1;
        inner.in_flight += 1;
        inner.max_in_flight = inner.max_in_flight.max(inner.in_flight);
        if let Some(token) = token {
            let entry = inner.by_token.entry(token.to_owned()).or_default();
            entry.requests += 1;
            *entry.by_path.entry(path.to_owned()).or_default() += 1;
            entry.in_flight += 1;
            entry.max_in_flight = entry.max_in_flight.max(entry.in_flight);
        }
        InFlight {
            stats: Arc::clone(self),
            token: token.map(str::to_owned),
        }
    }

    /// Remembers the `chatgpt-account-id` header of a request made with `token`.
    pub fn record_account_id(&self, token: &str, account_id: &str) {
        let mut inner = self.lock();
        let entry = inner.by_token.entry(token.to_owned()).or_default();
        entry.chatgpt_account_id = Some(account_id.to_owned());
    }

    /// Counts a Responses call with main model `model` made with `token`.
    pub fn record_main_model(&self, token: &str, model: &str) {
        let mut inner = self.lock();
        let entry = inner.by_token.entry(token.to_owned()).or_default();
        *entry.main_models.entry(model.to_owned()).or_default() += 1;
    }

    /// Counts a grant of the token endpoint (`granted` or refused) and its client id.
    pub fn record_grant(&self, granted: bool, client_id: Option<&str>) {
        let mut inner = self.lock();
        if granted {
            inner.oauth.refreshes += 1;
        } else {
            inner.oauth.rejected += 1;
        }
        if let Some(client_id) = client_id {
            inner.oauth.last_client_id = Some(client_id.to_owned());
        }
    }

    /// Remembers the files of the edit just received.
    pub fn record_edit_inputs(&self, inputs: Vec<EditInput>) {
        self.lock().last_edit_inputs = inputs;
    }

    /// Counts an injected fault.
    pub fn record_fault(&self, name: &str) {
        *self.lock().faults.entry(name.to_owned()).or_default() += 1;
    }

    /// A copy of the counters.
    pub fn snapshot(&self) -> StatsSnapshot {
        self.lock().clone()
    }

    /// Zeroes the counters. Requests still in flight stay counted as in flight (and set the new maxima).
    pub fn reset(&self) {
        let mut inner = self.lock();
        let in_flight = inner.in_flight;
        let tokens: BTreeMap<String, TokenStats> = std::mem::take(&mut inner.by_token)
            .into_iter()
            .filter(|(_, t)| t.in_flight > 0)
            .map(|(token, t)| {
                (
                    token,
                    TokenStats {
                        in_flight: t.in_flight,
                        max_in_flight: t.in_flight,
                        ..TokenStats::default()
                    },
                )
            })
            .collect();
        *inner = StatsSnapshot {
            in_flight,
            max_in_flight: in_flight,
            by_token: tokens,
            ..StatsSnapshot::default()
        };
    }

    fn lock(&self) -> std::sync::MutexGuard<'_, StatsSnapshot> {
        self.inner.lock().unwrap_or_else(PoisonError::into_inner)
    }
}

/// Marks one request in flight while alive.
#[derive(Debug)]
pub struct InFlight {
    stats: Arc<Stats>,
    token: Option<String>,
}

impl Drop for InFlight {
    fn drop(&mut self) {
        let mut inner = self.stats.lock();
        inner.in_flight = inner.in_flight.saturating_sub(1);
        if let Some(token) = &self.token
            && let Some(entry) = inner.by_token.get_mut(token)
        {
            entry.in_flight = entry.in_flight.saturating_sub(1);
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn counts_requests_and_concurrency_per_token() {
        let stats = Arc::new(Stats::default());
        let a1 = stats.begin(Some("sk-a"), "/v1/images/generations");
        let a2 = stats.begin(Some("sk-a"), "/v1/responses");
        let b = stats.begin(Some("sk-b"), "/v1/images/generations");
        let anonymous = stats.begin(None, "/v1/models");
        let snap = stats.snapshot();
        assert_eq!(snap.requests, 4);
        assert_eq!((snap.in_flight, snap.max_in_flight), (4, 4));
        assert_eq!(snap.by_path["/v1/images/generations"], 2);
        assert_eq!(snap.requests_for("sk-a"), 2);
        assert_eq!(snap.by_token["sk-a"].max_in_flight, 2);
        assert_eq!(snap.by_token["sk-a"].by_path["/v1/responses"], 1);
        assert_eq!(snap.requests_for("nobody"), 0);
        drop((a1, a2, b, anonymous));
        let snap = stats.snapshot();
        assert_eq!((snap.in_flight, snap.max_in_flight), (0, 4));
        assert_eq!(
            (
                snap.by_token["sk-a"].in_flight,
                snap.by_token["sk-a"].max_in_flight
            ),
            (0, 2)
        );
    }

    #[test]
    fn account_ids_main_models_and_grants_are_recorded() {
        let stats = Arc::new(Stats::default());
        drop(stats.begin(Some("at-1"), "/v1/responses"));
        stats.record_account_id("at-1", "acct-a");
        stats.record_account_id("at-1", "acct-b");
        stats.record_main_model("at-1", "gpt-5.5");
        stats.record_main_model("at-1", "gpt-5");
        stats.record_main_model("at-1", "gpt-5");
        stats.record_grant(true, Some("app_x"));
        stats.record_grant(false, None);
        let snap = stats.snapshot();
        let token = &snap.by_token["at-1"];
        assert_eq!(token.chatgpt_account_id.as_deref(), Some("acct-b"));
        assert_eq!(
            token.main_models,
            BTreeMap::from([("gpt-5".to_owned(), 2), ("gpt-5.5".to_owned(), 1)])
        );
        assert_eq!(
            snap.oauth,
            OAuthStats {
                refreshes: 1,
                rejected: 1,
                last_client_id: Some("app_x".to_owned())
            }
        );
        stats.reset();
        assert_eq!(stats.snapshot().oauth, OAuthStats::default());
    }

    #[test]
    fn reset_keeps_what_is_still_in_flight() {
        let stats = Arc::new(Stats::default());
        let still = stats.begin(Some("sk-a"), "/v1/responses");
        drop(stats.begin(Some("sk-b"), "/v1/responses"));
        stats.record_fault("500");
        stats.reset();
        let snap = stats.snapshot();
        assert_eq!((snap.requests, snap.in_flight, snap.max_in_flight), (0, 1, 1));
        assert!(snap.faults.is_empty());
        assert_eq!(snap.by_token.len(), 1);
        assert_eq!(snap.by_token["sk-a"].in_flight, 1);
        drop(still);
        assert_eq!(stats.snapshot().in_flight, 0);
        assert_eq!(stats.snapshot().by_token["sk-a"].in_flight, 0);
    }
}
