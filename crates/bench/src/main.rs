//! `imagegate-bench`: the harness behind `cargo xtask bench [--quick] [--no-litellm] [--only ID] [--gateway PATH]`.
//! It measures imagegate against its floor (the load generator straight to `imagegate-sim`) and
//! the LiteLLM proxy, side by side in one run, runs the criterion microbenchmarks, and writes
//! `docs/benchmarks.md` (between markers) and `docs/benchmarks.json`.
//!
//! `--quick`: 1 s per scenario and short criterion runs, and LiteLLM only if already installed; its
//! report goes to `target/bench-quick/` so the committed figures stay those of a full run.
//!
//! `--only ID` (repeatable): only the scenarios whose id contains `ID` (e.g. `small-c16`), no
//! microbenchmarks; for iterating on one figure. Its report also goes to `target/bench-quick/`.
//!
//! `--gateway PATH`: measure that `imagegate` binary instead of `target/release/imagegate`, e.g. a
//! copy built at another commit, for an A/B against the same floor. Its report also goes to
//! `target/bench-quick/`.
//!
//! This process is also the load generator, so it runs as a release build: `cargo xtask bench`
//! builds it and hands it the arguments, with the seconds that build took.
//!
//! ```text
//! cargo xtask bench --only small-c16
//! # is: cargo build --release -p imagegate-bench && target/release/imagegate-bench --only small-c16
//! ```
//!
//! It lives in its own crate, not in `xtask`, so that `cargo xtask` (and with it the README's test
//! command) builds in seconds: nothing here is compiled until a bench is run.

mod cpu_time;
mod litellm;
mod loadgen;
mod machine;
mod micro;
mod nginx;
mod procs;
mod report;
mod scenarios;
mod targets;

use std::path::{Path, PathBuf};
use std::process::{Command, ExitCode};
use std::time::{Duration, Instant};

use bytes::Bytes;

use loadgen::{LoadShape, RequestSpec};
use report::{Report, Run};
use scenarios::{Endpoints, Group, Scenario, Target};

/// Command-line options.
#[derive(Debug, Clone, Default)]
pub struct Options {
    /// Short runs, no LiteLLM install, report under `target/bench-quick/`.
    pub quick: bool,
    /// Skip LiteLLM entirely.
    pub no_litellm: bool,
    /// Only the scenarios whose id contains one of these; empty means all.
    pub only: Vec<String>,
    /// The `imagegate` binary to measure instead of the one built in `target/release/`.
    pub gateway: Option<PathBuf>,
}

/// Whether `--only` value `only` names scenario `id` (any part of it).
fn names(only: &str, id: &str) -> bool {
    id.contains(only)
}

impl Options {
    fn parse(args: &[String]) -> Result<Self, String> {
        let mut options = Self::default();
        let mut args = args.iter();
        while let Some(arg) = args.next() {
            match arg.as_str() {
                "--quick" => options.quick = true,
                "--no-litellm" => options.no_litellm = true,
                "--only" => match args.next() {
                    Some(id) => options.only.push(id.clone()),
                    None => return Err("bench: --only needs a scenario id".to_owned()),
                },
                "--gateway" => match args.next() {
                    Some(path) => options.gateway = Some(PathBuf::from(path)),
                    None => return Err("bench: --gateway needs the path of an imagegate binary".to_owned()),
                },
                other => return Err(format!("bench: unknown option {other}")),
            }
        }
        let ids: Vec<String> = scenarios::all().into_iter().map(|s| s.id).collect();
        if let Some(unmatched) = options
            .only
            .iter()
            .find(|only| !ids.iter().any(|id| names(only, id)))
        {
            return Err(format!(
                "bench: --only {unmatched} matches no scenario; the scenarios are: {}",
                ids.join(", ")
            ));
        }
        Ok(options)
    }

    /// Whether the report is a partial one, kept out of `docs/`.
    pub fn partial(&self) -> bool {
        self.quick || !self.only.is_empty() || self.gateway.is_some()
    }

    /// Whether scenario `id` is to be run.
    fn selects(&self, id: &str) -> bool {
        self.only.is_empty() || self.only.iter().any(|only| names(only, id))
    }

    /// Warm-up and measured window of a load run that has the time to itself.
    pub fn windows(&self) -> (Duration, Duration) {
        if self.quick {
            (Duration::from_millis(300), Duration::from_secs(1))
        } else {
            (Duration::from_secs(2), Duration::from_secs(5))
        }
    }

    /// How the floor and the relays of a scenario share the time: image-sized answers, whose
    /// medians move by more than their 5% target between back-to-back windows, and small ones,
    /// whose p99 target (1 ms) is within what one window's tail drifts by, get three interleaved
    /// rounds each (a drift of the machine then falls on every target alike, and each figure
    /// pools more requests than one window did); the others get one window.
    pub fn rounds(&self, group: Group) -> Rounds {
        let (warmup, measure) = self.windows();
        // Quick windows split in three would be shorter than one 4K answer at c64.
        if self.quick {
            return Rounds {
                count: 1,
                first_warmup: warmup,
                warmup,
                measure,
            };
        }
        match group {
            Group::Image => Rounds {
                count: 3,
                first_warmup: warmup,
                warmup: warmup / 2,
                measure: measure * 2 / 5,
            },
            // Thousands of answers a second: a short warm-up refills the pools, and the three
            // windows together last as long as one did.
            Group::Small => Rounds {
                count: 3,
                first_warmup: warmup,
                warmup: warmup / 4,
                measure: measure / 3,
            },
            Group::Stream | Group::Edit => Rounds {
                count: 1,
                first_warmup: warmup,
                warmup,
                measure,
            },
        }
    }
}

/// Interleaved measuring: every target of a scenario runs `count` windows, in turns whose order
/// rotates each round, and each target's windows are pooled into one result.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct Rounds {
    /// Windows per target.
    pub count: usize,
    /// Warm-up before a target's first window.
    pub first_warmup: Duration,
    /// Warm-up before its later windows (its server and connections are warm by then).
    pub warmup: Duration,
    /// Measured part of each window.
    pub measure: Duration,
}

impl Rounds {
    /// The order of the targets in round `round`: rotated by one each round, so each target takes
    /// a different place in the order in each round (up to as many rounds as targets).
    pub fn order(targets: usize, round: usize) -> impl Iterator<Item = usize> {
        (0..targets).map(move |turn| (turn + round) % targets.max(1))
    }
}

/// Set by `cargo xtask bench` for this process: the seconds it spent before (building this
/// harness in release), counted in the run's duration.
const EARLIER_SECONDS: &str = "IMAGEGATE_BENCH_EARLIER_S";

fn main() -> ExitCode {
    let args: Vec<String> = std::env::args().skip(1).collect();
    match run(&args) {
        Ok(()) => ExitCode::SUCCESS,
        Err(message) => {
            eprintln!("imagegate-bench: {message}");
            ExitCode::FAILURE
        }
    }
}

/// The workspace root: this crate lives two folders below it.
fn workspace_root() -> PathBuf {
    let manifest_dir = Path::new(env!("CARGO_MANIFEST_DIR"));
    manifest_dir
        .parent()
        .and_then(Path::parent)
        .unwrap_or(manifest_dir)
        .to_path_buf()
}

fn run(args: &[String]) -> Result<(), String> {
    let options = Options::parse(args)?;
    let started = Instant::now();
    let root = workspace_root();
    // This process is the load generator: unoptimized, it would spend CPU 1 (shared with the
    // simulators) on itself and the floor would measure it.
    if cfg!(debug_assertions) {
        return Err("a build with debug assertions is too slow a load generator: run `cargo xtask bench`, which builds this harness in release".to_owned());
    }
    let earlier = std::env::var(EARLIER_SECONDS)
        .ok()
        .and_then(|s| s.parse::<f64>().ok())
        .unwrap_or(0.0);
    let with_litellm = !options.no_litellm && (!options.quick || litellm::installed(&root));
    // LiteLLM's first install (mostly downloads) runs while the builds compile, on every CPU,
    // before this process pins itself.
    let install = with_litellm.then(|| {
        let root = root.clone();
        std::thread::spawn(move || litellm::ensure_installed(&root))
    });
    let built = build(&root, &options);
    let installed = install.map_or(Ok(()), |install| {
        install
            .join()
            .unwrap_or_else(|_| Err("the LiteLLM install panicked".to_owned()))
    });
    built?;
    installed?;
    let pin = procs::can_pin();
    if pin {
        procs::pin_self(procs::CLIENT_CPU)?;
    }
    let machine = machine::Machine::probe(&root, pin);
    let runtime = tokio::runtime::Builder::new_current_thread()
        .enable_all()
        .build()
        .map_err(|e| format!("tokio: {e}"))?;
    let work = root.join("target/bench-work");
    let _ = std::fs::remove_dir_all(&work);
    std::fs::create_dir_all(&work).map_err(|e| format!("{}: {e}", work.display()))?;
    let nginx = nginx::find();
    let nginx_path = nginx.as_ref().map(|found| found.path.clone());
    let runs = runtime.block_on(load_runs(&root, &work, &options, with_litellm, pin, nginx_path))?;
    if options.only.is_empty() {
        micro::run(&root, options.quick)?;
    }
    let micro = micro::collect(
        &root.join("target/criterion"),
        &[
            "pick_lease_release",
            "size_validation",
            "sse_encode",
            "sse_decode",
        ],
    );
    let mut report = Report {
        quick: options.partial(),
        duration_s: 0.0,
        machine,
        commands: report::commands(&options),
        litellm_version: with_litellm.then(|| litellm::VERSION.to_owned()),
        nginx_version: nginx.map(|found| found.version),
        runs,
        micro,
        targets: Vec::new(),
    };
    report.targets = targets::evaluate(&report);
    report.duration_s = earlier + started.elapsed().as_secs_f64();
    let out = if options.partial() {
        root.join("target/bench-quick")
    } else {
        root.join("docs")
    };
    report::write(&report, &out)?;
    println!(
        "bench: wrote {} and {} in {:.0} s",
        out.join("benchmarks.md").display(),
        out.join("benchmarks.json").display(),
        report.duration_s
    );
    Ok(())
}

/// The release binaries and, for a full run, the criterion benches.
fn build(root: &Path, options: &Options) -> Result<(), String> {
    status(
        Command::new("cargo")
            .args(["build", "--release", "-p", "imagegate", "-p", "imagegate-sim"])
            .current_dir(root),
    )?;
    if options.only.is_empty() {
        micro::build(root)?;
    }
    Ok(())
}

/// The order of a scenario's rows in the report.
const TARGET_ORDER: [Target; 5] = [
    Target::Floor,
    Target::FloorAcross,
    Target::Nginx,
    Target::Imagegate,
    Target::Litellm,
];

/// Everything the load runs need.
struct Bench<'a> {
    root: &'a Path,
    /// The `imagegate` binary measured.
    gateway: PathBuf,
    work: &'a Path,
    setup: procs::GatewaySetup,
    litellm_config: Option<PathBuf>,
    server_cpu: Option<usize>,
    shape: (Duration, Duration),
    client: reqwest::Client,
    edit_body: Bytes,
    /// The nginx binary for the reference relay rows, when installed.
    nginx: Option<PathBuf>,
}

async fn load_runs(
    root: &Path,
    work: &Path,
    options: &Options,
    with_litellm: bool,
    pin: bool,
    nginx: Option<PathBuf>,
) -> Result<Vec<Run>, String> {
    let bin = root.join("target/release");
    let client_cpu = pin.then_some(procs::CLIENT_CPU);
    let (tiny_sim_proc, tiny_sim) = procs::start_sim(&bin, work, true, client_cpu)?;
    let (images_sim_proc, images_sim) = procs::start_sim(&bin, work, false, client_cpu)?;
    // The same simulators on the gateway's CPU, for the cross-CPU floor (only when pinned).
    let across = if pin {
        let server_cpu = Some(procs::SERVER_CPU);
        let (tiny_proc, tiny_url) = procs::start_sim(&bin, work, true, server_cpu)?;
        let (images_proc, images_url) = procs::start_sim(&bin, work, false, server_cpu)?;
        Some(((tiny_proc, images_proc), (tiny_url, images_url)))
    } else {
        None
    };
    let (across_procs, across_sims) = across.unzip();
    let gateway = options.gateway.clone().unwrap_or_else(|| bin.join("imagegate"));
    let setup = procs::setup_gateway(&gateway, work, &tiny_sim, &images_sim)?;
    let litellm_config = if with_litellm {
        let path = work.join("litellm.yaml");
        std::fs::write(&path, litellm::config_yaml(&tiny_sim, &images_sim))
            .map_err(|e| format!("{}: {e}", path.display()))?;
        Some(path)
    } else {
        None
    };
    let client = reqwest::Client::builder()
        .pool_max_idle_per_host(1024)
        .tcp_nodelay(true)
        .timeout(Duration::from_secs(120))
        .build()
        .map_err(|e| format!("http client: {e}"))?;
    let bench = Bench {
        root,
        gateway,
        work,
        setup,
        litellm_config,
        server_cpu: pin.then_some(procs::SERVER_CPU),
        shape: options.windows(),
        client,
        edit_body: scenarios::edit_body(scenarios::EDIT_IMAGE_BYTES),
        nginx,
    };
    let endpoints = Endpoints {
        tiny_sim,
        images_sim,
        across_sims,
        gateway: String::new(),
        tiny_key: bench.setup.tiny_key.clone(),
        images_key: bench.setup.images_key.clone(),
        litellm: None,
        nginx: None,
    };
    let selected: Vec<Scenario> = scenarios::all()
        .into_iter()
        .filter(|s| options.selects(&s.id))
        .collect();
    let mut runs = Vec::new();
    for scenario in &selected {
        let targets: Vec<Target> = TARGET_ORDER
            .into_iter()
            .filter(|target| bench.takes_part(scenario, *target, &endpoints))
            .collect();
        runs.extend(
            bench
                .interleaved(scenario, &targets, &endpoints, options.rounds(scenario.group))
                .await,
        );
    }
    // LiteLLM comes last, in a pass of its own: the instance the small scenarios share must not sit
    // on the gateway's CPU (its Python runtime wakes up now and then) while the gateway is measured.
    let mut shared_litellm = None;
    if bench.litellm_config.is_some() {
        for scenario in &selected {
            eprintln!("bench: {} via {}", scenario.id, Target::Litellm.label());
            runs.push(bench.one_litellm(scenario, &endpoints, &mut shared_litellm).await);
        }
    }
    runs.sort_by_key(|run| {
        let scenario = selected.iter().position(|s| s.id == run.scenario);
        let target = TARGET_ORDER.iter().position(|t| *t == run.target);
        (scenario, target)
    });
    if let Some((proc, _)) = shared_litellm {
        proc.stop(Duration::from_secs(5));
    }
    drop(tiny_sim_proc);
    drop(images_sim_proc);
    drop(across_procs);
    Ok(runs)
}

/// A target of an interleaved comparison, started and probed.
struct Contender {
    target: Target,
    server: Option<procs::Proc>,
    spec: RequestSpec,
    probe_bytes: u64,
    pooled: loadgen::Pooled,
    round_p50_ms: Vec<f64>,
}

impl Bench<'_> {
    /// Whether `target` has a row in `scenario` (LiteLLM has a pass of its own).
    fn takes_part(&self, scenario: &Scenario, target: Target, endpoints: &Endpoints) -> bool {
        match target {
            Target::Floor | Target::Imagegate => true,
            Target::Litellm => false,
            // Small responses: what crossing CPUs costs. Image-sized ones: what a relay costs.
            Target::FloorAcross => {
                endpoints.across_sims.is_some() && matches!(scenario.group, Group::Small | Group::Image)
            }
            Target::Nginx => self.nginx.is_some() && scenario.group == Group::Image,
        }
    }

    /// `scenario` against each of `targets` in `rounds`: every server is started (fresh) and
    /// probed first, then the windows take turns, so the floor and the relays meet the same state
    /// of the machine.
    async fn interleaved(
        &self,
        scenario: &Scenario,
        targets: &[Target],
        endpoints: &Endpoints,
        rounds: Rounds,
    ) -> Vec<Run> {
        let mut endpoints = endpoints.clone();
        let mut runs = Vec::new();
        let mut contenders = Vec::new();
        for &target in targets {
            let server = match self.start(target, &scenario.id, &mut endpoints).await {
                Ok(server) => server,
                Err(error) => {
                    runs.push(Run::failed(scenario, target, format!("could not start: {error}")));
                    continue;
                }
            };
            match self.probe(scenario, target, &endpoints).await {
                Ok((spec, probe_bytes)) => contenders.push(Contender {
                    target,
                    server,
                    spec,
                    probe_bytes,
                    pooled: loadgen::Pooled::default(),
                    round_p50_ms: Vec::new(),
                }),
                Err(run) => {
                    runs.push(*run);
                    if let Some(server) = server {
                        server.stop(Duration::from_secs(5));
                    }
                }
            }
        }
        for round in 0..rounds.count {
            for index in Rounds::order(contenders.len(), round) {
                let Some(contender) = contenders.get_mut(index) else {
                    continue;
                };
                eprintln!(
                    "bench: {} via {} (round {} of {})",
                    scenario.id,
                    contender.target.label(),
                    round + 1,
                    rounds.count
                );
                let shape = LoadShape {
                    concurrency: scenario.concurrency,
                    warmup: if round == 0 {
                        rounds.first_warmup
                    } else {
                        rounds.warmup
                    },
                    measure: rounds.measure,
                };
                let result = contender.pooled.add(&self.client, &contender.spec, shape).await;
                contender.round_p50_ms.push(result.latency.p50_ms);
            }
        }
        let measures_memory = matches!(scenario.group, Group::Image | Group::Edit);
        for contender in contenders {
            let mut run = self.finish(
                scenario,
                contender.target,
                &contender.spec,
                contender.pooled.result(),
            );
            run.response_bytes = Some(contender.probe_bytes);
            if rounds.count > 1 {
                run.round_p50_ms = contender.round_p50_ms;
            }
            if let Some(server) = contender.server {
                if measures_memory || contender.target == Target::Imagegate {
                    run.peak_rss_bytes = Some(server.peak_rss());
                }
                server.stop(Duration::from_secs(5));
            }
            runs.push(run);
        }
        runs
    }

    /// `scenario` against LiteLLM, in one window. LiteLLM (slow to start) is fresh where memory is
    /// measured (image and edit scenarios) and shared by the others (`shared` holds it between
    /// calls).
    async fn one_litellm(
        &self,
        scenario: &Scenario,
        endpoints: &Endpoints,
        shared: &mut Option<(procs::Proc, String)>,
    ) -> Run {
        let target = Target::Litellm;
        let mut endpoints = endpoints.clone();
        let measures_memory = matches!(scenario.group, Group::Image | Group::Edit);
        let server = if !measures_memory && shared.is_some() {
            endpoints.litellm = shared.as_ref().map(|(_, url)| url.clone());
            None
        } else {
            match self.start(target, &scenario.id, &mut endpoints).await {
                Ok(server) => server,
                Err(error) => return Run::failed(scenario, target, format!("could not start: {error}")),
            }
        };
        let mut run = match self.probe(scenario, target, &endpoints).await {
            Ok((spec, probe_bytes)) => {
                let (warmup, measure) = self.shape;
                let shape = LoadShape {
                    concurrency: scenario.concurrency,
                    warmup,
                    measure,
                };
                let result = loadgen::run(&self.client, &spec, shape).await;
                let mut run = self.finish(scenario, target, &spec, result);
                run.response_bytes = Some(probe_bytes);
                run
            }
            Err(run) => *run,
        };
        if let Some(server) = server {
            if measures_memory {
                run.peak_rss_bytes = Some(server.peak_rss());
            }
            match (measures_memory, endpoints.litellm) {
                (false, Some(url)) => *shared = Some((server, url)),
                _ => server.stop(Duration::from_secs(5)),
            }
        }
        run
    }

    async fn start(
        &self,
        target: Target,
        id: &str,
        endpoints: &mut Endpoints,
    ) -> Result<Option<procs::Proc>, String> {
        match target {
            Target::Floor | Target::FloorAcross => Ok(None),
            Target::Imagegate => {
                let log = self.work.join(format!("imagegate-{id}.log"));
                let (proc, url) = procs::start_gateway(&self.gateway, &self.setup, &log, self.server_cpu)?;
                endpoints.gateway = url;
                Ok(Some(proc))
            }
            Target::Nginx => {
                let nginx = self.nginx.as_deref().ok_or("nginx not installed")?;
                let port = procs::free_port()?;
                let (proc, url) =
                    nginx::start(nginx, self.work, &endpoints.images_sim, port, self.server_cpu).await?;
                endpoints.nginx = Some(url);
                Ok(Some(proc))
            }
            Target::Litellm => {
                let config = self.litellm_config.as_deref().ok_or("LiteLLM not configured")?;
                let port = procs::free_port()?;
                let (proc, url) = litellm::start(self.root, self.work, config, port, self.server_cpu).await?;
                endpoints.litellm = Some(url);
                Ok(Some(proc))
            }
        }
    }

    /// The request `target` gets, sent once as a probe (which must succeed with an image or an
    /// event stream); with the probe's body length. A target that cannot do it gives its run.
    async fn probe(
        &self,
        scenario: &Scenario,
        target: Target,
        endpoints: &Endpoints,
    ) -> Result<(RequestSpec, u64), Box<Run>> {
        let Some(spec) = scenarios::request(scenario, target, endpoints, &self.edit_body) else {
            return Err(Box::new(Run::failed(scenario, target, "no endpoint".to_owned())));
        };
        let probe = loadgen::send_raw(&self.client, &spec, Instant::now(), true)
            .await
            .map_err(|error| Box::new(Run::failed(scenario, target, error)))?;
        if let Some(reason) = report::unsupported_reason(&probe, spec.first_event) {
            return Err(Box::new(Run::unsupported(scenario, target, reason)));
        }
        Ok((spec, probe.bytes))
    }

    /// The run of a measured `result`.
    fn finish(
        &self,
        scenario: &Scenario,
        target: Target,
        spec: &RequestSpec,
        result: loadgen::LoadResult,
    ) -> Run {
        let mut run = Run::measured(scenario, target, result);
        if scenario.group == Group::Edit {
            run.request_bytes = Some(spec.body.len() as u64);
        }
        run
    }
}

/// Runs `command`, failing on a non-zero exit.
pub fn status(command: &mut Command) -> Result<(), String> {
    let shown = format!("{command:?}");
    let status = command.status().map_err(|e| format!("{shown}: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("{shown} failed: {status}"))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn only_must_name_a_scenario() {
        let args = |list: &[&str]| list.iter().map(|s| (*s).to_owned()).collect::<Vec<_>>();
        let options = Options::parse(&args(&["--only", "small-c16", "--only", "4K"]));
        let error = options.expect_err("4K names no scenario");
        assert!(error.contains("--only 4K matches no scenario"), "{error}");
        assert!(error.contains("image-3840x2160-c64"), "lists the ids: {error}");
        let options = Options::parse(&args(&["--only", "3840x2160", "--quick"])).expect("valid");
        assert_eq!(options.only, ["3840x2160"]);
        assert!(options.selects("stream-3840x2160-c16") && !options.selects("small-c16"));
        let options = Options::parse(&args(&["--gateway", "/tmp/imagegate-old"])).expect("valid");
        assert_eq!(options.gateway.as_deref(), Some(Path::new("/tmp/imagegate-old")));
        assert!(options.partial(), "an A/B is kept out of docs/");
        let error = Options::parse(&args(&["--gateway"])).expect_err("no path");
        assert!(error.contains("--gateway needs"), "{error}");
    }

    #[test]
    fn each_round_rotates_the_order_of_the_targets() {
        let orders: Vec<Vec<usize>> = (0..3).map(|round| Rounds::order(3, round).collect()).collect();
        assert_eq!(orders, [[0, 1, 2], [1, 2, 0], [2, 0, 1]]);
        assert_eq!(Rounds::order(0, 1).count(), 0);
    }

    #[test]
    fn image_sized_and_small_scenarios_take_turns() {
        let options = Options::default();
        let image = options.rounds(Group::Image);
        assert_eq!(image.count, 3);
        assert!(image.measure * 3 > options.windows().1, "{image:?}");
        let small = options.rounds(Group::Small);
        assert_eq!(small.count, 3);
        let whole = options.windows().1;
        assert!(whole - small.measure * 3 < Duration::from_millis(1), "{small:?}");
        assert!(small.warmup < small.first_warmup, "{small:?}");
        for group in [Group::Stream, Group::Edit] {
            let rounds = options.rounds(group);
            assert_eq!(
                (rounds.count, rounds.measure),
                (1, options.windows().1),
                "{group:?}"
            );
        }
        let quick = Options {
            quick: true,
            ..Options::default()
        };
        assert_eq!(quick.rounds(Group::Image).count, 1, "quick windows stay whole");
        assert_eq!(quick.rounds(Group::Small).count, 1, "quick windows stay whole");
    }
}
