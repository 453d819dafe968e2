//! The `imagegate` binary: the HTTP gateway for `gpt-image-2` and its administration commands.
//!
//! `imagegate serve` runs the gateway; `imagegate demo` runs it with a built-in simulated upstream;
//! `imagegate users|groups|keys|accounts|usage ...` administer the database. Run
//! `imagegate --help` for the flags; each is also an `IMAGEGATE_*` environment variable.

mod accounts;
mod cli;
mod completed_usage;
mod config;
mod console;
#[cfg(feature = "redis")]
mod console_logins;
mod console_sessions;
mod control;
mod credentials;
mod demo;
mod fallback;
mod http;
mod http_server;
mod in_flight;
mod metrics;
mod open_files;
mod pool_backend;
mod relay;
mod serve;
mod state;
mod telemetry;
mod upload_disk;
mod usage;

use std::process::ExitCode;

use clap::Parser;

use crate::cli::{Cli, Command, ServeArgs};
use crate::config::Config;

fn main() -> ExitCode {
    let cli = Cli::parse();
    let _telemetry = telemetry::init();
    let runtime = match tokio::runtime::Builder::new_multi_thread().enable_all().build() {
        Ok(runtime) => runtime,
        Err(err) => return fail(&format!("cannot start the runtime: {err}")),
    };
    match runtime.block_on(run(cli)) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => fail(&message),
    }
}

async fn run(cli: Cli) -> Result<(), String> {
    let serve_args = match &cli.command {
        Command::Serve(args) | Command::Demo(args) => args.clone(),
        _ => ServeArgs::default(),
    };
    let config = Config::load(&cli.global, &serve_args).map_err(|e| e.to_string())?;
    match cli.command {
        Command::Serve(_) => {
            let store = serve::open_store(&config).await.map_err(|e| e.to_string())?;
            let shutdown = tokio_util::sync::CancellationToken::new();
            serve::run(config, store, shutdown, |_| {}, std::future::ready(()))
                .await
                .map_err(|e| e.to_string())
        }
        Command::Demo(_) => demo::run(config).await.map_err(|e| e.to_string()),
        command => {
            let store = match &command {
                Command::Accounts(cli::AccountsCommand::Rekey { previous_key_file }) => {
                    let previous =
                        cli::admin::previous_key(previous_key_file.as_deref()).map_err(|e| e.to_string())?;
                    serve::open_store_rotating(&config, previous.as_ref()).await
                }
                _ => serve::open_store(&config).await,
            }
            .map_err(|e| e.to_string())?;
            let result = match command {
                Command::Users(c) => cli::admin::users(&store, c).await,
                Command::Groups(c) => cli::admin::groups(&store, c).await,
                Command::Keys(c) => cli::admin::keys(&store, c).await,
                Command::Accounts(c) => cli::admin::accounts(&store, &config.data_dir, c).await,
                Command::Usage(c) => cli::admin::usage(&store, c).await,
                Command::Serve(_) | Command::Demo(_) => Ok(()),
            };
            store.close().await;
            result.map_err(|e| e.to_string())
        }
    }
}

fn fail(message: &str) -> ExitCode {
    eprintln!("imagegate: {message}");
    ExitCode::FAILURE
}
