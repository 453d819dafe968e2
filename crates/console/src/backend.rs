//! [`ConsoleBackend`]: what the console needs from the running gateway, and a stub for tests.

use async_trait::async_trait;
use imagegate_dispatch::PoolSnapshot;
use imagegate_store::AccountId;
use parking_lot::Mutex;

/// The gateway's side of the console: live pool state, account tests and cache invalidation.
///
/// The server implements it over its dispatcher, upstream transports and key cache.
#[async_trait]
pub trait ConsoleBackend: Send + Sync {
    /// The dispatcher's view of every account (in flight, cooldowns, last error). Accounts are
    /// matched to stored ones by id (`AccountSnapshot::id` is the store id as text).
    async fn pool_snapshot(&self) -> Result<PoolSnapshot, String>;

    /// Runs one small generation on the account and summarises the result (e.g.
    /// `"1024x1024 png in 2.1 s"`), or says why it failed.
    async fn test_account(&self, account_id: AccountId) -> Result<String, String>;

    /// Forgets any cached authentication of the key with this public id (after a disable or
    /// delete), so it stops working at once.
    fn invalidate_key(&self, public_id: &str);

    /// Accounts were added, changed or removed: reload them now rather than at the next periodic
    /// refresh. The default does nothing.
    async fn accounts_changed(&self) {}
}

/// A [`ConsoleBackend`] with a fixed snapshot and scripted test results, for tests and examples.
/// It remembers which keys were invalidated and which accounts were tested.
#[derive(Debug, Default)]
pub struct StubBackend {
    snapshot: Mutex<Option<PoolSnapshot>>,
    test_result: Mutex<Option<Result<String, String>>>,
    invalidated: Mutex<Vec<String>>,
    tested: Mutex<Vec<AccountId>>,
    account_changes: Mutex<u32>,
}

impl StubBackend {
    /// Serve this snapshot (without one: an empty pool).
    pub fn set_snapshot(&self, snapshot: PoolSnapshot) {
        *self.snapshot.lock() = Some(snapshot);
    }

    /// Answer account tests with this result (without one: `Ok("ok")`).
    pub fn set_test_result(&self, result: Result<String, String>) {
        *self.test_result.lock() = Some(result);
    }

    /// Public ids passed to [`ConsoleBackend::invalidate_key`], in order.
    pub fn invalidated_keys(&self) -> Vec<String> {
        self.invalidated.lock().clone()
    }

    /// Accounts passed to [`ConsoleBackend::test_account`], in order.
    pub fn tested_accounts(&self) -> Vec<AccountId> {
        self.tested.lock().clone()
    }

    /// How many times [`ConsoleBackend::accounts_changed`] was called.
    pub fn account_changes(&self) -> u32 {
        *self.account_changes.lock()
    }
}

#[async_trait]
impl ConsoleBackend for StubBackend {
    async fn pool_snapshot(&self) -> Result<PoolSnapshot, String> {
        let snapshot = self.snapshot.lock().clone();
        Ok(snapshot.unwrap_or(PoolSnapshot {
            at: imagegate_dispatch::UnixMillis(0),
            accounts: Vec::new(),
        }))
    }

    async fn test_account(&self, account_id: AccountId) -> Result<String, String> {
        self.tested.lock().push(account_id);
        self.test_result
            .lock()
            .clone()
            .unwrap_or_else(|| Ok("ok".to_owned()))
    }

    fn invalidate_key(&self, public_id: &str) {
        self.invalidated.lock().push(public_id.to_owned());
    }

    async fn accounts_changed(&self) {
        *self.account_changes.lock() += 1;
    }
}
