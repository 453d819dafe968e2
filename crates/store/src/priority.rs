//! [`WriterPriority`]: how the usage writer's database work competes with request handling for
//! the CPU.
//!
//! An embedded SQLite database does its work on the gateway's own CPUs, in the connection's
//! worker thread. A flush of 1,000 usage records is a few milliseconds of CPU, one run per INSERT
//! statement, and a worker thread woken by the flush preempts the thread serving requests: on one
//! CPU, every request in flight waits. So the SQLite backend keeps a second connection for usage
//! whose thread has Linux's `SCHED_BATCH` policy: a batch thread that wakes up does not preempt
//! the running thread, it waits for the next scheduling point, yet it keeps its fair share of
//! the CPU. Keeping that share, it still runs at each scheduler tick (4 ms here) until its work
//! sleeps, so each statement is kept short (`USAGE_ROWS_PER_STATEMENT` in the SQLite backend).
//!
//! Not `SCHED_IDLE`, which this module used first: an idle-policy thread gets no CPU while any
//! other thread wants it, and the connection's thread shares locks with the runtime (the
//! connection's channels, the runtime's wake-up queue). Preempted inside one of those while
//! another process kept the CPU busy, it held up the runtime thread until the CPU went idle:
//! 40-150 ms stalls of every request, measured with a process burning 20% of the gateway's CPU.
//! A batch thread is never starved, so such a wait lasts one scheduling slice at most.
//!
//! While records pile up the writer asks for [`WriterPriority::Normal`], and those batches go
//! through an ordinary connection, which competes like any other thread.

use std::sync::atomic::{AtomicBool, AtomicU64, Ordering};

/// How the usage writer's next batch should compete for the CPU (a hint; backends whose work runs
/// elsewhere, like PostgreSQL's server, ignore it).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default)]
pub enum WriterPriority {
    /// Without preempting request handling: the writer is keeping up.
    #[default]
    Background,
    /// Like any other thread: records are piling up and must not wait for an idle CPU.
    Normal,
}

/// The connections the usage writer's work goes through: a background pool when the backend has
/// one and [`WriterPriority::Background`] is asked for, the ordinary pool otherwise.
#[derive(Debug)]
pub(crate) struct UsageLane<DB: sqlx::Database> {
    /// One connection whose worker thread has the batch policy.
    background: Option<sqlx::Pool<DB>>,
    /// Whether the next batch goes to `background`.
    in_background: AtomicBool,
}

impl<DB: sqlx::Database> UsageLane<DB> {
    /// No background pool: everything goes through the ordinary one.
    pub(crate) fn ordinary() -> Self {
        Self {
            background: None,
            in_background: AtomicBool::new(false),
        }
    }

    /// Usage work goes to `background` until [`WriterPriority::Normal`] is asked for.
    pub(crate) fn with_background(background: sqlx::Pool<DB>) -> Self {
        Self {
            background: Some(background),
            in_background: AtomicBool::new(true),
        }
    }

    /// The pool for the next piece of usage work.
    pub(crate) fn pool<'a>(&'a self, ordinary: &'a sqlx::Pool<DB>) -> &'a sqlx::Pool<DB> {
        match &self.background {
            Some(background) if self.in_background.load(Ordering::Relaxed) => background,
            _ => ordinary,
        }
    }

    pub(crate) fn set(&self, priority: WriterPriority) {
        self.in_background
            .store(priority == WriterPriority::Background, Ordering::Relaxed);
    }

    pub(crate) async fn close(&self) {
        if let Some(background) = &self.background {
            background.close().await;
        }
    }
}

/// The worker thread of one SQLite connection, found by the name given to it at spawn.
#[derive(Debug, Default)]
pub(crate) struct NamedThread {
    /// The sqlx connection id in the thread's name, 0 before the thread exists.
    connection_id: AtomicU64,
}

impl NamedThread {
    /// The name of the worker thread of connection `id`, remembering the id.
    pub(crate) fn name(&self, id: u64) -> String {
        self.connection_id.store(id, Ordering::Relaxed);
        Self::name_of(id)
    }

    fn name_of(id: u64) -> String {
        format!("ig-usage-{id}")
    }

    /// Puts the thread under `SCHED_BATCH`. Returns whether it was found and changed.
    pub(crate) fn make_background(&self) -> bool {
        let id = self.connection_id.load(Ordering::Relaxed);
        if id == 0 {
            return false;
        }
        let mut name = Self::name_of(id);
        // The kernel keeps the first 15 bytes of a thread's name.
        name.truncate(15);
        let Some(tid) = os::thread_where(|comm| comm == name) else {
            return false;
        };
        match os::set_batch_policy(tid) {
            Ok(()) => true,
            Err(error) => {
                tracing::warn!(%error, "could not give the usage writer's thread the batch policy");
                false
            }
        }
    }
}

#[cfg(target_os = "linux")]
#[allow(
    unsafe_code,
    reason = "one syscall without a safe wrapper in rustix; see `set_batch_policy`"
)]
pub(crate) mod os {
    use std::io;

    /// The id of this process's first thread whose name satisfies `matches`, read from
    /// `/proc/self/task/*/comm`.
    pub(crate) fn thread_where(matches: impl Fn(&str) -> bool) -> Option<i32> {
        std::fs::read_dir("/proc/self/task")
            .ok()?
            .flatten()
            .find(|task| {
                std::fs::read_to_string(task.path().join("comm")).is_ok_and(|comm| matches(comm.trim_end()))
            })
            .and_then(|task| task.file_name().to_str()?.parse().ok())
    }

    /// `sched_setscheduler(tid, SCHED_BATCH)`. Allowed without privileges (the nice value stays).
    pub(crate) fn set_batch_policy(tid: i32) -> io::Result<()> {
        let param = libc::sched_param { sched_priority: 0 };
        // SAFETY: `param` is a valid `sched_param` that outlives the call, and the kernel only
        // reads it. A wrong `tid` makes the call fail (ESRCH) or changes another of our threads'
        // policy; neither touches memory.
        if unsafe { libc::sched_setscheduler(tid, libc::SCHED_BATCH, &param) } == 0 {
            Ok(())
        } else {
            Err(io::Error::last_os_error())
        }
    }

    /// The scheduling policy of thread `tid` (field 41 of `/proc/self/task/<tid>/stat`).
    #[cfg(test)]
    pub(crate) fn policy_of(tid: i32) -> Option<i32> {
        let stat = std::fs::read_to_string(format!("/proc/self/task/{tid}/stat")).ok()?;
        // The command name (field 2) is in parentheses and may hold spaces: count after it.
        let after_name = stat.rsplit_once(')')?.1;
        after_name.split_whitespace().nth(38)?.parse().ok()
    }
}

#[cfg(not(target_os = "linux"))]
pub(crate) mod os {
    use std::io;

    pub(crate) fn thread_where(_matches: impl Fn(&str) -> bool) -> Option<i32> {
        None
    }

    pub(crate) fn set_batch_policy(_tid: i32) -> io::Result<()> {
        Err(io::Error::from(io::ErrorKind::Unsupported))
    }
}
