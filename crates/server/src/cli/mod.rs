//! Command-line interface: `imagegate serve | demo | users | groups | keys | accounts | usage`.

pub mod admin;
pub mod live;

use std::net::SocketAddr;
use std::path::PathBuf;

use clap::{Args, Parser, Subcommand, ValueEnum};

/// imagegate: an HTTP gateway for gpt-image-2 image generation and editing.
#[derive(Debug, Parser)]
#[command(name = "imagegate", version, about)]
pub struct Cli {
    #[command(flatten)]
    pub global: GlobalArgs,
    #[command(subcommand)]
    pub command: Command,
}

/// Flags every command shares; each is also an `IMAGEGATE_*` variable and a config-file key.
#[derive(Debug, Args, Default, Clone)]
pub struct GlobalArgs {
    /// Configuration file (TOML).
    #[arg(long, global = true, env = "IMAGEGATE_CONFIG")]
    pub config: Option<PathBuf>,
    /// Database URL: `sqlite://FILE` (default: imagegate.db in the data directory) or `postgres://...`.
    #[arg(long, global = true, env = "IMAGEGATE_DATABASE_URL")]
    pub database_url: Option<String>,
    /// Directory for the SQLite database and the master key file.
    #[arg(long, global = true, env = "IMAGEGATE_DATA_DIR")]
    pub data_dir: Option<PathBuf>,
}

#[derive(Debug, Subcommand)]
pub enum Command {
    /// Run the gateway.
    Serve(ServeArgs),
    /// Run the gateway with a built-in simulated upstream, a demo user and a demo key.
    Demo(ServeArgs),
    /// Manage users.
    #[command(subcommand)]
    Users(UsersCommand),
    /// Manage groups of keys and accounts.
    #[command(subcommand)]
    Groups(GroupsCommand),
    /// Manage API keys.
    #[command(subcommand)]
    Keys(KeysCommand),
    /// Manage upstream accounts.
    #[command(subcommand)]
    Accounts(AccountsCommand),
    /// Read usage records, or replay a file of them.
    #[command(subcommand)]
    Usage(UsageCommand),
}

#[derive(Debug, Args, Default, Clone)]
pub struct ServeArgs {
    /// Address to listen on (default 127.0.0.1:8080).
    #[arg(long, env = "IMAGEGATE_LISTEN")]
    pub listen: Option<SocketAddr>,
    /// Redis URL for dispatcher state shared by several replicas.
    #[arg(long, env = "IMAGEGATE_REDIS_URL")]
    pub redis_url: Option<String>,
    /// Prefix of every Redis key (default `imagegate`); replicas of one gateway share it.
    #[arg(long, env = "IMAGEGATE_REDIS_PREFIX")]
    pub redis_prefix: Option<String>,
}

#[derive(Debug, Subcommand)]
pub enum UsersCommand {
    /// Add a user.
    Add {
        name: String,
        /// Give the user access to the admin pages.
        #[arg(long)]
        admin: bool,
        /// Read the console password from stdin (otherwise one is generated and printed once).
        #[arg(long)]
        password_stdin: bool,
    },
    /// List users.
    List {
        #[arg(long)]
        json: bool,
    },
}

#[derive(Debug, Subcommand)]
pub enum GroupsCommand {
    /// Add a group.
    Add { name: String },
    /// List groups, with who may use them.
    List {
        #[arg(long)]
        json: bool,
    },
    /// Open a group to its members and the admins only: other users' keys in it are refused.
    Restrict {
        name: String,
        /// Comma-separated user names that become its members (replacing the old ones).
        #[arg(long, value_delimiter = ',')]
        members: Option<Vec<String>>,
    },
    /// Open a group to every user (its members are kept for a later `restrict`).
    Open { name: String },
}

#[derive(Debug, Subcommand)]
pub enum KeysCommand {
    /// Create a key; prints the key alone on stdout (it is shown only once).
    Create {
        /// Owner of the key.
        #[arg(long)]
        user: String,
        /// Group whose accounts serve the key.
        #[arg(long, default_value = "default")]
        group: String,
        /// A name to recognise the key by.
        #[arg(long, default_value = "cli")]
        name: String,
        /// At most this many requests of this key at once.
        #[arg(long)]
        max_concurrency: Option<u32>,
        /// At most this many requests of this key per minute.
        #[arg(long)]
        rpm: Option<u32>,
        /// Let failing large/high requests step down (reported in `x-imagegate-fallback`).
        #[arg(long)]
        fallback_ladder: bool,
    },
    /// List keys (never the secrets).
    List {
        /// Only this user's keys.
        #[arg(long)]
        user: Option<String>,
        #[arg(long)]
        json: bool,
    },
    /// Disable a key (by id or public id) as an administrator: suspended, its owner cannot
    /// enable it again from the console.
    Disable { key: String },
    /// Enable a key again (by id or public id), whether its owner disabled it or it was suspended.
    Enable { key: String },
    /// Delete a key (by id or public id).
    Delete { key: String },
}

/// Upstream account kinds.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum AccountKindArg {
    Openai,
    Codex,
    Sim,
}

/// Account tiers, best first: pro, team, plus, free.
#[derive(Debug, Clone, Copy, ValueEnum)]
pub enum TierArg {
    Free,
    Plus,
    Team,
    Pro,
}

#[derive(Debug, Args, Clone)]
pub struct AccountFields {
    /// Tier (image requests prefer higher tiers).
    #[arg(long)]
    pub tier: Option<TierArg>,
    /// Priority among accounts of the same tier (higher first).
    #[arg(long)]
    pub priority: Option<i32>,
    /// Concurrent standard-size requests.
    #[arg(long)]
    pub concurrency_standard: Option<u32>,
    /// Concurrent large (above 2560x1440) requests.
    #[arg(long)]
    pub concurrency_large: Option<u32>,
    /// Comma-separated groups the account serves.
    #[arg(long, value_delimiter = ',')]
    pub groups: Option<Vec<String>>,
    /// Base URL (for OpenAI-compatible accounts it ends with /v1).
    #[arg(long)]
    pub base_url: Option<String>,
    /// Read the credential from this environment variable instead of stdin.
    #[arg(long)]
    pub credential_env: Option<String>,
    /// Main models for subscription accounts, in order of preference (comma-separated).
    #[arg(long, value_delimiter = ',')]
    pub main_models: Option<Vec<String>>,
}

#[derive(Debug, Subcommand)]
pub enum AccountsCommand {
    /// Add an account; the credential is read from stdin (or --credential-env).
    Add {
        #[arg(long)]
        name: String,
        #[arg(long, value_enum)]
        kind: AccountKindArg,
        #[command(flatten)]
        fields: AccountFields,
    },
    /// List accounts with their live state.
    List {
        #[arg(long)]
        json: bool,
    },
    /// Change an account; give --credential-env or --credential-stdin to replace the credential.
    Update {
        account: String,
        #[command(flatten)]
        fields: AccountFields,
        /// Read a new credential from stdin.
        #[arg(long)]
        credential_stdin: bool,
        /// Enable or disable the account.
        #[arg(long)]
        active: Option<bool>,
    },
    /// Remove an account.
    Remove { account: String },
    /// Seal every stored credential again under the current master key, each bound to its account:
    /// after a key change (the key being replaced comes from --previous-key-file or
    /// IMAGEGATE_PREVIOUS_MASTER_KEY), or without one to bind credentials sealed by versions before
    /// credentials were bound to their account.
    Rekey {
        /// File holding the key being replaced (e.g. the old master.key moved aside).
        #[arg(long)]
        previous_key_file: Option<PathBuf>,
    },
}

#[derive(Debug, Subcommand)]
pub enum UsageCommand {
    /// List usage records, newest first.
    List {
        #[arg(long)]
        json: bool,
        #[arg(long, default_value_t = 50)]
        limit: u32,
    },
    /// Insert the usage records of JSON Lines files: the `*.rejected` files of the usage spool once
    /// the database's reason for refusing them is fixed, or records copied out of the log, one per
    /// line. Records already stored are not counted twice; the files are left as they are. Exits
    /// with status 1 when a record is refused or a line is not a record.
    Replay {
        /// The files.
        #[arg(required = true)]
        files: Vec<PathBuf>,
    },
}
