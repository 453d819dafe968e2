//! `imagegate-sim --listen ADDR`: runs the simulated upstream. The first line on stdout is
//! `listening on http://ADDR` (with the real port when ADDR ends in `:0`).

use std::io::Write as _;
use std::net::SocketAddr;
use std::pin::pin;
use std::time::Duration;

use clap::Parser;
use imagegate_domain::ModelCatalog;
use imagegate_sim::{FaultKind, SimConfig};

/// How long open requests may take to finish after SIGTERM/SIGINT.
const SHUTDOWN_GRACE: Duration = Duration::from_secs(5);

/// Simulated OpenAI Images and Responses upstream (images say SIMULATED).
#[derive(Debug, Parser)]
#[command(name = "imagegate-sim", version)]
struct Cli {
    /// Address to listen on; port 0 picks a free port.
    #[arg(long, env = "IMAGEGATE_SIM_LISTEN", default_value = "127.0.0.1:8090")]
    listen: SocketAddr,
    /// Time every generation takes, in milliseconds (streams spread it over their events).
    #[arg(long, env = "IMAGEGATE_SIM_LATENCY_MS", default_value_t = 0)]
    latency_ms: u64,
    /// Probability (0.0-1.0) that an image request gets a random fault.
    #[arg(long, env = "IMAGEGATE_SIM_FAULT_RATE", default_value_t = 0.0)]
    fault_rate: f64,
    /// Faults drawn by --fault-rate, comma-separated (e.g. 500,502,rate_limit,stall).
    #[arg(
        long,
        env = "IMAGEGATE_SIM_FAULTS",
        value_delimiter = ',',
        default_value = "500"
    )]
    faults: Vec<FaultKind>,
    /// How long a stall lasts, in milliseconds.
    #[arg(long, env = "IMAGEGATE_SIM_STALL_MS", default_value_t = 600_000)]
    stall_ms: u64,
    /// `resets_in_seconds` of a usage-limit fault.
    #[arg(long, env = "IMAGEGATE_SIM_USAGE_RESET_SECONDS", default_value_t = 3600)]
    usage_reset_seconds: u64,
    /// `retry-after` of a rate-limit or 503 fault, in seconds.
    #[arg(long, env = "IMAGEGATE_SIM_RETRY_AFTER_SECONDS", default_value_t = 20)]
    retry_after_seconds: u64,
    /// Budget of the encoded-image cache, in MiB.
    #[arg(long, env = "IMAGEGATE_SIM_CACHE_MB", default_value_t = 256)]
    cache_mb: usize,
    /// Seed of the random faults.
    #[arg(long, env = "IMAGEGATE_SIM_SEED", default_value_t = SimConfig::default().seed)]
    seed: u64,
    /// Accepted image model ids (repeat or comma-separate); default gpt-image-2 and its snapshot.
    #[arg(long = "model", env = "IMAGEGATE_SIM_MODELS", value_delimiter = ',')]
    models: Vec<String>,
    /// Refresh tokens POST /oauth/token accepts (once each; repeat or comma-separate).
    #[arg(
        long = "refresh-token",
        env = "IMAGEGATE_SIM_REFRESH_TOKENS",
        value_delimiter = ','
    )]
    refresh_tokens: Vec<String>,
    /// `expires_in` of the access tokens POST /oauth/token issues, in seconds.
    #[arg(long, env = "IMAGEGATE_SIM_ACCESS_TOKEN_TTL_SECS", default_value_t = 3600)]
    access_token_ttl_secs: u64,
    /// Send 1x1 images whatever the requested size (tiny responses, for profiling the gateway).
    #[arg(long, env = "IMAGEGATE_SIM_TINY_IMAGES")]
    tiny_images: bool,
}

impl Cli {
    fn config(&self) -> SimConfig {
        let catalog = if self.models.is_empty() {
            ModelCatalog::default()
        } else {
            ModelCatalog::new(self.models.iter().cloned(), Default::default())
        };
        SimConfig {
            latency: Duration::from_millis(self.latency_ms),
            fault_rate: self.fault_rate,
            random_faults: self.faults.clone(),
            stall: Duration::from_millis(self.stall_ms),
            usage_reset_seconds: self.usage_reset_seconds,
            retry_after_seconds: self.retry_after_seconds,
            cache_bytes: self.cache_mb.saturating_mul(1024 * 1024),
            seed: self.seed,
            catalog,
            refresh_tokens: self.refresh_tokens.clone(),
            access_token_ttl: Duration::from_secs(self.access_token_ttl_secs),
            tiny_images: self.tiny_images,
        }
    }
}

#[tokio::main]
async fn main() -> std::process::ExitCode {
    tracing_subscriber::fmt()
        .with_env_filter(
            tracing_subscriber::EnvFilter::try_from_default_env()
                .unwrap_or_else(|_| tracing_subscriber::EnvFilter::new("warn")),
        )
        .with_writer(std::io::stderr)
        .init();
    let cli = Cli::parse();
    match run(cli).await {
        Ok(()) => std::process::ExitCode::SUCCESS,
        Err(error) => {
            tracing::error!(%error, "imagegate-sim failed");
            std::process::ExitCode::FAILURE
        }
    }
}

async fn run(cli: Cli) -> std::io::Result<()> {
    let listener = tokio::net::TcpListener::bind(cli.listen).await?;
    let address = listener.local_addr()?;
    let mut stdout = std::io::stdout().lock();
    writeln!(stdout, "listening on http://{address}")?;
    stdout.flush()?;
    drop(stdout);
    let (stop, stopped) = tokio::sync::oneshot::channel::<()>();
    let mut server = pin!(imagegate_sim::serve(listener, cli.config(), async move {
        let _ = stopped.await;
    }));
    tokio::select! {
        result = &mut server => return result,
        () = shutdown_signal() => {}
    }
    tracing::info!("shutting down");
    let _ = stop.send(());
    match tokio::time::timeout(SHUTDOWN_GRACE, server).await {
        Ok(result) => result,
        Err(_) => {
            tracing::warn!("requests still open after the grace period; exiting");
            Ok(())
        }
    }
}

async fn shutdown_signal() {
    #[cfg(unix)]
    {
        use tokio::signal::unix::{SignalKind, signal};
        match signal(SignalKind::terminate()) {
            Ok(mut terminate) => {
                tokio::select! {
                    _ = terminate.recv() => {}
                    _ = tokio::signal::ctrl_c() => {}
                }
            }
            Err(_) => {
                let _ = tokio::signal::ctrl_c().await;
            }
        }
    }
    #[cfg(not(unix))]
    {
        let _ = tokio::signal::ctrl_c().await;
    }
}
