//! Serves the console alone, over a temporary SQLite database filled with demo data, to work on
//! templates and styles without the gateway:
//!
//! ```text
//! cargo run -p imagegate-console --example preview [ADDR]    # default 127.0.0.1:8090
//! ```
//!
//! Sign in as `root` / `preview-password` (admin) or `alice` / `preview-password`. The live pool
//! state on the accounts page is made up; the test button always passes.

#![allow(clippy::unwrap_used, clippy::expect_used, clippy::print_stderr)]

use std::net::SocketAddr;
use std::sync::Arc;

use imagegate_console::{ConsoleConfig, ConsoleState, StubBackend, hash_password, router};
use imagegate_dispatch::{
    AccountSnapshot, AccountStatus as PoolStatus, ClassCounts, ClassLimits, CooldownKind, CooldownView,
    LastError, LimitScope, PoolSnapshot, Tier, UnixMillis,
};
use imagegate_store::{
    AccountKind, AccountTier, KeyLimits, MasterKey, NewAccount, NewApiKey, NewUser, Secret, Store, Timestamp,
    UsageRecord, connect,
};

const PASSWORD: &str = "preview-password";

async fn fill(store: &Arc<dyn Store>, backend: &StubBackend) {
    let hash = hash_password(PASSWORD).unwrap();
    let root = NewUser {
        name: "root".into(),
        is_admin: true,
        password_hash: Some(hash.clone()),
    };
    let root = store.create_user(root).await.unwrap();
    let alice = NewUser {
        name: "alice".into(),
        is_admin: false,
        password_hash: Some(hash),
    };
    let alice = store.create_user(alice).await.unwrap();
    store
        .create_user(NewUser {
            name: "batch-jobs".into(),
            ..NewUser::default()
        })
        .await
        .unwrap();
    let default = store.default_group().await.unwrap();
    let vip = store.create_group("vip").await.unwrap();

    let mut snapshots = Vec::new();
    let now_ms = u64::try_from(Timestamp::now().unix_ms()).unwrap();
    let accounts = [
        ("pro-main", AccountTier::Pro, Tier::Pro, 8, 2, (5, 1), None, None),
        (
            "team-backup",
            AccountTier::Team,
            Tier::Team,
            4,
            1,
            (0, 0),
            Some("429 from upstream, window resets"),
            None,
        ),
        (
            "plus-spare",
            AccountTier::Plus,
            Tier::Plus,
            2,
            1,
            (1, 0),
            None,
            Some("upstream 502 bad gateway"),
        ),
    ];
    for (name, tier, pool_tier, standard, large, in_flight, cooldown, error) in accounts {
        let mut account = NewAccount::new(name, AccountKind::Openai);
        account.tier = tier;
        account.concurrency_standard = standard;
        account.concurrency_large = large;
        account.groups = vec![default.id, vip.id];
        account.credential = Some(Secret::new("sk-preview-not-a-real-key"));
        let account = store.create_account(account).await.unwrap();
        snapshots.push(AccountSnapshot {
            id: imagegate_dispatch::AccountId::new(&account.id.to_string()),
            groups: vec![],
            tier: pool_tier,
            priority: 0,
            active: true,
            in_flight: ClassCounts {
                standard: in_flight.0,
                large: in_flight.1,
            },
            limits: ClassLimits { standard, large },
            status: PoolStatus::Ok,
            cooldowns: cooldown
                .map(|reason| CooldownView {
                    scope: LimitScope::ImagesOnly,
                    until: UnixMillis(now_ms + 25 * 60_000),
                    kind: CooldownKind::RateLimited,
                    reason: reason.into(),
                })
                .into_iter()
                .collect(),
            successes: 420 + u64::from(standard) * 13,
            failures: 3,
            last_error: error.map(|message| LastError {
                at: UnixMillis(now_ms - 600_000),
                message: message.into(),
            }),
        });
    }
    backend.set_snapshot(PoolSnapshot {
        at: UnixMillis(now_ms),
        accounts: snapshots,
    });
    backend.set_test_result(Ok("1024x1024 png in 8.2 s".into()));

    let mut keys = Vec::new();
    for (user, name) in [(alice.id, "laptop"), (alice.id, "ci-pipeline"), (root.id, "ops")] {
        let key = NewApiKey {
            user_id: user,
            group_id: default.id,
            name: name.into(),
            limits: KeyLimits::default(),
            fallback_ladder: false,
        };
        keys.push(store.create_key(key).await.unwrap().record);
    }
    let account_ids: Vec<_> = store
        .list_accounts()
        .await
        .unwrap()
        .into_iter()
        .map(|a| a.id)
        .collect();
    let now = Timestamp::now();
    let mut records = Vec::new();
    for i in 0..240_u32 {
        let key = &keys[(i % 3) as usize];
        let mut r = UsageRecord::new(
            format!("req-preview-{i}"),
            "/v1/images/generations",
            "gpt-image-2",
        );
        let age_hours = i64::from((i * 7919) % (29 * 24));
        r.created_at = Timestamp::from_unix_ms(now.unix_ms() - age_hours * 3_600_000 - i64::from(i) * 1000);
        r.user_id = Some(key.user_id);
        r.key_id = Some(key.id);
        r.group_id = Some(default.id);
        r.account_id = Some(account_ids[(i % 3) as usize]);
        let large = i % 5 == 0;
        let size = if large { "1536x1024" } else { "1024x1024" };
        r.size_requested = Some(size.into());
        r.size_produced = Some(size.into());
        r.quality_produced = Some(["low", "medium", "high"][(i % 3) as usize].into());
        r.output_format = Some("png".into());
        r.n = 1 + i % 2;
        r.images = r.n;
        r.tokens.input = 40 + u64::from(i % 17);
        r.tokens.output = u64::from(r.images) * if large { 1_560 } else { 1_056 };
        r.tokens.total = r.tokens.input + r.tokens.output;
        r.latency_ms = 6_000 + u64::from((i * 3571) % 9000);
        if i % 23 == 0 {
            r.status = 429;
            r.images = 0;
            r.tokens = Default::default();
            r.error_code = Some("usage_limit_reached".into());
        }
        records.push(r);
    }
    store.insert_usage_batch(&records).await.unwrap();
}

#[tokio::main]
async fn main() {
    let addr: SocketAddr = std::env::args()
        .nth(1)
        .unwrap_or_else(|| "127.0.0.1:8090".into())
        .parse()
        .unwrap();
    let dir = tempfile::tempdir().unwrap();
    let master_key = MasterKey::load_or_create(dir.path(), None).unwrap();
    let url = format!("sqlite://{}?mode=rwc", dir.path().join("preview.db").display());
    let store = connect(&url, &master_key).await.unwrap();
    let backend = Arc::new(StubBackend::default());
    fill(&store, &backend).await;
    let state = ConsoleState::new(store, backend, ConsoleConfig::default());
    let listener = tokio::net::TcpListener::bind(addr).await.unwrap();
    eprintln!(
        "console preview on http://{} (root / {PASSWORD}, alice / {PASSWORD})",
        listener.local_addr().unwrap()
    );
    axum::serve(
        listener,
        router(state).into_make_service_with_connect_info::<SocketAddr>(),
    )
    .await
    .unwrap();
}
