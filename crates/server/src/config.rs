//! Configuration: defaults < config file (TOML) < `IMAGEGATE_*` environment < flags.

use std::collections::BTreeMap;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};
use std::time::Duration;

use serde::Deserialize;

use crate::cli::{GlobalArgs, ServeArgs};

/// Why the configuration could not be loaded.
#[derive(Debug, thiserror::Error)]
pub enum ConfigError {
    #[error("cannot read config file {path}: {source}")]
    Read { path: PathBuf, source: std::io::Error },
    #[error("config file {path}: {source}")]
    Parse { path: PathBuf, source: toml::de::Error },
    #[error("invalid listen address {0:?}")]
    Listen(String),
    #[error("[console] trusted_proxies: {0:?} is neither an address nor a network (10.0.0.0/8)")]
    TrustedProxy(String),
    #[error("[console] base_url: {0:?} is not an http:// or https:// URL")]
    BaseUrl(String),
    #[error("{name} = {value}: at most {MAX_SECS} (one week)")]
    TooLong { name: &'static str, value: u64 },
    #[error(
        "{name} = 0: a request needs at least 1 s (0 does not mean no limit; every request would time out)"
    )]
    ZeroRequestTimeout { name: &'static str },
    #[error(
        "[timeouts] json_keepalive_secs = {0}: at most {MAX_JSON_KEEPALIVE_SECS}; a longer interval outlasts the proxy timeouts it is for"
    )]
    JsonKeepaliveTooLong(u64),
}

/// The longest interval of the keepalive of non-streaming answers, in the configuration and in a
/// request's header: proxies cut quiet connections after 60 to 120 s.
pub const MAX_JSON_KEEPALIVE_SECS: u64 = 600;

/// The longest time any `*_secs` setting may give: one week. Larger values mean nothing useful, and
/// near `u64::MAX` adding them to the clock overflows.
pub const MAX_SECS: u64 = 7 * 24 * 60 * 60;

/// The configuration file, every key optional.
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FileConfig {
    pub listen: Option<String>,
    pub database_url: Option<String>,
    pub data_dir: Option<PathBuf>,
    pub redis_url: Option<String>,
    /// Prefix of every Redis key (default `imagegate`): replicas of one gateway share it, other
    /// gateways or tenants on the same Redis use another.
    pub redis_prefix: Option<String>,
    pub timeouts: TimeoutConfig,
    pub models: ModelsConfig,
    pub failover: FailoverConfig,
    /// `[dispatch]`: leases on upstream accounts.
    pub dispatch: DispatchFileConfig,
    /// User agents (substring match, case-insensitive) of official agent clients that get the
    /// `image_generation` tool injected into `/v1/responses` when they did not send it.
    pub agent_user_agents: Vec<String>,
    /// `[codex]`: the OAuth refresh of subscription accounts' access tokens.
    pub codex: CodexConfig,
    /// `[console]`: the web console.
    pub console: ConsoleFileConfig,
    /// `[uploads]`: edit uploads kept on disk.
    pub uploads: UploadsConfig,
}

/// `[uploads]`: the files of edits in flight, kept on disk (in `TMPDIR`) past 256 KiB each.
#[derive(Debug, Clone, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct UploadsConfig {
    /// Most megabytes (MiB) all uploads in flight keep on disk at once; an upload that would pass
    /// it is answered 503 (the SDKs retry). Default: half the space free in the temporary
    /// directory's file system when the gateway starts.
    pub disk_budget_mb: Option<u64>,
}

/// `[console]`: the web console behind a load balancer or TLS terminator.
#[derive(Debug, Default, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ConsoleFileConfig {
    /// The public base URL (`https://images.example.com`) shown in the snippets; an `https` one
    /// also marks the session cookie `Secure`. Default: each request's `Host`.
    pub base_url: Option<String>,
    /// Always mark the session cookie `Secure`.
    pub secure_cookies: bool,
    /// Addresses or networks of the proxies in front (`["10.0.0.0/8"]`) whose
    /// `X-Forwarded-For` names the client, whose address the sign-in limit counts. Default: none,
    /// so the header is ignored and the client is the connection's peer.
    pub trusted_proxies: Vec<String>,
}

impl ConsoleFileConfig {
    fn resolve(self) -> Result<imagegate_console::ConsoleConfig, ConfigError> {
        let trusted_proxies = self
            .trusted_proxies
            .iter()
            .map(|text| parse_network(text).ok_or_else(|| ConfigError::TrustedProxy(text.clone())))
            .collect::<Result<_, _>>()?;
        let base_url_hint = self.base_url.map(|url| normalize_base_url(&url)).transpose()?;
        Ok(imagegate_console::ConsoleConfig {
            base_url_hint,
            secure_cookies: self.secure_cookies,
            trusted_proxies,
            ..imagegate_console::ConsoleConfig::default()
        })
    }
}

/// A network (`10.0.0.0/8`, `fd00::/8`) or a single address (`10.0.0.5`), with its host bits
/// cleared; an IPv4-mapped IPv6 one (`::ffff:10.0.0.0/104`) as the IPv4 network it maps, since
/// the console compares addresses in that form.
fn parse_network(text: &str) -> Option<ipnet::IpNet> {
    let text = text.trim();
    let net: ipnet::IpNet = text
        .parse()
        .ok()
        .or_else(|| text.parse::<std::net::IpAddr>().ok().map(ipnet::IpNet::from))?;
    let net = match net {
        ipnet::IpNet::V6(v6) if v6.prefix_len() >= 96 => match v6.addr().to_ipv4_mapped() {
            Some(v4) => ipnet::IpNet::V4(ipnet::Ipv4Net::new(v4, v6.prefix_len() - 96).ok()?),
            None => net,
        },
        _ => net,
    };
    Some(net.trunc())
}

/// `http://` or `https://` (any case) and a host, the scheme in lower case and no trailing `/`.
fn normalize_base_url(text: &str) -> Result<String, ConfigError> {
    let trimmed = text.trim().trim_end_matches('/');
    let (scheme, rest) = trimmed
        .split_once("://")
        .ok_or_else(|| ConfigError::BaseUrl(text.to_owned()))?;
    let scheme = scheme.to_ascii_lowercase();
    if !matches!(scheme.as_str(), "http" | "https") || rest.is_empty() || rest.contains(char::is_whitespace) {
        return Err(ConfigError::BaseUrl(text.to_owned()));
    }
    Ok(format!("{scheme}://{rest}"))
}

/// Timeouts per hop, in seconds.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct TimeoutConfig {
    /// Upstream deadline for standard-size requests.
    pub standard_secs: u64,
    /// Upstream deadline for large-size requests (above 2560x1440).
    pub large_secs: u64,
    /// Interval between SSE keepalive comments while the upstream works.
    pub keepalive_secs: u64,
    /// Interval between the newlines a non-streaming answer sends once it has waited that long,
    /// for clients behind proxies that cut quiet connections; 0 (the default) is off, and a
    /// request's `x-imagegate-keepalive` header overrides it. Once the first newline is sent the
    /// status is 200 whatever follows (see `http::json_keepalive`).
    pub json_keepalive_secs: u64,
    /// How long shutdown waits for in-flight requests.
    pub shutdown_grace_secs: u64,
    /// How long a client may stay quiet: a connection idle between requests, request headers
    /// not complete, a request body that stops arriving, or an answer the client takes nothing
    /// of, for this long is closed. Above a
    /// load balancer's idle timeout towards the gateway (330 s is advised for large images), so
    /// the gateway never closes a connection the balancer is about to reuse; lower (30 s) where
    /// clients connect directly.
    pub client_idle_secs: u64,
}

impl Default for TimeoutConfig {
    fn default() -> Self {
        Self {
            standard_secs: 120,
            large_secs: 300,
            keepalive_secs: 15,
            json_keepalive_secs: 0,
            shutdown_grace_secs: 30,
            client_idle_secs: 360,
        }
    }
}

impl TimeoutConfig {
    pub fn keepalive(&self) -> Duration {
        Duration::from_secs(self.keepalive_secs.max(1))
    }
    pub fn shutdown_grace(&self) -> Duration {
        Duration::from_secs(self.shutdown_grace_secs)
    }
    pub fn client_idle(&self) -> Duration {
        Duration::from_secs(self.client_idle_secs.max(1))
    }
}

/// Which image models are accepted, how they map upstream, and what `/v1/models` lists.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct ModelsConfig {
    /// Accepted image model ids.
    pub accepted: Vec<String>,
    /// Alias -> upstream model id.
    pub aliases: BTreeMap<String, String>,
    /// Text/agent models listed by `/v1/models` besides the image models.
    pub agent_models: Vec<String>,
}

impl Default for ModelsConfig {
    fn default() -> Self {
        Self {
            accepted: vec![
                imagegate_domain::GPT_IMAGE_2.to_owned(),
                imagegate_domain::GPT_IMAGE_2_SNAPSHOT.to_owned(),
            ],
            aliases: BTreeMap::new(),
            agent_models: vec!["gpt-5".to_owned(), "gpt-5-mini".to_owned()],
        }
    }
}

/// Failover bounds.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct FailoverConfig {
    /// Most account switches for one request.
    pub max_switches: u32,
    /// Most retries of transient errors for one request.
    pub transient_retries: u32,
    /// How long a request waits for a busy pool before 429.
    pub queue_wait_secs: u64,
    /// Most requests of this replica waiting for a busy pool at once, over every group; more get
    /// 429 at once.
    pub max_waiting: u32,
    /// How long a streamed answer waits for its first event before the client gets the headers: a
    /// stream that fails before its first event is failed over like any failed call instead of
    /// reaching the client as an error frame. At most the keepalive interval, and in all over every
    /// try of a request, so streams add no more silence than one keepalive interval.
    pub first_event_wait_secs: u64,
}

impl Default for FailoverConfig {
    fn default() -> Self {
        Self {
            max_switches: 3,
            transient_retries: 2,
            queue_wait_secs: 30,
            max_waiting: 256,
            first_event_wait_secs: 10,
        }
    }
}

/// Leases on upstream accounts.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct DispatchFileConfig {
    /// Lifetime of an account lease without renewal: the slots of a replica that died come back
    /// within this time. Live requests renew their leases every third of it.
    pub lease_ttl_secs: u64,
}

impl Default for DispatchFileConfig {
    fn default() -> Self {
        Self { lease_ttl_secs: 30 }
    }
}

impl DispatchFileConfig {
    /// The lease TTL (at least 1 s).
    pub fn lease_ttl(&self) -> Duration {
        Duration::from_secs(self.lease_ttl_secs.max(1))
    }

    /// How often a live lease is renewed: a third of the TTL.
    pub fn renew_interval(&self) -> Duration {
        self.lease_ttl() / 3
    }
}

/// The default Redis key prefix.
pub const DEFAULT_REDIS_PREFIX: &str = "imagegate";

/// ChatGPT-subscription (`codex`) accounts: how their OAuth access tokens are refreshed.
#[derive(Debug, Clone, Deserialize)]
#[serde(default, deny_unknown_fields)]
pub struct CodexConfig {
    /// The OAuth token endpoint (`refresh_token` grant).
    pub token_url: String,
    /// The OAuth client id sent with the grant.
    pub client_id: String,
    /// Refresh an access token this many seconds before it expires.
    pub refresh_skew_secs: u64,
}

impl Default for CodexConfig {
    fn default() -> Self {
        let upstream = imagegate_upstream::CodexAuthConfig::default();
        Self {
            token_url: upstream.token_url,
            client_id: upstream.client_id,
            refresh_skew_secs: upstream.refresh_skew.as_secs(),
        }
    }
}

impl CodexConfig {
    /// The upstream crate's settings.
    pub fn upstream(&self) -> imagegate_upstream::CodexAuthConfig {
        imagegate_upstream::CodexAuthConfig {
            token_url: self.token_url.clone(),
            client_id: self.client_id.clone(),
            refresh_skew: Duration::from_secs(self.refresh_skew_secs),
        }
    }
}

/// The resolved configuration of one process.
#[derive(Debug, Clone)]
pub struct Config {
    pub listen: SocketAddr,
    pub database_url: String,
    pub data_dir: PathBuf,
    pub redis_url: Option<String>,
    pub redis_prefix: String,
    pub timeouts: TimeoutConfig,
    pub models: ModelsConfig,
    pub failover: FailoverConfig,
    pub dispatch: DispatchFileConfig,
    pub agent_user_agents: Vec<String>,
    pub codex: CodexConfig,
    pub console: imagegate_console::ConsoleConfig,
    pub uploads: UploadsConfig,
}

impl FileConfig {
    /// Refuses a `*_secs` setting longer than [`MAX_SECS`], and a request timeout of zero.
    fn check_durations(&self) -> Result<(), ConfigError> {
        let request_timeouts = [
            ("[timeouts] standard_secs", self.timeouts.standard_secs),
            ("[timeouts] large_secs", self.timeouts.large_secs),
        ];
        if let Some((name, _)) = request_timeouts.into_iter().find(|(_, value)| *value == 0) {
            return Err(ConfigError::ZeroRequestTimeout { name });
        }
        let settings = [
            ("[timeouts] standard_secs", self.timeouts.standard_secs),
            ("[timeouts] large_secs", self.timeouts.large_secs),
            ("[timeouts] keepalive_secs", self.timeouts.keepalive_secs),
            (
                "[timeouts] shutdown_grace_secs",
                self.timeouts.shutdown_grace_secs,
            ),
            ("[timeouts] client_idle_secs", self.timeouts.client_idle_secs),
            ("[failover] queue_wait_secs", self.failover.queue_wait_secs),
            (
                "[failover] first_event_wait_secs",
                self.failover.first_event_wait_secs,
            ),
            ("[dispatch] lease_ttl_secs", self.dispatch.lease_ttl_secs),
            ("[codex] refresh_skew_secs", self.codex.refresh_skew_secs),
        ];
        if let Some((name, value)) = settings.into_iter().find(|(_, value)| *value > MAX_SECS) {
            return Err(ConfigError::TooLong { name, value });
        }
        match self.timeouts.json_keepalive_secs {
            secs if secs > MAX_JSON_KEEPALIVE_SECS => Err(ConfigError::JsonKeepaliveTooLong(secs)),
            _ => Ok(()),
        }
    }
}

/// The default listen address.
pub const DEFAULT_LISTEN: &str = "127.0.0.1:8080";

impl Config {
    /// Resolves flags and environment (already merged by clap) over the file over defaults.
    pub fn load(global: &GlobalArgs, serve: &ServeArgs) -> Result<Self, ConfigError> {
        let file = match &global.config {
            Some(path) => read_file(path)?,
            None => FileConfig::default(),
        };
        file.check_durations()?;
        let data_dir = global
            .data_dir
            .clone()
            .or(file.data_dir)
            .unwrap_or_else(default_data_dir);
        let database_url = global
            .database_url
            .clone()
            .or(file.database_url)
            .unwrap_or_else(|| sqlite_url(&data_dir.join("imagegate.db")));
        let listen = match serve.listen {
            Some(addr) => addr,
            None => {
                let text = file.listen.unwrap_or_else(|| DEFAULT_LISTEN.to_owned());
                text.parse().map_err(|_| ConfigError::Listen(text))?
            }
        };
        let mut agent_user_agents = file.agent_user_agents;
        if agent_user_agents.is_empty() {
            agent_user_agents = vec!["codex_cli_rs".to_owned(), "codex-cli".to_owned()];
        }
        Ok(Self {
            listen,
            database_url,
            data_dir,
            redis_url: serve.redis_url.clone().or(file.redis_url),
            redis_prefix: serve
                .redis_prefix
                .clone()
                .or(file.redis_prefix)
                .unwrap_or_else(|| DEFAULT_REDIS_PREFIX.to_owned()),
            timeouts: file.timeouts,
            models: file.models,
            failover: file.failover,
            dispatch: file.dispatch,
            agent_user_agents,
            codex: file.codex,
            console: file.console.resolve()?,
            uploads: file.uploads,
        })
    }

    /// The dispatcher's tunables: the waits for a busy pool and the lease settings.
    pub fn dispatch_config(&self) -> imagegate_dispatch::DispatchConfig {
        imagegate_dispatch::DispatchConfig {
            max_wait: Duration::from_secs(self.failover.queue_wait_secs),
            max_waiters: usize::try_from(self.failover.max_waiting).unwrap_or(usize::MAX),
            lease_ttl: self.dispatch.lease_ttl(),
            renew_interval: Some(self.dispatch.renew_interval()),
            ..imagegate_dispatch::DispatchConfig::default()
        }
    }

    /// How long a streamed answer's headers wait for its first event (see
    /// [`FailoverConfig::first_event_wait_secs`]): never longer than the keepalive interval.
    pub fn first_event_wait(&self) -> Duration {
        Duration::from_secs(self.failover.first_event_wait_secs).min(self.timeouts.keepalive())
    }

    /// The model catalog the domain validates against.
    pub fn catalog(&self) -> imagegate_domain::ModelCatalog {
        imagegate_domain::ModelCatalog::new(self.models.accepted.clone(), self.models.aliases.clone())
    }
}

fn read_file(path: &Path) -> Result<FileConfig, ConfigError> {
    let text = std::fs::read_to_string(path).map_err(|source| ConfigError::Read {
        path: path.to_owned(),
        source,
    })?;
    toml::from_str(&text).map_err(|source| ConfigError::Parse {
        path: path.to_owned(),
        source,
    })
}

/// `$XDG_DATA_HOME/imagegate`, else `~/.local/share/imagegate`, else `./imagegate-data`.
fn default_data_dir() -> PathBuf {
    if let Some(xdg) = std::env::var_os("XDG_DATA_HOME").filter(|v| !v.is_empty()) {
        return PathBuf::from(xdg).join("imagegate");
    }
    if let Some(home) = std::env::var_os("HOME").filter(|v| !v.is_empty()) {
        return PathBuf::from(home).join(".local/share/imagegate");
    }
    PathBuf::from("imagegate-data")
}

/// The URL of the SQLite file at `path`. sqlx ends the path at the first `?` and percent-decodes
/// it, so those two characters of a directory name are percent-encoded.
fn sqlite_url(path: &Path) -> String {
    let path = path.display().to_string();
    let mut encoded = String::with_capacity(path.len());
    for c in path.chars() {
        match c {
            '%' => encoded.push_str("%25"),
            '?' => encoded.push_str("%3F"),
            c => encoded.push(c),
        }
    }
    format!("sqlite://{encoded}?mode=rwc")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test]
    async fn a_data_directory_with_a_question_mark_or_percent_sign_holds_its_database() {
        let dir = tempfile::tempdir().unwrap();
        let data_dir = dir.path().join("odd?name%20here");
        std::fs::create_dir(&data_dir).unwrap();
        let file = data_dir.join("imagegate.db");
        let key = imagegate_store::MasterKey::from_bytes([1; 32]);
        let store = imagegate_store::connect(&sqlite_url(&file), &key).await.unwrap();
        store.close().await;
        assert!(file.exists(), "the database is in the data directory");
    }

    #[test]
    fn flags_override_file_and_defaults_fill_the_rest() {
        let dir = std::env::temp_dir().join(format!("imagegate-config-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("c.toml");
        std::fs::write(
            &path,
            "listen = \"127.0.0.1:9000\"\ndatabase_url = \"sqlite://x.db\"\n[timeouts]\nlarge_secs = 400\n",
        )
        .unwrap();
        let global = GlobalArgs {
            config: Some(path),
            database_url: None,
            data_dir: Some(dir.clone()),
        };
        let from_file = Config::load(&global, &ServeArgs::default()).unwrap();
        assert_eq!(from_file.listen.port(), 9000);
        assert_eq!(from_file.database_url, "sqlite://x.db");
        assert_eq!(from_file.timeouts.large_secs, 400);
        assert_eq!(from_file.timeouts.standard_secs, 120);
        assert_eq!(from_file.timeouts.client_idle(), Duration::from_secs(360));
        let serve = ServeArgs {
            listen: Some("127.0.0.1:9100".parse().unwrap()),
            ..ServeArgs::default()
        };
        let global = GlobalArgs {
            database_url: Some("postgres://h/db".into()),
            ..global
        };
        let flagged = Config::load(&global, &serve).unwrap();
        assert_eq!(flagged.listen.port(), 9100);
        assert_eq!(flagged.database_url, "postgres://h/db");
    }

    #[test]
    fn the_codex_section_sets_the_token_refresh() {
        let dir = std::env::temp_dir().join(format!("imagegate-config-codex-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("c.toml");
        std::fs::write(
            &path,
            "[codex]\ntoken_url = \"http://127.0.0.1:9/oauth/token\"\nrefresh_skew_secs = 120\n",
        )
        .unwrap();
        let global = GlobalArgs {
            config: Some(path),
            data_dir: Some(dir.clone()),
            ..GlobalArgs::default()
        };
        let codex = Config::load(&global, &ServeArgs::default())
            .unwrap()
            .codex
            .upstream();
        assert_eq!(codex.token_url, "http://127.0.0.1:9/oauth/token");
        assert_eq!(codex.refresh_skew, Duration::from_secs(120));
        assert_eq!(
            codex.client_id,
            imagegate_upstream::CodexAuthConfig::DEFAULT_CLIENT_ID,
            "unset keys keep their defaults"
        );
        let defaults = CodexConfig::default().upstream();
        assert_eq!(defaults, imagegate_upstream::CodexAuthConfig::default());
    }

    fn load_text(name: &str, text: &str) -> Result<Config, ConfigError> {
        let dir = std::env::temp_dir().join(format!("imagegate-config-{name}-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("c.toml");
        std::fs::write(&path, text).unwrap();
        let global = GlobalArgs {
            config: Some(path),
            data_dir: Some(dir),
            ..GlobalArgs::default()
        };
        Config::load(&global, &ServeArgs::default())
    }

    #[test]
    fn the_console_section_names_the_trusted_proxies() {
        let config = load_text(
            "console",
            "[console]\nbase_url = \"https://img.example\"\ntrusted_proxies = [\"10.0.0.0/8\", \"192.0.2.7\", \"fd00::/8\"]\n",
        )
        .unwrap();
        let console = config.console;
        assert_eq!(console.base_url_hint.as_deref(), Some("https://img.example"));
        let trusted: Vec<String> = console.trusted_proxies.iter().map(ToString::to_string).collect();
        assert_eq!(trusted, ["10.0.0.0/8", "192.0.2.7/32", "fd00::/8"]);
        let unset = load_text("console-unset", "").unwrap().console;
        assert!(
            unset.trusted_proxies.is_empty(),
            "no proxy is trusted unless named"
        );
    }

    #[test]
    fn trusted_networks_are_compared_as_the_console_sees_addresses() {
        let nets = ["::ffff:10.0.0.0/104", "10.1.2.3/16", "::ffff:192.0.2.7"];
        let parsed: Vec<String> = nets
            .iter()
            .map(|n| parse_network(n).unwrap().to_string())
            .collect();
        assert_eq!(parsed, ["10.0.0.0/8", "10.1.0.0/16", "192.0.2.7/32"]);
    }

    #[test]
    fn the_base_url_must_be_an_http_url() {
        assert_eq!(
            normalize_base_url("HTTPS://Images.example.com/").unwrap(),
            "https://Images.example.com"
        );
        for bad in [
            "images.example.com",
            "ftp://images.example.com",
            "https://",
            "https://a b",
        ] {
            assert!(
                matches!(normalize_base_url(bad), Err(ConfigError::BaseUrl(_))),
                "{bad}"
            );
        }
        let error = load_text("console-url", "[console]\nbase_url = \"images.example.com\"\n").unwrap_err();
        assert!(matches!(error, ConfigError::BaseUrl(_)), "{error}");
    }

    #[test]
    fn a_time_setting_longer_than_a_week_is_refused() {
        let error = load_text("too-long", "[failover]\nqueue_wait_secs = 9223372036854775807\n").unwrap_err();
        assert!(
            matches!(
                error,
                ConfigError::TooLong {
                    name: "[failover] queue_wait_secs",
                    ..
                }
            ),
            "{error}"
        );
        assert!(error.to_string().contains("at most 604800"), "{error}");
        let week = format!("[timeouts]\nkeepalive_secs = {MAX_SECS}\n");
        assert!(load_text("a-week", &week).is_ok());
    }

    #[test]
    fn a_request_timeout_of_zero_is_refused() {
        for (setting, name) in [
            ("standard_secs", "[timeouts] standard_secs"),
            ("large_secs", "[timeouts] large_secs"),
        ] {
            let error = load_text("zero", &format!("[timeouts]\n{setting} = 0\n")).unwrap_err();
            assert!(
                matches!(error, ConfigError::ZeroRequestTimeout { name: n } if n == name),
                "{error}"
            );
        }
        assert!(load_text("one", "[timeouts]\nstandard_secs = 1\nlarge_secs = 1\n").is_ok());
    }

    #[test]
    fn a_json_keepalive_longer_than_proxies_wait_is_refused() {
        let ten_minutes = format!("[timeouts]\njson_keepalive_secs = {MAX_JSON_KEEPALIVE_SECS}\n");
        assert!(load_text("ten-minutes", &ten_minutes).is_ok());
        let longer = format!(
            "[timeouts]\njson_keepalive_secs = {}\n",
            MAX_JSON_KEEPALIVE_SECS + 1
        );
        let err = load_text("longer", &longer).unwrap_err();
        assert!(matches!(err, ConfigError::JsonKeepaliveTooLong(601)), "{err}");
    }

    #[test]
    fn a_trusted_proxy_that_is_not_an_address_is_refused() {
        let error = load_text("console-bad", "[console]\ntrusted_proxies = [\"10.0.0.0/33\"]\n").unwrap_err();
        assert!(
            matches!(error, ConfigError::TrustedProxy(ref text) if text == "10.0.0.0/33"),
            "{error}"
        );
    }

    #[test]
    fn the_replica_example_loads() {
        let path = Path::new(env!("CARGO_MANIFEST_DIR")).join("../../docs/examples/replica.toml");
        let text = std::fs::read_to_string(path).unwrap();
        let config = load_text("example", &text).unwrap();
        assert_eq!(config.console.trusted_proxies.len(), 2);
        assert!(
            config.timeouts.client_idle_secs > config.timeouts.large_secs,
            "quiet clients are closed only after the balancer's advised idle timeout"
        );
    }

    #[test]
    fn redis_and_lease_settings_come_from_the_file_or_the_flags() {
        let dir = std::env::temp_dir().join(format!("imagegate-config-r-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("c.toml");
        std::fs::write(
            &path,
            "redis_url = \"redis://127.0.0.1:6379\"\nredis_prefix = \"tenant-a\"\n[dispatch]\nlease_ttl_secs = 9\n",
        )
        .unwrap();
        let global = GlobalArgs {
            config: Some(path),
            data_dir: Some(dir.clone()),
            ..GlobalArgs::default()
        };
        let config = Config::load(&global, &ServeArgs::default()).unwrap();
        assert_eq!(config.redis_url.as_deref(), Some("redis://127.0.0.1:6379"));
        assert_eq!(config.redis_prefix, "tenant-a");
        assert_eq!(config.dispatch.lease_ttl(), Duration::from_secs(9));
        assert_eq!(config.dispatch.renew_interval(), Duration::from_secs(3));
        let serve = ServeArgs {
            redis_prefix: Some("tenant-b".into()),
            ..ServeArgs::default()
        };
        assert_eq!(Config::load(&global, &serve).unwrap().redis_prefix, "tenant-b");
        let defaults = Config::load(
            &GlobalArgs {
                data_dir: Some(dir),
                ..GlobalArgs::default()
            },
            &ServeArgs::default(),
        )
        .unwrap();
        assert_eq!(defaults.redis_prefix, DEFAULT_REDIS_PREFIX);
        assert_eq!(defaults.dispatch.lease_ttl(), Duration::from_secs(30));
    }

    #[test]
    fn the_waits_for_a_busy_pool_come_from_the_failover_section() {
        let config = load_text("waiting", "[failover]\nqueue_wait_secs = 5\nmax_waiting = 8\n").unwrap();
        let dispatch = config.dispatch_config();
        assert_eq!(
            (dispatch.max_wait, dispatch.max_waiters),
            (Duration::from_secs(5), 8)
        );
        let defaults = load_text("waiting-defaults", "").unwrap().dispatch_config();
        assert_eq!(
            (defaults.max_wait, defaults.max_waiters, defaults.lease_ttl),
            (Duration::from_secs(30), 256, Duration::from_secs(30))
        );
    }

    #[test]
    fn unknown_file_keys_are_refused() {
        let dir = std::env::temp_dir().join(format!("imagegate-config-u-{}", std::process::id()));
        std::fs::create_dir_all(&dir).unwrap();
        let path = dir.join("c.toml");
        std::fs::write(&path, "lisen = \"127.0.0.1:9000\"\n").unwrap();
        let global = GlobalArgs {
            config: Some(path),
            ..GlobalArgs::default()
        };
        let err = Config::load(&global, &ServeArgs::default()).unwrap_err();
        assert!(err.to_string().contains("lisen"), "{err}");
    }
}
