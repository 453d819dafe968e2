//! The local control file: how admin commands on this machine reach the running gateway.
//!
//! `imagegate serve` writes `gateway.json` (mode 0600) into the data directory with the address it
//! listens on and a random token for its `/internal/*` endpoints, and removes it on shutdown.
//! `imagegate accounts list` reads it to show the pool's live state next to the stored accounts.

use std::io::Write;
use std::net::SocketAddr;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

/// File name inside the data directory.
pub const FILE: &str = "gateway.json";

/// What the file holds.
#[derive(Debug, Clone, Serialize, Deserialize)]
pub struct ControlFile {
    /// `http://ADDR` of the running gateway.
    pub url: String,
    /// Bearer token for `/internal/*`.
    pub token: String,
}

/// A fresh random token (256 bits, hex).
pub fn new_token() -> String {
    let bytes: [u8; 32] = rand::random();
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

fn path(data_dir: &Path) -> PathBuf {
    data_dir.join(FILE)
}

/// Writes the control file readable by the owner only.
pub fn write(data_dir: &Path, addr: SocketAddr, token: &str) -> std::io::Result<()> {
    let connect = if addr.ip().is_unspecified() {
        SocketAddr::new(std::net::Ipv4Addr::LOCALHOST.into(), addr.port())
    } else {
        addr
    };
    let content = ControlFile {
        url: format!("http://{connect}"),
        token: token.to_owned(),
    };
    let text = serde_json::to_vec_pretty(&content).map_err(std::io::Error::other)?;
    let mut options = std::fs::OpenOptions::new();
    options.write(true).create(true).truncate(true);
    #[cfg(unix)]
    std::os::unix::fs::OpenOptionsExt::mode(&mut options, 0o600);
    let mut file = options.open(path(data_dir))?;
    // `mode` applies only when the file is created; an older file keeps its permissions otherwise.
    #[cfg(unix)]
    file.set_permissions(std::os::unix::fs::PermissionsExt::from_mode(0o600))?;
    file.write_all(&text)
}

/// Reads the control file, if a gateway left one.
pub fn read(data_dir: &Path) -> Option<ControlFile> {
    let text = std::fs::read(path(data_dir)).ok()?;
    serde_json::from_slice(&text).ok()
}

/// Removes the control file (at shutdown).
pub fn remove(data_dir: &Path) {
    let _ = std::fs::remove_file(path(data_dir));
}

/// Whether `presented` equals `expected`, in time independent of where they differ.
pub fn token_matches(presented: &str, expected: &str) -> bool {
    let (a, b) = (presented.as_bytes(), expected.as_bytes());
    a.len() == b.len() && a.iter().zip(b).fold(0u8, |acc, (x, y)| acc | (x ^ y)) == 0
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_file_round_trips_and_is_private() {
        let dir = tempfile::tempdir().unwrap();
        let token = new_token();
        assert_eq!(token.len(), 64);
        write(dir.path(), "0.0.0.0:8080".parse().unwrap(), &token).unwrap();
        let read_back = read(dir.path()).unwrap();
        assert_eq!(read_back.url, "http://127.0.0.1:8080");
        assert_eq!(read_back.token, token);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(dir.path().join(FILE))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        remove(dir.path());
        assert!(read(dir.path()).is_none());
    }

    #[test]
    fn tokens_compare_exactly() {
        assert!(token_matches("abc", "abc"));
        assert!(!token_matches("abd", "abc"));
        assert!(!token_matches("ab", "abc"));
    }
}
