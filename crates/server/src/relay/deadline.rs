//! The upstream time budget of one client request, shared by all its tries: the failover loop's
//! accounts and the fallback ladder's rungs alike.

use std::time::Duration;

use tokio::time::Instant;

/// A request's upstream deadline. The clock starts with the first upstream call, not with a wait
/// for a free account, and every later try gets only what is left.
#[derive(Debug, Clone, Copy)]
pub struct Deadline {
    budget: Duration,
    began: Option<Instant>,
}

impl Deadline {
    /// A deadline of `budget`, not yet started.
    pub fn new(budget: Duration) -> Self {
        Self { budget, began: None }
    }

    /// Starts the clock if it has not started, and returns the time left.
    pub fn start(&mut self) -> Duration {
        let began = *self.began.get_or_insert_with(Instant::now);
        self.budget.saturating_sub(began.elapsed())
    }

    /// The whole budget.
    pub fn budget(&self) -> Duration {
        self.budget
    }

    /// Whether a try already started the clock (a later try gets less than the whole budget).
    pub fn started(&self) -> bool {
        self.began.is_some()
    }

    /// Whether the clock started and the whole budget is spent.
    pub fn passed(&self) -> bool {
        self.began.is_some_and(|began| began.elapsed() >= self.budget)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[tokio::test(start_paused = true)]
    async fn the_clock_starts_with_the_first_try_and_is_shared_by_the_next() {
        let mut deadline = Deadline::new(Duration::from_secs(10));
        tokio::time::sleep(Duration::from_secs(30)).await;
        assert!(!deadline.passed(), "waiting for a first try spends nothing");
        assert!(!deadline.started());
        assert_eq!(deadline.start(), Duration::from_secs(10));
        assert!(deadline.started());
        assert_eq!(deadline.budget(), Duration::from_secs(10));
        tokio::time::sleep(Duration::from_secs(4)).await;
        assert_eq!(deadline.start(), Duration::from_secs(6));
        assert!(!deadline.passed());
        tokio::time::sleep(Duration::from_secs(6)).await;
        assert!(deadline.passed());
        assert_eq!(deadline.start(), Duration::ZERO);
    }
}
