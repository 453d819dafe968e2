//! The disk budget of edit uploads ([`DiskBudget`]): `[uploads] disk_budget_mb`, or by default
//! half the space free in the temporary directory's file system when the gateway starts, so
//! that uploads alone never fill the disk the database and the usage spool may share with them.

use std::path::Path;
use std::sync::Arc;

use imagegate_codec::multipart::DiskBudget;

/// The budget: `configured_mb` megabytes, else half of what is free in `dir` now; without bound
/// (but still counted, for `/metrics`) when neither is known.
pub fn budget(configured_mb: Option<u64>, dir: &Path) -> Arc<DiskBudget> {
    let bytes = match configured_mb {
        Some(mb) => mb.saturating_mul(1024 * 1024),
        None => match free_bytes(dir) {
            Some(free) => free / 2,
            None => {
                tracing::warn!(dir = %dir.display(), "the free space for uploads is not known: uploads on disk are not bounded; set [uploads] disk_budget_mb");
                return DiskBudget::new(u64::MAX);
            }
        },
    };
    tracing::info!(
        budget_mb = bytes / (1024 * 1024),
        dir = %dir.display(),
        "uploads kept on disk are bounded"
    );
    DiskBudget::new(bytes)
}

#[cfg(unix)]
fn free_bytes(dir: &Path) -> Option<u64> {
    let stats = rustix::fs::statvfs(dir).ok()?;
    Some(stats.f_bavail.saturating_mul(stats.f_frsize))
}

#[cfg(not(unix))]
fn free_bytes(_dir: &Path) -> Option<u64> {
    None
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_budget_is_the_configured_one_else_half_the_free_space() {
        let dir = std::env::temp_dir();
        let configured = budget(Some(3), &dir);
        assert_eq!(configured.limit(), 3 * 1024 * 1024);
        let free = free_bytes(&dir).unwrap();
        let default = budget(None, &dir);
        // The free space moves a little between the two readings.
        let half = free / 2;
        assert!(
            default.limit().abs_diff(half) < half / 10 + 1,
            "{} vs {half}",
            default.limit()
        );
    }
}
