//! The LiteLLM proxy baseline: installed from PyPI at a pinned version into `.venv-bench/`, configured
//! to relay `gpt-image-2` to the same simulators as the gateway.

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::procs::{Proc, pinned};
use super::scenarios::SIM_KEY;

/// The pinned release (1.107.0 was a compromised release and is withdrawn; do not move to it).
pub const VERSION: &str = "1.105.7";
/// Model name that LiteLLM relays to the tiny-image simulator.
pub const TINY_MODEL: &str = "gpt-image-2-tiny";
/// Model name that LiteLLM relays to the full-size simulator.
pub const IMAGES_MODEL: &str = "gpt-image-2";

/// The proxy's master key (it refuses to start without one; a fixed, long key is fine for a
/// loopback benchmark).
pub const MASTER_KEY: &str = "sk-benchc0ffee0123456789abcdef0123456789abcdef0123456789abcdef01234567";

/// The requirement lister run inside the venv (see the script's docstring).
const DEPS_SCRIPT: &str = include_str!("litellm_deps.py");

/// `.venv-bench/` in the workspace.
pub fn venv(root: &Path) -> PathBuf {
    root.join(".venv-bench")
}

/// Whether the venv already has LiteLLM `VERSION`.
pub fn installed(root: &Path) -> bool {
    let python = venv(root).join("bin/python");
    Command::new(python)
        .args([
            "-c",
            &format!("import importlib.metadata as m; assert m.version('litellm') == '{VERSION}'"),
        ])
        .stdout(Stdio::null())
        .stderr(Stdio::null())
        .status()
        .is_ok_and(|s| s.success())
}

/// Creates the venv and installs LiteLLM `VERSION` with its proxy requirements, unless present.
/// The wheel goes in with `--no-deps` because it declares a `certifi` newer than the registry has;
/// its requirements follow, with `certifi` pinned to the newest available release.
pub fn ensure_installed(root: &Path) -> Result<(), String> {
    if installed(root) {
        return Ok(());
    }
    let venv = venv(root);
    crate::status(Command::new("python3").arg("-m").arg("venv").arg(&venv))?;
    let pip = venv.join("bin/pip");
    crate::status(Command::new(&pip).args(["install", "-q", "--no-deps", &format!("litellm=={VERSION}")]))?;
    let script = venv.join("litellm_deps.py");
    std::fs::write(&script, DEPS_SCRIPT).map_err(|e| format!("{}: {e}", script.display()))?;
    let output = Command::new(venv.join("bin/python"))
        .arg(&script)
        .output()
        .map_err(|e| format!("litellm_deps.py: {e}"))?;
    if !output.status.success() {
        return Err(format!(
            "litellm_deps.py: {}",
            String::from_utf8_lossy(&output.stderr)
        ));
    }
    let requirements = venv.join("requirements-litellm.txt");
    std::fs::write(&requirements, &output.stdout).map_err(|e| format!("{}: {e}", requirements.display()))?;
    crate::status(
        Command::new(&pip)
            .args(["install", "-q", "-r"])
            .arg(&requirements),
    )
}

/// The proxy config: one model entry per simulator.
pub fn config_yaml(tiny_sim: &str, images_sim: &str) -> String {
    let entry = |name: &str, sim: &str| {
        format!(
            "  - model_name: {name}\n    litellm_params:\n      model: openai/gpt-image-2\n      api_base: {sim}/v1\n      api_key: {SIM_KEY}\n"
        )
    };
    format!(
        "model_list:\n{}{}litellm_settings:\n  drop_params: false\ngeneral_settings:\n  master_key: {MASTER_KEY}\n",
        entry(TINY_MODEL, tiny_sim),
        entry(IMAGES_MODEL, images_sim)
    )
}

/// Starts the proxy (one worker) on `port` and waits until `/health/liveliness` answers.
pub async fn start(
    root: &Path,
    dir: &Path,
    config: &Path,
    port: u16,
    cpu: Option<usize>,
) -> Result<(Proc, String), String> {
    let log = dir.join("litellm.log");
    let stderr = std::fs::File::create(&log).map_err(|e| format!("{}: {e}", log.display()))?;
    let stdout = stderr.try_clone().map_err(|e| e.to_string())?;
    let mut command = pinned(&venv(root).join("bin/litellm"), cpu);
    command
        .arg("--config")
        .arg(config)
        .args([
            "--host",
            "127.0.0.1",
            "--port",
            &port.to_string(),
            "--num_workers",
            "1",
        ])
        .env("LITELLM_LOCAL_MODEL_COST_MAP", "True")
        .env("LITELLM_LOG", "ERROR")
        .env("DISABLE_SCHEMA_UPDATE", "True")
        .stdin(Stdio::null())
        .stdout(stdout)
        .stderr(stderr);
    let child = command.spawn().map_err(|e| format!("litellm: {e}"))?;
    let mut proc = Proc::wrap("litellm", child);
    let url = format!("http://127.0.0.1:{port}");
    let client = reqwest::Client::new();
    let deadline = Instant::now() + Duration::from_secs(240);
    while Instant::now() < deadline {
        let ready = client
            .get(format!("{url}/health/liveliness"))
            .send()
            .await
            .is_ok_and(|r| r.status().is_success());
        if ready {
            return Ok((proc, url));
        }
        if proc.exited() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(250)).await;
    }
    Err(format!("litellm did not become ready (log: {})", log.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_relays_both_models_to_their_simulators() {
        let yaml = config_yaml("http://127.0.0.1:1", "http://127.0.0.1:2");
        assert!(yaml.contains("model_name: gpt-image-2-tiny\n    litellm_params:\n      model: openai/gpt-image-2\n      api_base: http://127.0.0.1:1/v1"));
        assert!(yaml.contains(&format!("master_key: {MASTER_KEY}")));
        assert!(yaml.contains("model_name: gpt-image-2\n    litellm_params:\n      model: openai/gpt-image-2\n      api_base: http://127.0.0.1:2/v1"));
    }
}
