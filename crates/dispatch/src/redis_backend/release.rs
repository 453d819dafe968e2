//! Releases queued from `Drop` and sent to Redis without blocking the caller.
//!
//! A release is a `ZREM` of one member (lease id or permit token) from one sorted set. The owner's
//! next script call takes the whole queue along (so the owner sees its own releases at once); a
//! background task sends what is left. A queue of account leases also announces each batch it
//! applied on a channel, so requests waiting on other replicas try again at once (see
//! [`super::freed`]). When Redis cannot be reached the task retries a little
//! later; past [`MAX_PENDING`] queued releases the oldest are dropped, and their slots come back
//! when their TTL runs out, exactly as for a replica that crashed.

use std::sync::atomic::{AtomicBool, Ordering};
use std::sync::{Arc, Mutex, MutexGuard, PoisonError};
use std::time::Duration;

use redis::aio::ConnectionManager;
use redis::{ToRedisArgs, pipe};
use tokio::sync::Notify;

/// Most releases kept while Redis is unreachable.
pub(crate) const MAX_PENDING: usize = 65_536;

/// Pause before resending releases after a failure.
const RETRY_DELAY: Duration = Duration::from_millis(250);

/// One member to remove from one sorted set.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Release {
    pub(crate) set: String,
    pub(crate) member: u64,
}

/// Where applied releases are announced: a pub/sub channel, and this replica's id as the message
/// (its own subscriber ignores it: the releasing replica woke its waiters already).
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct Announce {
    pub(crate) channel: String,
    pub(crate) replica: u64,
}

/// Releases waiting to be sent.
#[derive(Debug, Default)]
pub(crate) struct ReleaseQueue {
    pending: Mutex<Vec<Release>>,
    wake: Notify,
    closed: AtomicBool,
    announce: Option<Announce>,
}

impl ReleaseQueue {
    /// A queue with its background sender running on the current Tokio runtime, announcing the
    /// batches it applies on `announce`'s channel, if any.
    pub(crate) fn start(connection: ConnectionManager, announce: Option<Announce>) -> Arc<Self> {
        let queue = Arc::new(Self {
            announce,
            ..Self::default()
        });
        #[expect(
            clippy::disallowed_methods,
            reason = "the queue's own sender: it ends when the queue is closed, after sending what is pending"
        )]
        tokio::spawn(send_loop(Arc::clone(&queue), connection));
        queue
    }

    fn lock(&self) -> MutexGuard<'_, Vec<Release>> {
        // Pushing and draining a Vec cannot leave it inconsistent.
        self.pending.lock().unwrap_or_else(PoisonError::into_inner)
    }

    /// Queues a release; never blocks on I/O.
    pub(crate) fn push(&self, release: Release) {
        let mut pending = self.lock();
        if pending.len() >= MAX_PENDING {
            pending.remove(0);
        }
        pending.push(release);
        drop(pending);
        self.wake.notify_one();
    }

    /// Takes every queued release (the caller sends them or gives them back).
    pub(crate) fn take(&self) -> Vec<Release> {
        std::mem::take(&mut *self.lock())
    }

    /// Takes every queued release for a script call; unless [`TakenReleases::sent`] confirms they
    /// reached Redis, they go back to the queue when the batch is dropped (also when the call's
    /// future is cancelled half-way).
    pub(crate) fn take_for_call(self: &Arc<Self>) -> TakenReleases {
        TakenReleases {
            queue: Arc::clone(self),
            releases: self.take(),
        }
    }

    /// Puts back releases that could not be sent, ahead of newer ones, within the bound.
    pub(crate) fn give_back(&self, mut releases: Vec<Release>) {
        if releases.is_empty() {
            return;
        }
        let mut pending = self.lock();
        releases.append(&mut pending);
        let excess = releases.len().saturating_sub(MAX_PENDING);
        releases.drain(..excess);
        *pending = releases;
        drop(pending);
        self.wake.notify_one();
    }

    /// Stops the background sender once it has sent what is queued (one attempt).
    pub(crate) fn close(&self) {
        self.closed.store(true, Ordering::SeqCst);
        self.wake.notify_one();
    }

    #[cfg(test)]
    pub(crate) fn len(&self) -> usize {
        self.lock().len()
    }
}

/// Releases taken along with a script call.
#[derive(Debug)]
pub(crate) struct TakenReleases {
    queue: Arc<ReleaseQueue>,
    releases: Vec<Release>,
}

impl TakenReleases {
    /// The releases to send.
    #[cfg(test)]
    pub(crate) fn releases(&self) -> &[Release] {
        &self.releases
    }

    /// Appends the releases to a script's arguments: their count, the (set, member) pairs, then
    /// the channel to announce them on (empty: none) and this replica's id. A script applying
    /// at least one publishes the id on the channel.
    pub(crate) fn push_args(&self, invocation: &mut redis::ScriptInvocation<'_>) {
        push_args(invocation, &self.releases, self.queue.announce.as_ref());
    }

    /// The script ran: the releases are applied.
    pub(crate) fn sent(&mut self) {
        self.releases.clear();
    }
}

impl Drop for TakenReleases {
    fn drop(&mut self) {
        // Maybe applied already: removing a member twice is harmless.
        self.queue.give_back(std::mem::take(&mut self.releases));
    }
}

/// Appends releases to a script's arguments (see [`TakenReleases::push_args`]).
fn push_args(
    invocation: &mut redis::ScriptInvocation<'_>,
    releases: &[Release],
    announce: Option<&Announce>,
) {
    invocation.arg(releases.len());
    for release in releases {
        invocation.arg(&release.set).arg(release.member);
    }
    match announce {
        Some(announce) => invocation.arg(&announce.channel).arg(announce.replica),
        None => invocation.arg("").arg(0),
    };
}

/// Writes a release as `ZREM set member` into a pipeline.
fn add_to(pipeline: &mut redis::Pipeline, release: &Release) {
    pipeline
        .cmd("ZREM")
        .arg(release.set.to_redis_args())
        .arg(release.member)
        .ignore();
}

async fn send_loop(queue: Arc<ReleaseQueue>, mut connection: ConnectionManager) {
    loop {
        let batch = queue.take();
        let closing = queue.closed.load(Ordering::SeqCst);
        if batch.is_empty() {
            if closing {
                return;
            }
            queue.wake.notified().await;
            continue;
        }
        let mut pipeline = pipe();
        for release in &batch {
            add_to(&mut pipeline, release);
        }
        let sent = pipeline.exec_async(&mut connection).await;
        if sent.is_ok()
            && let Some(announce) = &queue.announce
        {
            // On its own, after the releases: a user the server's ACL denies the channel must
            // still get its releases through (waiters elsewhere then see them at their next poll).
            let _unheard: redis::RedisResult<()> = redis::cmd("PUBLISH")
                .arg(&announce.channel)
                .arg(announce.replica)
                .exec_async(&mut connection)
                .await;
        }
        if sent.is_err() {
            if closing {
                // The owner is gone: the TTL frees what could not be sent.
                return;
            }
            queue.give_back(batch);
            tokio::time::sleep(RETRY_DELAY).await;
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn release(member: u64) -> Release {
        Release {
            set: "s".to_owned(),
            member,
        }
    }

    #[test]
    fn releases_taken_for_a_call_come_back_unless_sent() {
        let queue = Arc::new(ReleaseQueue::default());
        queue.push(release(1));
        let taken = queue.take_for_call();
        assert_eq!(taken.releases(), &[release(1)]);
        assert_eq!(queue.len(), 0);
        drop(taken);
        assert_eq!(queue.take(), vec![release(1)], "an unsent batch is queued again");
        queue.push(release(2));
        let mut taken = queue.take_for_call();
        taken.sent();
        drop(taken);
        assert_eq!(queue.len(), 0);
    }

    #[test]
    fn the_queue_is_bounded_and_keeps_order() {
        let queue = ReleaseQueue::default();
        for member in 0..(MAX_PENDING as u64 + 3) {
            queue.push(release(member));
        }
        assert_eq!(queue.len(), MAX_PENDING);
        let taken = queue.take();
        assert_eq!(taken.first(), Some(&release(3)), "the oldest were dropped");
        assert_eq!(queue.len(), 0);
        queue.push(release(u64::MAX));
        queue.give_back(taken);
        let all = queue.take();
        assert_eq!(
            all.len(),
            MAX_PENDING,
            "given-back releases stay within the bound"
        );
        assert_eq!(all.last(), Some(&release(u64::MAX)), "newer releases stay last");
    }
}
