//! `imagegate demo`: the gateway with an in-process simulated upstream, a demo user and a key.

use std::net::SocketAddr;
use std::path::Path;
use std::sync::Arc;

use imagegate_store::{
    AccountId, AccountKind, AccountStatus, AccountTier, AccountUpdate, KeyId, KeyLimits, NewAccount,
    NewApiKey, NewUser, Secret, Store, UserId,
};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::config::Config;
use crate::serve::{ServeError, open_store};

const DEMO_USER: &str = "demo";
const DEMO_ACCOUNT: &str = "demo-simulator";
/// The group of the demo key and account.
const DEMO_GROUP: &str = "demo";

pub async fn run(config: Config) -> Result<(), ServeError> {
    let store = open_store(&config).await?;
    let shutdown = CancellationToken::new();
    // The simulator stops after the gateway, which may still be answering from it while it drains.
    let sim_stop = CancellationToken::new();
    let sim_listener = TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|source| ServeError::Listen {
            addr: "127.0.0.1:0".to_owned(),
            source,
        })?;
    let sim_addr = sim_listener.local_addr()?;
    #[expect(
        clippy::disallowed_methods,
        reason = "the demo's simulator: stopped and awaited once the gateway has stopped"
    )]
    let sim = tokio::spawn(imagegate_sim::serve(
        sim_listener,
        imagegate_sim::SimConfig::default(),
        sim_stop.clone().cancelled_owned(),
    ));
    let demo = prepare(&store, sim_addr).await?;
    let data_dir = config.data_dir.clone();
    let banner = |addr| print_banner(addr, &demo, &data_dir);
    // Once the gateway has drained, before it closes the store.
    let retiring = retire(&store, &demo);
    let result = crate::serve::run(config, Arc::clone(&store), shutdown, banner, retiring).await;
    sim_stop.cancel();
    let _ = sim.await;
    result
}

/// What a demo run made usable, and is taken back when it stops.
struct Demo {
    user: UserId,
    key: Secret,
    key_id: KeyId,
    account: AccountId,
    password: String,
}

/// Takes back what the run made usable: the printed password no longer signs in, the printed key
/// is disabled, and the account of the simulator (gone with the demo) leaves the pool. The next
/// demo run makes them anew.
async fn retire(store: &Arc<dyn Store>, demo: &Demo) {
    let password = store.set_user_password_hash(demo.user, None).await;
    let key = store.disable_key(demo.key_id).await.map(|_| ());
    let reason = Some("the demo stopped: its simulator is gone");
    let account = store
        .set_account_status(demo.account, AccountStatus::Disabled, reason)
        .await;
    for result in [password, key, account] {
        if let Err(err) = result {
            tracing::warn!(error = %err, "could not take back what the demo made usable");
        }
    }
}

/// Makes sure the demo user and the simulated account exist, and issues a fresh key.
async fn prepare(store: &Arc<dyn Store>, sim_addr: SocketAddr) -> Result<Demo, ServeError> {
    let user = match store.user_by_name(DEMO_USER).await? {
        Some(user) => user,
        None => {
            let user = NewUser {
                name: DEMO_USER.to_owned(),
                is_admin: true,
                password_hash: None,
            };
            store.create_user(user).await?
        }
    };
    let password = imagegate_console::generate_password();
    let hash = imagegate_console::hash_password(&password).map_err(|e| ServeError::Console(e.to_string()))?;
    store.set_user_password_hash(user.id, Some(&hash)).await?;
    // A group of its own: the demo key reaches only the simulator, never an account of the data
    // directory's other groups (a real one would spend money), and the simulator, gone once the
    // demo stops, serves no other key.
    let group = match store.group_by_name(DEMO_GROUP).await? {
        Some(group) => group,
        None => store.create_group(DEMO_GROUP).await?,
    };
    let base_url = format!("http://{sim_addr}/v1");
    let account = match store.account_by_name(DEMO_ACCOUNT).await? {
        Some(account) => {
            let update = AccountUpdate {
                base_url: Some(Some(base_url)),
                status: Some((AccountStatus::Active, None)),
                groups: Some(vec![group.id]),
                ..AccountUpdate::default()
            };
            store.update_account(account.id, update).await?.id
        }
        None => {
            store
                .create_account(NewAccount {
                    name: DEMO_ACCOUNT.to_owned(),
                    kind: AccountKind::Sim,
                    base_url: Some(base_url),
                    tier: AccountTier::Pro,
                    priority: 0,
                    concurrency_standard: 8,
                    concurrency_large: 2,
                    groups: vec![group.id],
                    main_model: None,
                    fallback_models: Vec::new(),
                    credential: Some(Secret::new("sim-demo-credential")),
                })
                .await?
                .id
        }
    };
    let created = store
        .create_key(NewApiKey {
            user_id: user.id,
            group_id: group.id,
            name: "demo".to_owned(),
            limits: KeyLimits::default(),
            fallback_ladder: false,
        })
        .await?;
    Ok(Demo {
        user: user.id,
        key: created.key,
        key_id: created.record.id,
        account,
        password,
    })
}

fn print_banner(addr: SocketAddr, demo: &Demo, data_dir: &Path) {
    let (key, password) = (demo.key.expose(), &demo.password);
    let data_dir = data_dir.display();
    let base = format!("http://{addr}/v1");
    let console = format!("http://{addr}/login");
    crate::serve::announce(&format!(
        r#"
imagegate demo: every image comes from the built-in simulator (it says SIMULATED on it).

  API key   {key}
  Base URL  {base}
  Console   {console}  (user {DEMO_USER}, password {password})

Try it with curl:

  curl -s {base}/images/generations \
    -H "Authorization: Bearer {key}" -H "Content-Type: application/json" \
    -d '{{"model":"gpt-image-2","prompt":"a lighthouse at dusk","size":"1024x1024","quality":"low"}}' \
    | python3 -c 'import base64,json,sys; open("out.png","wb").write(base64.b64decode(json.load(sys.stdin)["data"][0]["b64_json"]))'

or with the official Python SDK (pip install openai):

  import base64
  from openai import OpenAI
  client = OpenAI(base_url="{base}", api_key="{key}")
  result = client.images.generate(model="gpt-image-2", prompt="a lighthouse at dusk", size="1024x1024")
  open("out.png", "wb").write(base64.b64decode(result.data[0].b64_json))

Usage records, from another terminal in the checkout:

  cargo run --release -p imagegate -- --data-dir '{data_dir}' usage list

The key and the password work until the demo stops (Ctrl-C).
"#
    ));
}
