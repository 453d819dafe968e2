//! [`unique_name`]: names no other test, test process or earlier run uses.

use std::sync::atomic::{AtomicU32, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

/// `<stem>_<process id>_<nanoseconds of the current second>_<counter>`: unique within the process
/// (the counter) and, in practice, across processes and runs. Only ASCII digits and underscores
/// are added, so a name made from an identifier-like stem is a valid SQL identifier.
#[must_use]
pub fn unique_name(stem: &str) -> String {
    static COUNTER: AtomicU32 = AtomicU32::new(0);
    let nanos = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .unwrap_or_default()
        .subsec_nanos();
    format!(
        "{stem}_{}_{nanos}_{}",
        std::process::id(),
        COUNTER.fetch_add(1, Ordering::Relaxed)
    )
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn names_differ_and_keep_the_stem() {
        let first = unique_name("db");
        let second = unique_name("db");
        assert_ne!(first, second);
        assert!(first.starts_with("db_"));
        assert!(first.chars().all(|c| c.is_ascii_alphanumeric() || c == '_'));
    }
}
