//! Starting and stopping the gateway.

use std::path::PathBuf;
use std::sync::Arc;
use std::time::Duration;

use imagegate_dispatch::{Dispatcher, KeyGate, SystemClock};
use imagegate_store::{KeyCache, KeySource, MasterKey, Store, UsageSpool, UsageWriter, UsageWriterConfig};
use tokio::net::TcpListener;
use tokio_util::sync::CancellationToken;

use crate::accounts::AccountDirectory;
use crate::config::Config;
use crate::credentials::StoreCredentials;
use crate::pool_backend::{BackendError, PoolBackend};
use crate::state::AppState;

/// Why the gateway could not start.
#[derive(Debug, thiserror::Error)]
pub enum ServeError {
    #[error("data directory {path}: {source}")]
    DataDir { path: String, source: std::io::Error },
    #[error("master key: {0}")]
    MasterKey(#[from] imagegate_store::CryptoError),
    #[error(
        "no master key: the database holds credentials sealed with one, but {data_dir} has no master.key \
         and IMAGEGATE_MASTER_KEY is not set; give this process the deployment's key (the variable, or \
         its master.key file copied into {data_dir}); to change keys, run `imagegate accounts rekey \
         --previous-key-file <the key being replaced>`"
    )]
    MasterKeyMissing { data_dir: String },
    #[error("database: {0}")]
    Store(#[from] imagegate_store::StoreError),
    #[error("cannot listen on {addr}: {source}")]
    Listen { addr: String, source: std::io::Error },
    #[error("console: {0}")]
    Console(String),
    #[error("upstream client: {0}")]
    Upstream(String),
    #[error("pool state: {0}")]
    PoolBackend(#[from] BackendError),
    #[error("server: {0}")]
    Io(#[from] std::io::Error),
    #[error("{0}")]
    Spool(#[from] imagegate_store::SpoolError),
}

/// How often accounts are re-read from the store (changes made by the CLI or another replica).
const ACCOUNT_REFRESH: Duration = Duration::from_secs(5);
/// How long an authenticated key stays cached: a key disabled or deleted on another replica (or
/// with the CLI) stops here within this time, well inside the 2 s the operations guide promises.
const KEY_CACHE_TTL: Duration = Duration::from_secs(1);
/// How long abandoned requests get to submit their usage records before the writer closes.
const ABANDON_WAIT: Duration = Duration::from_secs(5);

/// Opens the data directory and the database (applying migrations). During a master key rotation
/// (`IMAGEGATE_PREVIOUS_MASTER_KEY` set) credentials sealed under the previous key stay readable.
pub async fn open_store(config: &Config) -> Result<Arc<dyn Store>, ServeError> {
    open(config, MasterKey::previous_from_env()?.as_ref(), Rekeying::No).await
}

/// [`open_store`] for `accounts rekey`, with the key being replaced given: the one command that
/// may make up the new master key while the database holds credentials sealed under `previous`.
pub async fn open_store_rotating(
    config: &Config,
    previous: Option<&MasterKey>,
) -> Result<Arc<dyn Store>, ServeError> {
    open(config, previous, Rekeying::Yes).await
}

/// Whether the store is opened to move its credentials to a new master key.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Rekeying {
    Yes,
    No,
}

async fn open(
    config: &Config,
    previous: Option<&MasterKey>,
    rekeying: Rekeying,
) -> Result<Arc<dyn Store>, ServeError> {
    create_private_dir(&config.data_dir).map_err(|source| ServeError::DataDir {
        path: config.data_dir.display().to_string(),
        source,
    })?;
    let (master_key, source) = MasterKey::load_or_create_from_env_reporting(&config.data_dir)?;
    let opened = connect_checking_key(config, &master_key, &source, previous, rekeying).await;
    // A key made up for a database this process could not check is not left behind either: the
    // next start would take it for the deployment's.
    if let (Err(_), KeySource::Created(path)) = (&opened, &source)
        && let Err(err) = std::fs::remove_file(path)
    {
        tracing::warn!(error = %err, path = %path.display(), "could not remove the new master key file");
    }
    opened
}

/// The store, unless `master_key` was just made up (`source`) while the database holds sealed
/// credentials: such a key cannot open them (a replica or an admin command run without the
/// deployment's key), and it must not seal new ones the other replicas cannot open. Rotating
/// (`accounts rekey`) brings the `previous` key and moves every credential to the new one; any
/// other command, even with `IMAGEGATE_PREVIOUS_MASTER_KEY` set (a replica during a rotation
/// whose new key is missing), would seal what it writes under a key only its own data directory
/// holds.
async fn connect_checking_key(
    config: &Config,
    master_key: &MasterKey,
    source: &KeySource,
    previous: Option<&MasterKey>,
    rekeying: Rekeying,
) -> Result<Arc<dyn Store>, ServeError> {
    let store = imagegate_store::connect_with_previous(&config.database_url, master_key, previous).await?;
    let rotating = rekeying == Rekeying::Yes && previous.is_some();
    if !matches!(source, KeySource::Created(_)) || rotating {
        return Ok(store);
    }
    let sealed = match store.list_accounts().await {
        Ok(accounts) => accounts.iter().any(|a| a.has_credential),
        Err(err) => {
            store.close().await;
            return Err(err.into());
        }
    };
    if sealed {
        store.close().await;
        return Err(ServeError::MasterKeyMissing {
            data_dir: config.data_dir.display().to_string(),
        });
    }
    Ok(store)
}

/// Creates the data directory (and its missing parents) readable by this user only: it holds the
/// SQLite database (console password hashes, usage, sealed credentials), the usage spool and the
/// master key. A directory that exists is left as it is.
#[cfg(unix)]
fn create_private_dir(dir: &std::path::Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)
}

#[cfg(not(unix))]
fn create_private_dir(dir: &std::path::Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)
}

/// Serves until `shutdown` resolves or a SIGINT/SIGTERM arrives, then drains in-flight requests
/// (bounded by the configured grace) and flushes usage records.
/// `on_ready` is called with the bound address once the gateway accepts connections;
/// `before_close` runs once the usage records are flushed, before the store closes.
pub async fn run(
    config: Config,
    store: Arc<dyn Store>,
    shutdown: CancellationToken,
    on_ready: impl FnOnce(std::net::SocketAddr),
    before_close: impl Future<Output = ()>,
) -> Result<(), ServeError> {
    crate::open_files::raise();
    let clock = Arc::new(SystemClock);
    let dispatch_config = config.dispatch_config();
    let backend = PoolBackend::build(&config)?;
    let master_key = MasterKey::load_or_create_from_env(&config.data_dir)?;
    let previous = MasterKey::previous_from_env()?;
    let console_sessions = crate::console_sessions::build(&config, &master_key, previous.as_ref())?;
    drop((master_key, previous));
    #[cfg(feature = "redis")]
    let console_logins = crate::console_logins::build(&config)?;
    #[cfg(not(feature = "redis"))]
    let console_logins = None;
    let dispatcher = Arc::new(Dispatcher::new(
        backend.state.clone(),
        clock.clone(),
        dispatch_config,
    ));
    let key_gate = KeyGate::new(backend.key_limiter.clone(), clock);
    let accounts = AccountDirectory::new(store.clone(), dispatcher.clone());
    let count = accounts.refresh().await?;
    tracing::info!(accounts = count, "upstream accounts loaded");
    // Usage records the database cannot take wait on disk here (see docs: Degraded modes).
    let spool = UsageSpool::open(&config.data_dir.join("usage-spool"))?;
    let (usage, writer) = UsageWriter::spawn_spooled(store.clone(), UsageWriterConfig::default(), spool);
    let upstream_config = imagegate_upstream::UpstreamConfig {
        codex: config.codex.upstream(),
        ..imagegate_upstream::UpstreamConfig::default()
    };
    let upstream = imagegate_upstream::HttpUpstream::new(upstream_config)
        .map_err(|e| ServeError::Upstream(e.to_string()))?
        .with_credential_store(Arc::new(StoreCredentials::new(store.clone())));
    let upload_disk = crate::upload_disk::budget(config.uploads.disk_budget_mb, &std::env::temp_dir());
    let metrics = crate::metrics::Metrics::new(
        config
            .models
            .accepted
            .iter()
            .chain(config.models.aliases.keys())
            .chain(&config.models.agent_models)
            .cloned(),
    )
    .with_upload_disk(upload_disk.clone());
    let state = Arc::new(AppState {
        metrics: Arc::new(metrics),
        catalog: config.catalog(),
        keys: KeyCache::new(store.clone(), KEY_CACHE_TTL),
        store: store.clone(),
        dispatcher,
        key_gate,
        pool_backend: backend,
        upstream: Arc::new(upstream),
        accounts,
        usage,
        internal_token: crate::control::new_token(),
        in_flight: crate::in_flight::InFlight::default(),
        console_sessions,
        console_logins,
        upload_disk,
        config: config.clone(),
    });

    let listener = TcpListener::bind(config.listen)
        .await
        .map_err(|source| ServeError::Listen {
            addr: config.listen.to_string(),
            source,
        })?;
    let local = listener.local_addr()?;
    // Listened for before the gateway says it is up: a SIGTERM that follows the announcement at
    // once (a supervisor, a test) must drain the gateway, not kill it.
    let signals = ShutdownSignals::install();
    announce(&format!("imagegate listening on http://{local}"));
    tracing::info!(%local, "listening");
    if let Err(err) = crate::control::write(&config.data_dir, local, &state.internal_token) {
        tracing::warn!(error = %err, "could not write the control file; `accounts list` will not show live state");
    }
    on_ready(local);

    #[expect(
        clippy::disallowed_methods,
        reason = "ends on the shutdown token; awaited before the usage writer is shut down"
    )]
    let refresher = tokio::spawn(refresh_accounts(state.clone(), shutdown.clone()));
    spawn_signal_listener(signals, shutdown.clone(), config.data_dir.clone());
    let app = crate::http::router(state.clone());
    let server = crate::http_server::serve(listener, app, config.timeouts.client_idle(), shutdown.clone());
    let grace = config.timeouts.shutdown_grace();
    let grace_over = async {
        shutdown.cancelled().await;
        tokio::time::sleep(grace).await;
    };
    tokio::pin!(grace_over);
    let connections_closed = tokio::select! {
        () = server => true,
        () = &mut grace_over => {
            tracing::warn!("shutdown grace period over; closing remaining connections");
            false
        }
    };
    shutdown.cancel();
    if connections_closed {
        // Requests whose clients left are still being read for the usage their upstream calls
        // bill, with no connection of their own: they get what is left of the grace period.
        tokio::select! {
            () = state.in_flight.settled() => {}
            () = &mut grace_over => tracing::warn!(
                "shutdown grace period over; abandoning the answers still read for their usage"
            ),
        }
    }
    // Whatever still runs is abandoned now, and records itself before the writer closes.
    if !state.in_flight.abandon(ABANDON_WAIT).await {
        tracing::warn!("some requests did not end in time after being abandoned; their usage may be lost");
    }
    crate::control::remove(&config.data_dir);
    let _ = refresher.await;
    drop(state);
    match writer.shutdown().await {
        Ok(stats) => tracing::info!(written = stats.written, "usage records flushed"),
        Err(imagegate_store::WriterError::Unflushed { records, last_error }) => {
            // Neither the database nor the spool took them: the log is the last place they can go
            // (a record holds ids, counts and times, no secret and no image).
            tracing::error!(error = %last_error, records = records.len(), "usage records could not all be written");
            for record in &records {
                match serde_json::to_string(record) {
                    Ok(json) => tracing::error!(record = %json, "unwritten usage record"),
                    Err(_) => tracing::error!(request_id = %record.request_id, "unwritten usage record"),
                }
            }
        }
        Err(err) => tracing::error!(error = %err, "usage records could not all be written"),
    }
    before_close.await;
    store.close().await;
    Ok(())
}

/// Re-reads the accounts every [`ACCOUNT_REFRESH`] until the shutdown begins. A refresh under way
/// then is dropped (the next process reads the accounts afresh): against a database that stopped
/// answering it would wait out the pool's acquire timeout, and the usage writer, shut down after
/// this task ends, must not start that much later.
async fn refresh_accounts(state: Arc<AppState>, shutdown: CancellationToken) {
    let mut tick = tokio::time::interval(ACCOUNT_REFRESH);
    tick.set_missed_tick_behavior(tokio::time::MissedTickBehavior::Delay);
    loop {
        tokio::select! {
            () = shutdown.cancelled() => return,
            _ = tick.tick() => {}
        }
        tokio::select! {
            () = shutdown.cancelled() => return,
            refreshed = state.accounts.refresh() => {
                if let Err(err) = refreshed {
                    tracing::warn!(error = %err, "could not refresh upstream accounts");
                }
            }
        }
    }
}

/// Cancels `shutdown` on SIGINT or SIGTERM; a second one, while the gateway drains, ends the
/// process at once (an operator who presses Ctrl-C again does not want to wait out the grace).
fn spawn_signal_listener(mut signals: ShutdownSignals, shutdown: CancellationToken, data_dir: PathBuf) {
    #[expect(
        clippy::disallowed_methods,
        reason = "it cancels the shutdown token, then waits for a second signal until the process ends"
    )]
    tokio::spawn(async move {
        tokio::select! {
            _ = signals.received() => {
                tracing::info!("shutdown signal received; draining (send another to stop at once)");
                shutdown.cancel();
            }
            () = shutdown.cancelled() => {}
        }
        let code = signals.received().await;
        tracing::warn!(
            "second shutdown signal received; stopping without waiting for the requests in flight \
             (their usage records, and those not yet written, are lost)"
        );
        crate::control::remove(&data_dir);
        std::process::exit(code);
    });
}

/// SIGINT and SIGTERM, caught from the moment [`ShutdownSignals::install`] returns (a signal that
/// arrives before anyone waits on them is kept, not lost).
struct ShutdownSignals {
    #[cfg(unix)]
    interrupt: Option<tokio::signal::unix::Signal>,
    #[cfg(unix)]
    terminate: Option<tokio::signal::unix::Signal>,
}

impl ShutdownSignals {
    fn install() -> Self {
        #[cfg(unix)]
        {
            use tokio::signal::unix::{SignalKind, signal};
            let listen = |kind: SignalKind, name: &str| match signal(kind) {
                Ok(stream) => Some(stream),
                Err(err) => {
                    tracing::warn!(error = %err, signal = name, "cannot listen for a shutdown signal");
                    None
                }
            };
            Self {
                interrupt: listen(SignalKind::interrupt(), "SIGINT"),
                terminate: listen(SignalKind::terminate(), "SIGTERM"),
            }
        }
        #[cfg(not(unix))]
        Self {}
    }

    /// Completes when either signal arrives next, with the exit status a process killed by it
    /// reports (128 + the signal's number).
    async fn received(&mut self) -> i32 {
        #[cfg(unix)]
        {
            async fn next(stream: Option<&mut tokio::signal::unix::Signal>) {
                match stream {
                    Some(stream) => {
                        stream.recv().await;
                    }
                    None => std::future::pending::<()>().await,
                }
            }
            tokio::select! {
                () = next(self.interrupt.as_mut()) => 130,
                () = next(self.terminate.as_mut()) => 143,
            }
        }
        #[cfg(not(unix))]
        {
            let _ = tokio::signal::ctrl_c().await;
            130
        }
    }
}

/// Writes a line to stdout for whoever started the gateway. A closed stdout (the reader went away)
/// must not take the gateway down, so write errors are ignored rather than panicking like `println!`.
pub fn announce(text: &str) {
    use std::io::Write;
    let mut out = std::io::stdout().lock();
    let _ = writeln!(out, "{text}");
    let _ = out.flush();
}
