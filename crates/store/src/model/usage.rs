//! Usage records (one per request) and the queries over them.

use serde::{Deserialize, Serialize};

use super::{AccountId, GroupId, KeyId, Timestamp, UsageId, UserId};

/// Token counts reported by the upstream. Totals default to 0; details are `None` when the
/// upstream did not report them.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct TokenCounts {
    /// Input tokens.
    pub input: u64,
    /// Output tokens.
    pub output: u64,
    /// Total tokens.
    pub total: u64,
    /// Text part of the input.
    pub input_text: Option<u64>,
    /// Image part of the input.
    pub input_image: Option<u64>,
    /// Text part of the output.
    pub output_text: Option<u64>,
    /// Image part of the output.
    pub output_image: Option<u64>,
}

/// What one request did. Written through the [`UsageWriter`](crate::UsageWriter).
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UsageRecord {
    /// The gateway's request id (`x-request-id`); unique: a second record with the same id is
    /// ignored, so retried batches never double-count.
    pub request_id: String,
    /// When the request arrived.
    pub created_at: Timestamp,
    /// The path served, e.g. `/v1/images/generations`.
    pub endpoint: String,
    /// The model asked for.
    pub model: String,
    /// Size asked for (`"1024x1024"`, `"auto"`).
    pub size_requested: Option<String>,
    /// Size produced.
    pub size_produced: Option<String>,
    /// Quality asked for.
    pub quality_requested: Option<String>,
    /// Quality produced.
    pub quality_produced: Option<String>,
    /// Output format (`png`, `jpeg`, `webp`).
    pub output_format: Option<String>,
    /// Images asked for (`n`).
    pub n: u32,
    /// Images delivered.
    pub images: u32,
    /// Whether the client asked for a stream.
    pub stream: bool,
    /// HTTP status returned to the client.
    pub status: u16,
    /// Error code returned, if any.
    pub error_code: Option<String>,
    /// Tokens.
    pub tokens: TokenCounts,
    /// Time until the last byte, in milliseconds.
    pub latency_ms: u64,
    /// Time until the first byte, in milliseconds.
    pub ttfb_ms: Option<u64>,
    /// The account that served it (the last one tried).
    pub account_id: Option<AccountId>,
    /// The key's group.
    pub group_id: Option<GroupId>,
    /// The key's owner.
    pub user_id: Option<UserId>,
    /// The key.
    pub key_id: Option<KeyId>,
    /// What the failover or fallback ladder did, if anything.
    pub fallback_note: Option<String>,
}

impl UsageRecord {
    /// A record with the given identity and everything else empty or zero
    /// (status 200, `n` = 1, no images yet).
    pub fn new(request_id: impl Into<String>, endpoint: impl Into<String>, model: impl Into<String>) -> Self {
        Self {
            request_id: request_id.into(),
            created_at: Timestamp::now(),
            endpoint: endpoint.into(),
            model: model.into(),
            size_requested: None,
            size_produced: None,
            quality_requested: None,
            quality_produced: None,
            output_format: None,
            n: 1,
            images: 0,
            stream: false,
            status: 200,
            error_code: None,
            tokens: TokenCounts::default(),
            latency_ms: 0,
            ttfb_ms: None,
            account_id: None,
            group_id: None,
            user_id: None,
            key_id: None,
            fallback_note: None,
        }
    }
}

/// A stored usage record.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct UsageEntry {
    /// Its id (increasing in insertion order).
    pub id: UsageId,
    /// The record.
    #[serde(flatten)]
    pub record: UsageRecord,
}

/// Which HTTP statuses a [`UsageFilter`] keeps.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum StatusFilter {
    /// Exactly this status.
    Exact(u16),
    /// Statuses below 400.
    Success,
    /// Statuses 400 and above.
    Failure,
}

/// Selects usage records; every field narrows the selection, `None` means "any".
#[derive(Debug, Clone, PartialEq, Eq, Default, Serialize, Deserialize)]
pub struct UsageFilter {
    /// Owner.
    pub user: Option<UserId>,
    /// Key.
    pub key: Option<KeyId>,
    /// Account.
    pub account: Option<AccountId>,
    /// Group.
    pub group: Option<GroupId>,
    /// Model (exact).
    pub model: Option<String>,
    /// Created at or after.
    pub since: Option<Timestamp>,
    /// Created before.
    pub until: Option<Timestamp>,
    /// Status class.
    pub status: Option<StatusFilter>,
    /// Size, produced or asked for (e.g. `3840x2160`).
    pub size: Option<String>,
    /// Only rows after this one in the newest-first order of [`Store::list_usage`](crate::Store::list_usage):
    /// pages that rows written meanwhile cannot shift (an export's next batch).
    pub older_than: Option<UsageCursor>,
    /// Rows to skip (paging through [`Store::list_usage`](crate::Store::list_usage); ignored by
    /// [`Store::daily_usage`](crate::Store::daily_usage)).
    pub offset: Option<u32>,
    /// At most this many rows (default [`UsageFilter::DEFAULT_LIMIT`], capped at [`UsageFilter::MAX_LIMIT`]).
    pub limit: Option<u32>,
}

impl UsageFilter {
    /// Rows returned when `limit` is `None`.
    pub const DEFAULT_LIMIT: u32 = 100;
    /// The largest `limit` honoured.
    pub const MAX_LIMIT: u32 = 10_000;

    /// The row limit to apply.
    pub fn effective_limit(&self) -> u32 {
        self.limit.unwrap_or(Self::DEFAULT_LIMIT).min(Self::MAX_LIMIT)
    }
}

/// A row's place in the newest-first order of usage records: its time, then its id.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
pub struct UsageCursor {
    /// The row's `created_at`.
    pub created_at: Timestamp,
    /// The row's id.
    pub id: UsageId,
}

impl UsageEntry {
    /// This row's place, to ask for the rows after it.
    pub fn cursor(&self) -> UsageCursor {
        UsageCursor {
            created_at: self.record.created_at,
            id: self.id,
        }
    }
}

/// Totals of one UTC day.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct DailyUsage {
    /// The day as `YYYY-MM-DD` (UTC).
    pub date: String,
    /// 00:00 UTC of that day.
    pub day_start: Timestamp,
    /// Requests.
    pub requests: u64,
    /// Requests answered with a status of 400 or above.
    pub failed_requests: u64,
    /// Images delivered.
    pub images: u64,
    /// Input tokens.
    pub input_tokens: u64,
    /// Output tokens.
    pub output_tokens: u64,
    /// Total tokens.
    pub total_tokens: u64,
}
