//! Deterministic skill packages: same files in, same zip bytes out.
//!
//! Entries are the skill's files (no directory entries) under `<name>/`, in byte order of their relative
//! paths, each with the timestamp 1980-01-01 00:00:00, mode 0644 (0755 when the file is executable),
//! Deflate compression and no extra fields. Junk files (`.DS_Store`, `__pycache__`, ...) are skipped;
//! symbolic links are refused.

use std::io::{Cursor, Write};
use std::path::{Path, PathBuf};

use zip::write::SimpleFileOptions;
use zip::{CompressionMethod, DateTime, ZipWriter};

use super::GenerateError;
use crate::package::is_junk;

/// Pack the skill folder `folder` as `<name>/...` into zip bytes.
///
/// # Errors
///
/// I/O errors, a symbolic link inside the folder, or a file name that is not UTF-8.
pub fn pack_skill(folder: &Path, name: &str) -> Result<Vec<u8>, GenerateError> {
    let mut files = Vec::new();
    collect(folder, folder, &mut files)?;
    files.sort();
    let mut writer = ZipWriter::new(Cursor::new(Vec::new()));
    for (relative, path) in files {
        let bytes = std::fs::read(&path).map_err(|source| GenerateError::Io {
            path: path.clone(),
            source,
        })?;
        let options = SimpleFileOptions::default()
            .compression_method(CompressionMethod::Deflated)
            .last_modified_time(DateTime::default())
            .unix_permissions(if is_executable(&path) { 0o755 } else { 0o644 });
        let entry = format!("{name}/{relative}");
        writer
            .start_file(entry.as_str(), options)
            .map_err(|e| GenerateError::Zip(e.to_string()))?;
        writer
            .write_all(&bytes)
            .map_err(|source| GenerateError::Io { path, source })?;
    }
    let cursor = writer.finish().map_err(|e| GenerateError::Zip(e.to_string()))?;
    Ok(cursor.into_inner())
}

/// Every regular file under `dir` as (path relative to `base` with `/`, full path).
fn collect(base: &Path, dir: &Path, files: &mut Vec<(String, PathBuf)>) -> Result<(), GenerateError> {
    let io = |source| GenerateError::Io {
        path: dir.to_owned(),
        source,
    };
    for entry in std::fs::read_dir(dir).map_err(io)? {
        let entry = entry.map_err(io)?;
        let path = entry.path();
        let kind = entry.file_type().map_err(io)?;
        let relative = path
            .strip_prefix(base)
            .ok()
            .and_then(|p| p.to_str())
            .map(|p| p.replace(std::path::MAIN_SEPARATOR, "/"))
            .ok_or_else(|| GenerateError::Skill {
                path: path.clone(),
                message: "the file name is not UTF-8".to_owned(),
            })?;
        if is_junk(&relative) {
            continue;
        }
        if kind.is_symlink() {
            return Err(GenerateError::Skill {
                path,
                message: "symbolic links cannot be packed; copy the file into the skill".to_owned(),
            });
        }
        if kind.is_dir() {
            collect(base, &path, files)?;
        } else if kind.is_file() {
            files.push((relative, path));
        }
    }
    Ok(())
}

#[cfg(unix)]
fn is_executable(path: &Path) -> bool {
    use std::os::unix::fs::PermissionsExt;
    std::fs::metadata(path).is_ok_and(|m| m.permissions().mode() & 0o111 != 0)
}

#[cfg(not(unix))]
fn is_executable(_path: &Path) -> bool {
    false
}
