//! Spawning the binaries and talking to the admin CLI.

use std::io::{BufRead, BufReader, Write};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Output, Stdio};
use std::sync::mpsc;
use std::time::Duration;

/// Path of a workspace binary built beside the running test executable.
pub fn bin_path(name: &str) -> PathBuf {
    let exe = std::env::current_exe().expect("current exe");
    // target/<profile>/deps/<test> -> target/<profile>/<name>
    let dir = exe.parent().and_then(Path::parent).expect("target dir");
    let path = dir.join(name);
    assert!(
        path.exists(),
        "{} is not built; run the tests with `cargo xtask test`",
        path.display()
    );
    path
}

/// A command running the `imagegate` binary without the `IMAGEGATE_*` variables of the shell the
/// tests run in: a developer's `IMAGEGATE_DATABASE_URL` or `IMAGEGATE_MASTER_KEY` must not point the
/// tests' gateways at a real database or change their keys. Each test sets what it needs.
pub fn imagegate_command() -> Command {
    let mut command = Command::new(bin_path("imagegate"));
    for (name, _) in std::env::vars_os() {
        if name.to_string_lossy().starts_with("IMAGEGATE_") {
            command.env_remove(name);
        }
    }
    command
}

/// Reads stdout lines until one contains `marker`, returning the URL after `http://`.
fn wait_for_url(child: &mut Child, marker: &str) -> String {
    let stdout = child.stdout.take().expect("piped stdout");
    let (tx, rx) = mpsc::channel();
    let wanted = marker.to_owned();
    std::thread::spawn(move || {
        let mut sent = false;
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if !sent
                && line.contains(&wanted)
                && let Some(at) = line.find("http://")
            {
                let _ = tx.send(line[at..].trim().to_owned());
                sent = true;
            }
        }
    });
    rx.recv_timeout(Duration::from_secs(60))
        .unwrap_or_else(|_| panic!("no '{marker}' line within 60 s"))
}

fn terminate(child: &mut Child) {
    let _ = Command::new("kill")
        .arg("-TERM")
        .arg(child.id().to_string())
        .status();
    for _ in 0..100 {
        if let Ok(Some(_)) = child.try_wait() {
            return;
        }
        std::thread::sleep(Duration::from_millis(50));
    }
    let _ = child.kill();
    let _ = child.wait();
}

/// A running `imagegate-sim`.
#[derive(Debug)]
pub struct Sim {
    child: Child,
    /// `http://127.0.0.1:PORT`
    pub url: String,
}

impl Sim {
    pub fn spawn(args: &[&str]) -> Self {
        let mut child = Command::new(bin_path("imagegate-sim"))
            .args(["--listen", "127.0.0.1:0"])
            .args(args)
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn imagegate-sim");
        let url = wait_for_url(&mut child, "listening on");
        Self { child, url }
    }

    /// The base URL an OpenAI-compatible account uses.
    pub fn base_url(&self) -> String {
        format!("{}/v1", self.url)
    }
}

impl Drop for Sim {
    fn drop(&mut self) {
        terminate(&mut self.child);
    }
}

/// A running `imagegate serve` on its own SQLite database.
#[derive(Debug)]
pub struct Gateway {
    child: Option<Child>,
    /// `http://127.0.0.1:PORT`
    pub url: String,
    /// The data directory (database, master key).
    pub data_dir: PathBuf,
}

impl Gateway {
    /// Starts `imagegate serve` with the data directory `data_dir`, plus extra arguments.
    pub fn spawn(data_dir: &Path, args: &[&str]) -> Self {
        Self::spawn_with_env(data_dir, args, &[])
    }

    /// Like [`Gateway::spawn`], with extra environment variables (they override the defaults,
    /// `IMAGEGATE_LOG=warn` included).
    pub fn spawn_with_env(data_dir: &Path, args: &[&str], env: &[(&str, &str)]) -> Self {
        let mut child = imagegate_command()
            .arg("--data-dir")
            .arg(data_dir)
            .args(["serve", "--listen", "127.0.0.1:0"])
            .args(args)
            .env("IMAGEGATE_LOG", "warn")
            .envs(env.iter().copied())
            .stdout(Stdio::piped())
            .stderr(Stdio::null())
            .spawn()
            .expect("spawn imagegate");
        let url = wait_for_url(&mut child, "imagegate listening on");
        Self {
            child: Some(child),
            url,
            data_dir: data_dir.to_owned(),
        }
    }

    pub fn v1(&self, path: &str) -> String {
        format!("{}/v1{path}", self.url)
    }

    /// The process id, while it runs.
    pub fn pid(&self) -> Option<u32> {
        self.child.as_ref().map(Child::id)
    }

    /// Kills the process with SIGKILL, like a crash: nothing is flushed.
    pub fn kill(&mut self) {
        if let Some(mut child) = self.child.take() {
            let _ = child.kill();
            let _ = child.wait();
        }
    }

    /// Sends SIGTERM and waits for the process to exit; returns whether it exited successfully.
    pub fn stop(&mut self) -> bool {
        let Some(mut child) = self.child.take() else {
            return false;
        };
        let _ = Command::new("kill")
            .arg("-TERM")
            .arg(child.id().to_string())
            .status();
        for _ in 0..600 {
            if let Ok(Some(status)) = child.try_wait() {
                return status.success();
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = child.kill();
        false
    }
}

impl Gateway {
    /// Sends SIGTERM, and another one `between` later, as an operator pressing Ctrl-C twice;
    /// returns the exit status (none if it still runs 30 s after the second).
    pub fn stop_twice(&mut self, between: Duration) -> Option<std::process::ExitStatus> {
        let mut child = self.child.take()?;
        for _ in 0..2 {
            let _ = Command::new("kill")
                .arg("-TERM")
                .arg(child.id().to_string())
                .status();
            std::thread::sleep(between);
        }
        for _ in 0..600 {
            if let Ok(Some(status)) = child.try_wait() {
                return Some(status);
            }
            std::thread::sleep(Duration::from_millis(50));
        }
        let _ = child.kill();
        None
    }
}

impl Drop for Gateway {
    fn drop(&mut self) {
        if let Some(child) = self.child.as_mut() {
            terminate(child);
        }
    }
}

/// Runs `imagegate --data-dir DIR ARGS...` and returns its stdout; panics on failure.
pub fn admin(data_dir: &Path, args: &[&str]) -> String {
    admin_with_stdin(data_dir, args, "")
}

/// Like [`admin`], writing `stdin` to the command's standard input.
pub fn admin_with_stdin(data_dir: &Path, args: &[&str], stdin: &str) -> String {
    let out = admin_output(data_dir, args, stdin, &[]);
    assert!(
        out.status.success(),
        "imagegate {args:?} failed: {}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8_lossy(&out.stdout).into_owned()
}

/// Runs `imagegate --data-dir DIR ARGS...` with `stdin` and extra environment variables, whatever
/// its exit status. Of the `IMAGEGATE_*` variables only those given are passed on.
pub fn admin_output(data_dir: &Path, args: &[&str], stdin: &str, env: &[(&str, &str)]) -> Output {
    let mut child = imagegate_command()
        .arg("--data-dir")
        .arg(data_dir)
        .args(args)
        .env("IMAGEGATE_LOG", "warn")
        .envs(env.iter().copied())
        .stdin(Stdio::piped())
        .stdout(Stdio::piped())
        .stderr(Stdio::piped())
        .spawn()
        .expect("spawn imagegate admin");
    child
        .stdin
        .take()
        .expect("stdin")
        .write_all(stdin.as_bytes())
        .expect("write stdin");
    child.wait_with_output().expect("admin output")
}
