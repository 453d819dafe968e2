//! Slots freed by other replicas, heard as they happen.
//!
//! Every replica's lease releases are announced on one pub/sub channel under the prefix (the
//! message is the releasing replica's id: see [`super::release`]). A background task per
//! [`super::RedisPoolState`] listens on it and bumps a [`watch`] channel for every release made
//! elsewhere; the dispatcher wakes its waiting requests on each bump, so a slot freed on one
//! replica goes to the request that waited longest on another at once, not at its next poll.
//!
//! Pub/sub is best effort: a message sent while the listener is reconnecting is lost. After each
//! (re)subscription the task bumps once, and the dispatcher's poll remains the backstop. The
//! connection is pinged every [`super::RedisConfig::listener_ping_every`] (30 s), so one silently
//! dropped on the way (a firewall's idle timeout) is replaced. A user the server's ACL denies the channel never subscribes: its replica hears of
//! other replicas' releases only by polling, as before this channel existed.

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
    config: &super::RedisConfig,
    channel: String,
    replica: u64,
) -> Listener {
    let timing = Timing {
        connect_timeout: config.connect_timeout,
        // `interval` refuses a zero period and overflows on a huge one.
        ping_every: config
            .listener_ping_every
            .clamp(Duration::from_millis(1), LONGEST_PING_INTERVAL),
    };
    let (bump, freed) = watch::channel(());
    let (stop, stopped) = oneshot::channel();
    #[expect(
        clippy::disallowed_methods,
        reason = "ends when the returned Listener is dropped (its stop channel); it holds no work to wait for"
    )]
    tokio::spawn(async move {
        let subscribed = async {
            loop {
                // Ends when the connection does (or could not be made); the poll covers the gap.
                subscribe(&client, timing, &channel, replica, &bump).await;
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

/// The ping interval's ceiling: a day (a longer one would overflow the timer).
const LONGEST_PING_INTERVAL: Duration = Duration::from_secs(24 * 60 * 60);

/// How long to wait for the server, and how often to ask whether it is still there.
#[derive(Clone, Copy)]
struct Timing {
    connect_timeout: Duration,
    ping_every: Duration,
}

/// One subscription, until its connection ends or stops answering pings.
async fn subscribe(
    client: &redis::Client,
    Timing {
        connect_timeout,
        ping_every,
    }: Timing,
    channel: &str,
    replica: u64,
    bump: &watch::Sender<()>,
) {
    let Ok(Ok(mut pubsub)) = tokio::time::timeout(connect_timeout, client.get_async_pubsub()).await else {
        return;
    };
    let subscribed = tokio::time::timeout(connect_timeout, pubsub.subscribe(channel)).await;
    if !matches!(subscribed, Ok(Ok(()))) {
        return;
    }
    // Whatever was freed while not subscribed is worth a look.
    bump.send_replace(());
    let (mut sink, mut messages) = pubsub.split();
    // A quiet channel over a connection a firewall dropped would wait forever: a ping now and
    // then finds out, and the caller subscribes again.
    let mut check = tokio::time::interval(ping_every);
    check.tick().await;
    loop {
        tokio::select! {
            message = messages.next() => {
                let Some(message) = message else {
                    return;
                };
                if message.get_payload::<u64>().ok() != Some(replica) {
                    bump.send_replace(());
                }
            }
            _ = check.tick() => {
                let pong = tokio::time::timeout(connect_timeout, sink.ping::<redis::Value>()).await;
                if !matches!(pong, Ok(Ok(_))) {
                    return;
                }
            }
        }
    }
}
