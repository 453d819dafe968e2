//! Child processes of a benchmark run: the simulator, the gateway (and its admin CLI) and their
//! peak memory. Every process is pinned to a CPU with `taskset` when the machine has two or more.

use std::io::{BufRead as _, BufReader, Write as _};
use std::path::{Path, PathBuf};
use std::process::{Child, Command, Stdio};
use std::time::{Duration, Instant};

use super::scenarios::SIM_KEY;

/// CPU of the process under test: the gateway, LiteLLM or nginx.
pub const SERVER_CPU: usize = 0;
/// CPU of the load generator and the simulator.
pub const CLIENT_CPU: usize = 1;

/// A child process that is stopped when dropped.
#[derive(Debug)]
pub struct Proc {
    /// What it is, for messages.
    pub name: String,
    child: Child,
}

impl Proc {
    /// Takes charge of an already spawned child.
    pub fn wrap(name: &str, child: Child) -> Self {
        Self {
            name: name.to_owned(),
            child,
        }
    }

    /// Whether the process has ended.
    pub fn exited(&mut self) -> bool {
        matches!(self.child.try_wait(), Ok(Some(_)))
    }

    /// Process id.
    pub fn pid(&self) -> u32 {
        self.child.id()
    }

    /// Peak resident memory (`VmHWM`) of the process and its descendants, in bytes.
    pub fn peak_rss(&self) -> u64 {
        tree(self.pid()).iter().filter_map(|pid| vm_hwm(*pid)).sum()
    }

    /// SIGTERM, then SIGKILL after `grace`.
    pub fn stop(mut self, grace: Duration) {
        self.terminate(grace);
    }

    fn terminate(&mut self, grace: Duration) {
        if matches!(self.child.try_wait(), Ok(Some(_))) {
            return;
        }
        let _ = Command::new("kill")
            .args(["-TERM", &self.pid().to_string()])
            .status();
        let deadline = Instant::now() + grace;
        while Instant::now() < deadline {
            if matches!(self.child.try_wait(), Ok(Some(_))) {
                return;
            }
            std::thread::sleep(Duration::from_millis(20));
        }
        eprintln!("bench: {} ignored SIGTERM for {grace:?}; killing it", self.name);
        let _ = self.child.kill();
        let _ = self.child.wait();
    }
}

impl Drop for Proc {
    fn drop(&mut self) {
        self.terminate(Duration::from_secs(3));
    }
}

/// Whether CPUs can be assigned (two or more CPUs and `taskset` present).
pub fn can_pin() -> bool {
    std::thread::available_parallelism().is_ok_and(|n| n.get() >= 2)
        && Command::new("taskset")
            .arg("--version")
            .stdout(Stdio::null())
            .stderr(Stdio::null())
            .status()
            .is_ok_and(|s| s.success())
}

/// A command for `program`, run under `taskset -c cpu` when `pin` is set.
pub fn pinned(program: &Path, cpu: Option<usize>) -> Command {
    match cpu {
        Some(cpu) => {
            let mut command = Command::new("taskset");
            command.arg("-c").arg(cpu.to_string()).arg(program);
            command
        }
        None => Command::new(program),
    }
}

/// Pins every thread of this process (and so its future threads and children) to `cpu`.
pub fn pin_self(cpu: usize) -> Result<(), String> {
    let status = Command::new("taskset")
        .args([
            "-a",
            "-p",
            "-c",
            &cpu.to_string(),
            &std::process::id().to_string(),
        ])
        .stdout(Stdio::null())
        .status()
        .map_err(|e| format!("taskset: {e}"))?;
    if status.success() {
        Ok(())
    } else {
        Err(format!("taskset -p failed: {status}"))
    }
}

/// Spawns `command` with stdout piped and stderr to `log`, and waits (up to `timeout`) for a
/// stdout line containing `marker`; returns the process and the rest of that line after `marker`.
pub fn spawn_until(
    name: &str,
    mut command: Command,
    log: &Path,
    marker: &str,
    timeout: Duration,
) -> Result<(Proc, String), String> {
    let stderr = std::fs::File::create(log).map_err(|e| format!("{}: {e}", log.display()))?;
    let mut child = command
        .stdin(Stdio::null())
        .stdout(Stdio::piped())
        .stderr(stderr)
        .spawn()
        .map_err(|e| format!("{name}: {e}"))?;
    let stdout = child.stdout.take();
    let proc = Proc {
        name: name.to_owned(),
        child,
    };
    let Some(stdout) = stdout else {
        return Err(format!("{name}: no stdout"));
    };
    let (found, wait) = std::sync::mpsc::channel();
    let wanted = marker.to_owned();
    std::thread::spawn(move || {
        let mut sent = false;
        for line in BufReader::new(stdout).lines() {
            let Ok(line) = line else { break };
            if sent {
                continue;
            }
            if let Some(at) = line.find(&wanted) {
                let _ = found.send(line[at + wanted.len()..].trim().to_owned());
                sent = true;
            }
        }
    });
    match wait.recv_timeout(timeout) {
        Ok(rest) => Ok((proc, rest)),
        Err(_) => Err(format!(
            "{name} did not print {marker:?} within {timeout:?} (log: {})",
            log.display()
        )),
    }
}

/// Starts `imagegate-sim` on a free port; returns it and its base URL.
pub fn start_sim(bin: &Path, dir: &Path, tiny: bool, cpu: Option<usize>) -> Result<(Proc, String), String> {
    let mut command = pinned(&bin.join("imagegate-sim"), cpu);
    command.args(["--listen", "127.0.0.1:0"]);
    if tiny {
        command.arg("--tiny-images");
    }
    let name = match (tiny, cpu) {
        (true, Some(cpu)) => format!("sim-tiny-cpu{cpu}"),
        (false, Some(cpu)) => format!("sim-cpu{cpu}"),
        (true, None) => "sim-tiny".to_owned(),
        (false, None) => "sim".to_owned(),
    };
    let log = dir.join(format!("{name}.log"));
    spawn_until(&name, command, &log, "listening on ", Duration::from_secs(20))
}

/// A prepared gateway data directory: an account per simulator (groups `tiny` and `images`), a
/// user, and one key per group.
#[derive(Debug, Clone)]
pub struct GatewaySetup {
    /// `--data-dir`.
    pub data_dir: PathBuf,
    /// Key of group `tiny` (served by the tiny-image simulator).
    pub tiny_key: String,
    /// Key of group `images` (served by the full-size simulator).
    pub images_key: String,
}

/// Creates the data directory with the admin CLI of the `imagegate` binary.
pub fn setup_gateway(
    imagegate: &Path,
    dir: &Path,
    tiny_sim: &str,
    images_sim: &str,
) -> Result<GatewaySetup, String> {
    let data_dir = dir.join("gateway-data");
    let cli = |args: &[&str], stdin: Option<&str>| -> Result<String, String> {
        let mut command = Command::new(imagegate);
        command
            .arg("--data-dir")
            .arg(&data_dir)
            .args(args)
            .stdin(Stdio::piped())
            .stdout(Stdio::piped())
            .stderr(Stdio::piped());
        let mut child = command.spawn().map_err(|e| format!("imagegate {args:?}: {e}"))?;
        if let Some(mut pipe) = child.stdin.take() {
            let _ = pipe.write_all(stdin.unwrap_or("").as_bytes());
        }
        let output = child
            .wait_with_output()
            .map_err(|e| format!("imagegate {args:?}: {e}"))?;
        if output.status.success() {
            Ok(String::from_utf8_lossy(&output.stdout).trim().to_owned())
        } else {
            Err(format!(
                "imagegate {args:?}: {}",
                String::from_utf8_lossy(&output.stderr).trim()
            ))
        }
    };
    cli(&["users", "add", "bench"], None)?;
    for (group, sim) in [("tiny", tiny_sim), ("images", images_sim)] {
        cli(&["groups", "add", group], None)?;
        let base_url = format!("{sim}/v1");
        cli(
            &[
                "accounts",
                "add",
                "--name",
                group,
                "--kind",
                "openai",
                "--tier",
                "pro",
                "--groups",
                group,
                "--base-url",
                &base_url,
                "--concurrency-standard",
                "1000",
                "--concurrency-large",
                "1000",
            ],
            Some(&format!("{SIM_KEY}\n")),
        )?;
    }
    let key = |group: &str| cli(&["keys", "create", "--user", "bench", "--group", group], None);
    Ok(GatewaySetup {
        tiny_key: last_line(&key("tiny")?),
        images_key: last_line(&key("images")?),
        data_dir,
    })
}

fn last_line(text: &str) -> String {
    text.lines().last().unwrap_or("").trim().to_owned()
}

/// Starts the `imagegate` binary's `serve` on a free port with `setup`'s data directory.
pub fn start_gateway(
    imagegate: &Path,
    setup: &GatewaySetup,
    log: &Path,
    cpu: Option<usize>,
) -> Result<(Proc, String), String> {
    let mut command = pinned(imagegate, cpu);
    command
        .arg("--data-dir")
        .arg(&setup.data_dir)
        .args(["serve", "--listen", "127.0.0.1:0"]);
    spawn_until(
        "imagegate",
        command,
        log,
        "listening on ",
        Duration::from_secs(30),
    )
}

/// `pid` and all its descendants (from `/proc/*/stat`).
pub fn tree(pid: u32) -> Vec<u32> {
    let parents: Vec<(u32, u32)> = std::fs::read_dir("/proc")
        .map(|entries| {
            entries
                .flatten()
                .filter_map(|e| e.file_name().to_str()?.parse::<u32>().ok())
                .filter_map(|p| Some((p, parent_of(p)?)))
                .collect()
        })
        .unwrap_or_default();
    let mut found = vec![pid];
    let mut index = 0;
    while let Some(&current) = found.get(index) {
        found.extend(parents.iter().filter(|(_, pp)| *pp == current).map(|(p, _)| *p));
        index += 1;
    }
    found
}

fn parent_of(pid: u32) -> Option<u32> {
    let stat = std::fs::read_to_string(format!("/proc/{pid}/stat")).ok()?;
    // The command name may hold spaces; the fields after its closing parenthesis do not.
    let rest = &stat[stat.rfind(')')? + 1..];
    rest.split_whitespace().nth(1)?.parse().ok()
}

/// `VmHWM` of `pid` in bytes.
pub fn vm_hwm(pid: u32) -> Option<u64> {
    let status = std::fs::read_to_string(format!("/proc/{pid}/status")).ok()?;
    parse_vm_hwm(&status)
}

/// The `VmHWM:` line of a `/proc/<pid>/status` text, in bytes.
pub fn parse_vm_hwm(status: &str) -> Option<u64> {
    let line = status.lines().find(|l| l.starts_with("VmHWM:"))?;
    let kb: u64 = line.split_whitespace().nth(1)?.parse().ok()?;
    Some(kb * 1024)
}

/// A free TCP port on 127.0.0.1.
pub fn free_port() -> Result<u16, String> {
    std::net::TcpListener::bind("127.0.0.1:0")
        .and_then(|l| l.local_addr())
        .map(|a| a.port())
        .map_err(|e| format!("free port: {e}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn vm_hwm_is_read_in_bytes() {
        let status = "Name:\timagegate\nVmPeak:\t  200 kB\nVmHWM:\t   51200 kB\nVmRSS:\t 40000 kB\n";
        assert_eq!(parse_vm_hwm(status), Some(51_200 * 1024));
        assert_eq!(parse_vm_hwm("Name: x\n"), None);
    }

    #[test]
    fn this_process_has_a_peak_and_is_its_own_tree_root() {
        let me = std::process::id();
        assert!(vm_hwm(me).is_some_and(|b| b > 0));
        assert_eq!(tree(me).first(), Some(&me));
    }
}
