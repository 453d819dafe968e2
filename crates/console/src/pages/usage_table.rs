//! The rows of the usage tables and the options of the filter form.

use std::collections::HashMap;

use imagegate_store::{AccountId, GroupId, KeyId, Timestamp, UsageEntry, UserId};

use crate::dates;

/// Display names for the ids in usage records (`#id` when unknown).
#[derive(Debug, Default)]
pub(crate) struct Names {
    pub users: HashMap<i64, String>,
    pub keys: HashMap<i64, String>,
    pub groups: HashMap<i64, String>,
    pub accounts: HashMap<i64, String>,
}

fn name_of(map: &HashMap<i64, String>, id: i64) -> String {
    map.get(&id).cloned().unwrap_or_else(|| format!("#{id}"))
}

impl Names {
    pub fn user(&self, id: UserId) -> String {
        name_of(&self.users, id.0)
    }
    pub fn key(&self, id: KeyId) -> String {
        self.keys
            .get(&id.0)
            .cloned()
            .unwrap_or_else(|| format!("#{} (deleted)", id.0))
    }
    pub fn group(&self, id: GroupId) -> String {
        name_of(&self.groups, id.0)
    }
    pub fn account(&self, id: AccountId) -> String {
        name_of(&self.accounts, id.0)
    }
}

/// One table row.
#[derive(Debug)]
pub(crate) struct UsageRow {
    pub time: String,
    pub user: String,
    pub key: String,
    pub group: String,
    pub account: String,
    pub endpoint: String,
    pub model: String,
    pub size: String,
    pub quality: String,
    pub images: u32,
    pub tokens: String,
    pub status: u16,
    pub failed: bool,
    pub error: String,
    pub latency: String,
}

impl UsageRow {
    pub fn new(entry: &UsageEntry, names: &Names, now: Timestamp) -> Self {
        let r = &entry.record;
        let dash = || "—".to_owned();
        Self {
            time: dates::short(r.created_at, now),
            user: r.user_id.map_or_else(dash, |id| names.user(id)),
            key: r.key_id.map_or_else(dash, |id| names.key(id)),
            group: r.group_id.map_or_else(dash, |id| names.group(id)),
            account: r.account_id.map_or_else(dash, |id| names.account(id)),
            endpoint: r
                .endpoint
                .trim_start_matches("/v1/")
                .trim_start_matches("images/")
                .to_owned(),
            model: r.model.clone(),
            size: r
                .size_produced
                .clone()
                .or_else(|| r.size_requested.clone())
                .unwrap_or_else(dash),
            quality: r
                .quality_produced
                .clone()
                .or_else(|| r.quality_requested.clone())
                .unwrap_or_else(dash),
            images: r.images,
            tokens: format!(
                "{} / {}",
                group_digits(r.tokens.input),
                group_digits(r.tokens.output)
            ),
            status: r.status,
            failed: r.status >= 400,
            error: r.error_code.clone().unwrap_or_default(),
            latency: format_latency(r.latency_ms),
        }
    }
}

/// `12345` -> `12,345`.
pub(crate) fn group_digits(n: u64) -> String {
    let digits = n.to_string();
    let mut out = String::with_capacity(digits.len() + digits.len() / 3);
    for (i, c) in digits.chars().enumerate() {
        if i > 0 && (digits.len() - i).is_multiple_of(3) {
            out.push(',');
        }
        out.push(c);
    }
    out
}

fn format_latency(ms: u64) -> String {
    if ms < 1000 {
        format!("{ms} ms")
    } else {
        // One decimal of seconds, integer arithmetic.
        format!("{}.{} s", ms / 1000, (ms % 1000) / 100)
    }
}

/// An option of a filter `<select>`.
#[derive(Debug)]
pub(crate) struct SelectOption {
    pub value: String,
    pub label: String,
    pub selected: bool,
}

/// Options for ids with names, sorted by name, "Any" first.
pub(crate) fn id_options(names: &HashMap<i64, String>, chosen: &str, any: &str) -> Vec<SelectOption> {
    let mut pairs: Vec<(&i64, &String)> = names.iter().collect();
    pairs.sort_by(|a, b| a.1.cmp(b.1).then(a.0.cmp(b.0)));
    let mut options = vec![SelectOption {
        value: String::new(),
        label: any.to_owned(),
        selected: chosen.is_empty(),
    }];
    options.extend(pairs.into_iter().map(|(id, name)| SelectOption {
        value: id.to_string(),
        label: name.clone(),
        selected: chosen == id.to_string(),
    }));
    options
}

/// Options of the status filter.
pub(crate) fn status_options(chosen: &str) -> Vec<SelectOption> {
    [
        ("", "Any status"),
        ("ok", "Succeeded"),
        ("failed", "Failed"),
        ("400", "400 invalid request"),
        ("401", "401 unauthorized"),
        ("429", "429 rate limited"),
        ("500", "500 server error"),
        ("502", "502 upstream error"),
        ("503", "503 unavailable"),
    ]
    .into_iter()
    .map(|(value, label)| SelectOption {
        value: value.to_owned(),
        label: label.to_owned(),
        selected: chosen == value,
    })
    .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn digits_and_latency() {
        assert_eq!(group_digits(0), "0");
        assert_eq!(group_digits(1234567), "1,234,567");
        assert_eq!(format_latency(999), "999 ms");
        assert_eq!(format_latency(2345), "2.3 s");
    }
}
