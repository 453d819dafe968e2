//! Files of the checkout, resolved before they are opened: inside the checkout and regular files only,
//! so a symbolic link cannot make the checker read outside the checkout and a FIFO cannot block it.

use std::fs::File;
use std::path::{Path, PathBuf};

use sha2::{Digest, Sha256};

use crate::package;

/// The end of the message for a path that a symbolic link leads out of the checkout.
pub(super) const OUTSIDE: &str = "leads outside the checkout through a symbolic link";

/// Why a path in the checkout cannot be used.
#[derive(Debug)]
pub(super) enum Unusable {
    /// It does not exist or cannot be resolved.
    Missing(std::io::Error),
    /// Resolved, it lies outside the checkout, at this place.
    Outside(PathBuf),
}

/// The canonical form of `path` when it exists and lies inside `base` (itself canonical).
pub(super) fn resolve(base: &Path, path: &Path) -> Result<PathBuf, Unusable> {
    match path.canonicalize() {
        Err(why) => Err(Unusable::Missing(why)),
        Ok(real) if !real.starts_with(base) => Err(Unusable::Outside(real)),
        Ok(real) => Ok(real),
    }
}

/// What `path` is, for a finding about a path that is not what it should be: `a folder`, `a file`, or
/// `not a regular file or folder` (a FIFO, a socket, a device).
pub(super) fn kind(path: &Path) -> &'static str {
    if path.is_dir() {
        "a folder"
    } else if path.is_file() {
        "a file"
    } else {
        "not a regular file or folder"
    }
}

/// Read all of the regular file `file`, refusing more than `limit` bytes.
pub(super) fn read_bounded(file: &Path, limit: u64) -> Result<Vec<u8>, String> {
    File::open(file)
        .map_err(|e| e.to_string())
        .and_then(|f| package::read_limited(f, limit))
}

/// Length and SHA-256 of a file, streamed.
pub(crate) fn hash_file(file: &Path) -> std::io::Result<(u64, String)> {
    let mut hasher = Sha256::new();
    let length = std::io::copy(&mut File::open(file)?, &mut hasher)?;
    Ok((length, hex::encode(hasher.finalize())))
}
