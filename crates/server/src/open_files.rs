//! The serving process's limit of open files, raised at start from its soft value to its hard one.
//!
//! Every client connection, upstream connection and upload held on disk (up to 17 files an edit)
//! is an open file. Many systems start a process with a soft limit of 1024, which some sixty
//! concurrent edits reach: past it, accepting a connection or spilling an upload fails. The hard
//! limit is what the operator allows; the soft one is only a default, which a server may raise.

/// The soft limit when the hard one is unlimited (Linux's default `fs.nr_open`).
#[cfg(unix)]
const UNLIMITED_TARGET: u64 = 1 << 20;

/// Raises the soft `RLIMIT_NOFILE` to the hard limit, logging the change (or why not).
#[cfg(unix)]
pub fn raise() {
    use rustix::process::{Resource, Rlimit, getrlimit, setrlimit};
    let limit = getrlimit(Resource::Nofile);
    let target = limit.maximum.unwrap_or(UNLIMITED_TARGET);
    let Some(current) = limit.current.filter(|current| *current < target) else {
        return;
    };
    let raised = Rlimit {
        current: Some(target),
        maximum: limit.maximum,
    };
    match setrlimit(Resource::Nofile, raised) {
        Ok(()) => tracing::info!(from = current, to = target, "raised the open files limit"),
        Err(err) => tracing::warn!(limit = current, error = %err, "could not raise the open files limit"),
    }
}

/// Elsewhere the system's own default stays.
#[cfg(not(unix))]
pub fn raise() {}
