//! Live pool state for `imagegate accounts list`: asked of the running gateway through the local
//! control file, and shown next to what the database stores.

use std::path::Path;
use std::time::Duration;

use imagegate_store::{Account, AccountId};
use serde_json::{Value, json};

/// The running gateway's pool snapshot, or why there is none.
pub async fn pool_state(data_dir: &Path) -> Result<Value, String> {
    let control = crate::control::read(data_dir)
        .ok_or_else(|| "no gateway is running on this data directory".to_owned())?;
    let client = reqwest::Client::builder()
        .timeout(Duration::from_secs(5))
        .build()
        .map_err(|e| format!("http client: {e}"))?;
    let response = client
        .get(format!("{}/internal/pool", control.url))
        .bearer_auth(&control.token)
        .send()
        .await
        .map_err(|e| format!("gateway at {} did not answer: {e}", control.url))?;
    if !response.status().is_success() {
        return Err(format!(
            "gateway at {} answered {}",
            control.url,
            response.status()
        ));
    }
    response
        .json()
        .await
        .map_err(|e| format!("unreadable pool state: {e}"))
}

/// The snapshot entry of one account.
pub fn entry(snapshot: &Value, id: AccountId) -> Option<&Value> {
    let id = id.to_string();
    snapshot["accounts"]
        .as_array()?
        .iter()
        .find(|a| a["id"].as_str() == Some(id.as_str()))
}

/// Stored accounts with a `live` object each (or `live: null` and a top-level `live_error`).
pub fn merge(accounts: &[Account], live: &Result<Value, String>) -> Value {
    let rows: Vec<Value> = accounts
        .iter()
        .map(|account| {
            let mut row = serde_json::to_value(account).unwrap_or(Value::Null);
            let state = live.as_ref().ok().and_then(|l| entry(l, account.id)).cloned();
            if let Value::Object(map) = &mut row {
                map.insert("live".to_owned(), state.unwrap_or(Value::Null));
            }
            row
        })
        .collect();
    match live {
        Ok(snapshot) => json!({"accounts": rows, "live_at": snapshot["at"].clone()}),
        Err(why) => json!({"accounts": rows, "live_error": why}),
    }
}

/// One line: load per class against limits, cooldowns, counts and the last error.
pub fn summary(state: &Value) -> String {
    let mut parts = vec![format!(
        "in flight standard {}/{} large {}/{}",
        state["in_flight"]["standard"],
        state["limits"]["standard"],
        state["in_flight"]["large"],
        state["limits"]["large"]
    )];
    for cooldown in state["cooldowns"].as_array().into_iter().flatten() {
        parts.push(format!(
            "cooling ({}) until {}: {}",
            cooldown["scope"], cooldown["until"], cooldown["reason"]
        ));
    }
    parts.push(format!("ok {} failed {}", state["successes"], state["failures"]));
    if let Some(error) = state["last_error"].as_object() {
        parts.push(format!("last error: {}", Value::Object(error.clone())));
    }
    parts.join("; ")
}
