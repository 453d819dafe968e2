//! nginx as a reference relay for the image-sized scenarios: the same hop the gateway adds, made by
//! a mature C proxy that only streams bytes (`proxy_buffering off`, one worker, pinned to the
//! gateway's CPU). Its added latency is what relaying costs on this machine before any gateway
//! logic. Optional: the rows appear only when an `nginx` binary is installed (Debian: `nginx-light`).

use std::path::{Path, PathBuf};
use std::process::{Command, Stdio};
use std::time::{Duration, Instant};

use super::procs::{Proc, pinned};

/// An installed nginx that runs.
#[derive(Debug, Clone)]
pub struct Nginx {
    /// The binary.
    pub path: PathBuf,
    /// What `nginx -v` says, e.g. `nginx/1.22.1`.
    pub version: String,
}

/// The first nginx binary found that answers `nginx -v`.
pub fn find() -> Option<Nginx> {
    ["/usr/sbin/nginx", "/usr/bin/nginx", "/usr/local/sbin/nginx"]
        .iter()
        .map(PathBuf::from)
        .find_map(|path| {
            let output = Command::new(&path).arg("-v").output().ok()?;
            if !output.status.success() {
                return None;
            }
            // nginx prints its version on stderr.
            let version = String::from_utf8_lossy(&output.stderr)
                .split_whitespace()
                .find(|word| word.starts_with("nginx/"))
                .unwrap_or("nginx")
                .to_owned();
            Some(Nginx { path, version })
        })
}

/// A configuration relaying everything on `port` to `upstream` (a base URL such as
/// `http://127.0.0.1:1234`), with every file under `dir`.
pub fn config(upstream: &str, port: u16, dir: &Path) -> String {
    let dir = dir.display();
    let upstream = upstream.trim_start_matches("http://");
    format!(
        "worker_processes 1;
daemon off;
pid {dir}/nginx.pid;
error_log {dir}/nginx-error.log warn;
events {{ worker_connections 1024; }}
http {{
  access_log off;
  client_body_temp_path {dir}/client_body;
  proxy_temp_path {dir}/proxy;
  fastcgi_temp_path {dir}/fastcgi;
  uwsgi_temp_path {dir}/uwsgi;
  scgi_temp_path {dir}/scgi;
  upstream sim {{ server {upstream}; keepalive 128; }}
  server {{
    listen 127.0.0.1:{port};
    client_max_body_size 100m;
    location / {{
      proxy_pass http://sim;
      proxy_http_version 1.1;
      proxy_set_header Connection \"\";
      proxy_buffering off;
      proxy_request_buffering off;
      proxy_read_timeout 120s;
    }}
  }}
}}
"
    )
}

/// Starts nginx relaying to `upstream` on a free port; returns it and its base URL.
pub async fn start(
    nginx: &Path,
    dir: &Path,
    upstream: &str,
    port: u16,
    cpu: Option<usize>,
) -> Result<(Proc, String), String> {
    let dir = dir.join(format!("nginx-{port}"));
    std::fs::create_dir_all(&dir).map_err(|e| format!("{}: {e}", dir.display()))?;
    let conf = dir.join("nginx.conf");
    std::fs::write(&conf, config(upstream, port, &dir)).map_err(|e| format!("{}: {e}", conf.display()))?;
    let log = dir.join("stderr.log");
    let stderr = std::fs::File::create(&log).map_err(|e| format!("{}: {e}", log.display()))?;
    let mut command = pinned(nginx, cpu);
    command
        .arg("-p")
        .arg(&dir)
        .arg("-c")
        .arg(&conf)
        .stdin(Stdio::null())
        .stdout(Stdio::null())
        .stderr(stderr);
    let child = command.spawn().map_err(|e| format!("nginx: {e}"))?;
    let mut proc = Proc::wrap("nginx", child);
    let deadline = Instant::now() + Duration::from_secs(10);
    while Instant::now() < deadline {
        if tokio::net::TcpStream::connect(("127.0.0.1", port)).await.is_ok() {
            return Ok((proc, format!("http://127.0.0.1:{port}")));
        }
        if proc.exited() {
            break;
        }
        tokio::time::sleep(Duration::from_millis(50)).await;
    }
    Err(format!("nginx did not start listening (log: {})", log.display()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn config_streams_to_the_simulator_and_keeps_files_in_the_work_dir() {
        let conf = config("http://127.0.0.1:4321", 5678, Path::new("/tmp/w"));
        assert!(conf.contains("upstream sim { server 127.0.0.1:4321; keepalive 128; }"));
        assert!(conf.contains("listen 127.0.0.1:5678;"));
        assert!(conf.contains("proxy_buffering off;"));
        assert!(conf.contains("worker_processes 1;"));
        assert!(conf.contains("pid /tmp/w/nginx.pid;"));
        assert!(conf.contains("client_body_temp_path /tmp/w/client_body;"));
    }
}
