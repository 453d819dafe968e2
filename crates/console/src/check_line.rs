//! The line that password checks wait in: a few run at once, and only so many may wait.
//!
//! A password check holds about 19 MiB for a few milliseconds, so only a few run together. Sign-ins
//! from many addresses, each within its own attempt limit, could still pile up behind them without
//! end, each holding a connection, and a real user's sign-in would wait behind them all. Past
//! [`CheckLine::new`]'s `max_waiting` the console answers "busy, try again" at once instead.

use std::sync::atomic::{AtomicUsize, Ordering};

use tokio::sync::{Semaphore, SemaphorePermit};

/// Checks running at once, and a bounded queue in front of them.
#[derive(Debug)]
pub(crate) struct CheckLine {
    running: Semaphore,
    waiting: AtomicUsize,
    max_waiting: usize,
}

/// A place in the line, given up when dropped (also when the waiting request is cancelled).
struct Place<'a>(&'a AtomicUsize);

impl Drop for Place<'_> {
    fn drop(&mut self) {
        self.0.fetch_sub(1, Ordering::AcqRel);
    }
}

impl CheckLine {
    /// `running` checks at once; at most `max_waiting` more wait for one of them to end.
    pub(crate) const fn new(running: usize, max_waiting: usize) -> Self {
        Self {
            running: Semaphore::const_new(running),
            waiting: AtomicUsize::new(0),
            max_waiting,
        }
    }

    /// Waits for a turn to check a password; `None` at once when the line is full.
    pub(crate) async fn enter(&self) -> Option<SemaphorePermit<'_>> {
        if let Ok(permit) = self.running.try_acquire() {
            return Some(permit);
        }
        let ahead = self.waiting.fetch_add(1, Ordering::AcqRel);
        let _place = Place(&self.waiting);
        if ahead >= self.max_waiting {
            return None;
        }
        // The semaphore is never closed, so this only ends with a permit.
        self.running.acquire().await.ok()
    }

    /// How many are waiting now.
    #[cfg(test)]
    fn waiting(&self) -> usize {
        self.waiting.load(Ordering::Acquire)
    }
}

#[cfg(test)]
mod tests {
    #![allow(clippy::unwrap_used, clippy::disallowed_methods)]

    use std::sync::Arc;

    use super::CheckLine;

    async fn until_waiting(line: &CheckLine, count: usize) {
        while line.waiting() != count {
            tokio::task::yield_now().await;
        }
    }

    #[tokio::test]
    async fn a_full_line_refuses_at_once_and_a_waiter_gets_the_next_turn() {
        let line = Arc::new(CheckLine::new(1, 1));
        let first = line.enter().await;
        assert!(first.is_some(), "a free turn is taken without waiting");
        let waiter = tokio::spawn({
            let line = Arc::clone(&line);
            async move { line.enter().await.is_some() }
        });
        until_waiting(&line, 1).await;
        assert!(line.enter().await.is_none(), "the line is full");
        assert_eq!(line.waiting(), 1, "a refused request leaves no place behind");
        drop(first);
        assert!(waiter.await.unwrap(), "the waiter gets the turn given back");
        assert_eq!(line.waiting(), 0);
        assert!(line.enter().await.is_some());
    }

    #[tokio::test]
    async fn a_waiter_that_leaves_frees_its_place() {
        let line = Arc::new(CheckLine::new(1, 1));
        let _running = line.enter().await.unwrap();
        let waiter = tokio::spawn({
            let line = Arc::clone(&line);
            async move { line.enter().await.is_some() }
        });
        until_waiting(&line, 1).await;
        waiter.abort();
        assert!(waiter.await.unwrap_err().is_cancelled());
        assert_eq!(line.waiting(), 0, "the cancelled request gave its place back");
        let next = tokio::spawn({
            let line = Arc::clone(&line);
            async move { line.enter().await.is_some() }
        });
        until_waiting(&line, 1).await;
        next.abort();
    }
}
