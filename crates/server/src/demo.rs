//! `imagegate demo`: the gateway with an in-process simulated upstream, a demo user and a key.

use std::net::SocketAddr;
use std::sync::Arc;

use imagegate_store::{
    AccountKind, AccountStatus, AccountTier, AccountUpdate, KeyLimits, NewAccount, NewApiKey, NewUser,
    Secret, Store,
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
    let sim_listener = TcpListener::bind("127.0.0.1:0")
        .await
        .map_err(|source| ServeError::Listen {
            addr: "127.0.0.1:0".to_owned(),
            source,
        })?;
    let sim_addr = sim_listener.local_addr()?;
    #[expect(
        clippy::disallowed_methods,
        reason = "the demo's simulator: stopped by the shutdown token and awaited after the gateway"
    )]
    let sim = tokio::spawn(imagegate_sim::serve(
        sim_listener,
        imagegate_sim::SimConfig::default(),
        shutdown.clone().cancelled_owned(),
    ));
    let (key, password) = prepare(&store, sim_addr).await?;
    let banner = |addr| print_banner(addr, key.expose(), &password);
    let result = crate::serve::run(config, store, shutdown.clone(), banner).await;
    shutdown.cancel();
    let _ = sim.await;
    result
}

/// Makes sure the demo user and the simulated account exist, and issues a fresh key.
async fn prepare(store: &Arc<dyn Store>, sim_addr: SocketAddr) -> Result<(Secret, String), ServeError> {
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
    match store.account_by_name(DEMO_ACCOUNT).await? {
        Some(account) => {
            let update = AccountUpdate {
                base_url: Some(Some(base_url)),
                status: Some((AccountStatus::Active, None)),
                groups: Some(vec![group.id]),
                ..AccountUpdate::default()
            };
            store.update_account(account.id, update).await?;
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
                .await?;
        }
    }
    let created = store
        .create_key(NewApiKey {
            user_id: user.id,
            group_id: group.id,
            name: "demo".to_owned(),
            limits: KeyLimits::default(),
            fallback_ladder: false,
        })
        .await?;
    Ok((created.key, password))
}

fn print_banner(addr: SocketAddr, key: &str, password: &str) {
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

Usage records: imagegate usage list
"#
    ));
}
