//! Slots freed by other replicas, heard as they happen.
//!
//! Every replica's lease releases are announced on one pub/sub channel under the prefix (the
//! message is the releasing replica's id: see [`super::release`]). A background task per
//! [`super::RedisPoolState`] listens on it and bumps a [`watch`] channel for every release made
//! elsewhere; the dispatcher wakes its waiting requests on each bump, so a slot freed on one
//! replica goes to the request that waited longest on another at once, not at its next poll.
//!
//! Pub/sub is best effort: a message sent while the listener is reconnecting is lost. After each
//! (re)subscription the task bumps once, and the dispatcher's poll remains the backstop.

use std::time::Duration;

use futures::StreamExt;
use tokio::sync::{oneshot, watch};

/// Pause before subscribing again after the connection failed.
const RESUBSCRIBE_DELAY: Duration = Duration::from_millis(500);

/// The listening side: bumped for every release made elsewhere; the task ends when `stop` is
/// dropped.
pub(crate) struct Listener {
    pub(crate) freed: watch::Receiver<()>,
    pub(crate) stop: oneshot::Sender<()>,
}

/// Starts listening on `channel` for releases not made by `replica`, on the current runtime.
pub(crate) fn listen(
    client: redis::Client,
    connect_timeout: Duration,
    channel: String,
    replica: u64,
) -> Listener {
    let (bump, freed) = watch::channel(());
    let (stop, stopped) = oneshot::channel();
    tokio::spawn(async move {
        let subscribed = async {
            loop {
                // Ends when the connection does (or could not be made); the poll covers the gap.
                subscribe(&client, connect_timeout, &channel, replica, &bump).await;
                tokio::time::sleep(RESUBSCRIBE_DELAY).await;
            }
        };
        tokio::select! {
            () = subscribed => {}
            _ = stopped => {}
        }
    });
    Listener { freed, stop }
}

/// One subscription, until its connection ends.
async fn subscribe(
    client: &redis::Client,
    connect_timeout: Duration,
    channel: &str,
    replica: u64,
    bump: &watch::Sender<()>,
) {
    let Ok(Ok(mut pubsub)) = tokio::time::timeout(connect_timeout, client.get_async_pubsub()).await else {
        return;
    };
    if pubsub.subscribe(channel).await.is_err() {
        return;
    }
    // Whatever was freed while not subscribed is worth a look.
    bump.send_replace(());
    let mut messages = pubsub.on_message();
    while let Some(message) = messages.next().await {
        if message.get_payload::<u64>().ok() != Some(replica) {
            bump.send_replace(());
        }
    }
}
