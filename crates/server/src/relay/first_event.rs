//! Waiting, briefly, for a stream's first telling event before the client gets the headers.
//!
//! An upstream that accepts a streaming call and then fails before its first event (an `error`
//! event, a stream that ends at once) would otherwise reach the client as a 200 followed by an
//! error frame, past the point where another account can be tried. Holding the headers until the
//! first event, for at most a short wait, turns that into an ordinary failed call.
//!
//! A Responses stream opens with lifecycle events that carry no output (`response.created`,
//! `response.in_progress`, the image call's `added`, `in_progress` and `generating`), and a limit
//! met during the call fails it right after them (`response.failed`). Those events are held with
//! the headers, so such a failure is failed over too; nothing of them is lost when the wait ends.

use std::time::Duration;

use futures::StreamExt;
use imagegate_codec::sse::SseItem;
use imagegate_upstream::{Failure, Reply};

/// How much of a Responses stream's lifecycle events the wait holds before it gives up and relays:
/// a handful of them are a few kilobytes, so only an upstream repeating them without end gets
/// here, and its events must not pile up for the whole wait.
const HELD_LIFECYCLE_BYTES: usize = 1 << 20;

/// The wait for first events left to one request, over all its tries: streams that each fail after
/// a quiet while must not add up to more silence than one wait.
#[derive(Debug)]
pub struct FirstEventWait {
    left: Duration,
}

impl FirstEventWait {
    pub fn new(total: Duration) -> Self {
        Self { left: total }
    }

    /// [`settle`] within what is left of the wait, and spend what it took.
    pub async fn settle(&mut self, reply: Reply) -> Result<Reply, Failure> {
        let started = tokio::time::Instant::now();
        let settled = settle(reply, self.left).await;
        self.left = self.left.saturating_sub(started.elapsed());
        settled
    }
}

/// `reply` once its first telling event is in (it and the lifecycle events held before it are put
/// back in front of the rest), or once `wait` passed without one, or once the lifecycle events held
/// pass [`HELD_LIFECYCLE_BYTES`]; a stream whose items before it
/// end in a failure, or that ends first, is that failure. An event relayed in pieces tells once it
/// closes: an upstream failing halfway through its first image is failed over like one failing
/// before it (at the cost of holding that one image's pieces, and of its first bytes waiting for
/// its last). Other replies are returned as they are.
async fn settle(reply: Reply, wait: Duration) -> Result<Reply, Failure> {
    let Reply::Events(mut events) = reply else {
        return Ok(reply);
    };
    let until = tokio::time::Instant::now() + wait;
    let mut held = Vec::new();
    let mut held_lifecycle_bytes = 0usize;
    loop {
        // Dropping `next()` after the wait loses nothing: the stream keeps the event in progress.
        match tokio::time::timeout_at(until, events.next()).await {
            Err(_quiet) => break,
            Ok(Some(Ok(event))) => {
                let telling = !is_lifecycle(&event);
                if let SseItem::Event(whole) = &event {
                    held_lifecycle_bytes = held_lifecycle_bytes.saturating_add(whole.data.len());
                }
                held.push(Ok(event));
                if telling || held_lifecycle_bytes > HELD_LIFECYCLE_BYTES {
                    break;
                }
            }
            Ok(Some(Err(failure))) => return Err(failure),
            Ok(None) => {
                return Err(Failure::transient(
                    "the upstream stream ended before its first event",
                ));
            }
        }
    }
    Ok(Reply::Events(futures::stream::iter(held).chain(events).boxed()))
}

/// A Responses event that says the call goes on but carries no output yet, or an event relayed in
/// pieces that has not closed yet.
fn is_lifecycle(item: &SseItem) -> bool {
    let SseItem::Event(event) = item else {
        return !matches!(item, SseItem::Closed);
    };
    matches!(
        event.event.as_deref(),
        Some(
            "response.created"
                | "response.in_progress"
                | "response.output_item.added"
                | "response.image_generation_call.in_progress"
                | "response.image_generation_call.generating"
        )
    )
}

#[cfg(test)]
mod tests {
    use futures::stream;
    use imagegate_codec::sse::SseEvent;
    use imagegate_upstream::FailureKind;

    use super::*;

    fn event(name: &str) -> SseItem {
        SseItem::Event(SseEvent {
            event: Some(name.to_owned()),
            data: "{}".to_owned(),
            id: None,
        })
    }

    async fn names(reply: Reply) -> Vec<String> {
        let Reply::Events(events) = reply else {
            panic!("not a stream: {reply:?}");
        };
        events
            .map(|item| match item {
                Ok(SseItem::Event(event)) => event.event.unwrap_or_default(),
                Ok(SseItem::Opened { event, .. }) => format!("opened {event}"),
                Ok(SseItem::Data(piece)) => format!("{} bytes", piece.len()),
                Ok(SseItem::Closed) => "closed".to_owned(),
                Err(failure) => format!("failure: {}", failure.message),
            })
            .collect()
            .await
    }

    fn opened_image() -> [Result<SseItem, Failure>; 2] {
        [
            Ok(SseItem::Opened {
                event: "image_generation.partial_image".to_owned(),
                id: None,
            }),
            Ok(SseItem::Data(bytes::Bytes::from_static(b"{\"b64_json\":\"AAAA"))),
        ]
    }

    #[tokio::test(start_paused = true)]
    async fn an_event_relayed_in_pieces_tells_once_it_closes() {
        let slow_rest = stream::once(async {
            tokio::time::sleep(Duration::from_secs(1)).await;
            Ok(SseItem::Closed)
        });
        let events = stream::iter(opened_image())
            .chain(slow_rest)
            .chain(stream::iter([Ok(event("next"))]))
            .boxed();
        let started = tokio::time::Instant::now();
        let reply = settle(Reply::Events(events), Duration::from_secs(5))
            .await
            .unwrap();
        assert_eq!(
            started.elapsed(),
            Duration::from_secs(1),
            "settled when it closed"
        );
        assert_eq!(
            names(reply).await,
            [
                "opened image_generation.partial_image",
                "17 bytes",
                "closed",
                "next"
            ]
        );
    }

    #[tokio::test(start_paused = true)]
    async fn endless_lifecycle_events_are_relayed_instead_of_held_for_the_whole_wait() {
        let big = |name: &str| {
            SseItem::Event(SseEvent {
                event: Some(name.to_owned()),
                data: "x".repeat(64 * 1024),
                id: None,
            })
        };
        // 2.5 MiB of them, then silence (as good as endless for the wait).
        let lifecycle = std::iter::repeat_with(move || big("response.in_progress")).take(40);
        let endless = stream::iter(lifecycle.map(Ok)).chain(stream::pending());
        let started = tokio::time::Instant::now();
        let reply = settle(Reply::Events(endless.boxed()), Duration::from_secs(10))
            .await
            .unwrap();
        assert_eq!(started.elapsed(), Duration::ZERO, "not held for the wait");
        let Reply::Events(events) = reply else {
            panic!("not a stream");
        };
        let first: Vec<_> = events.take(20).collect().await;
        assert!(first.iter().all(Result::is_ok));

        // A few small lifecycle events are still held until the wait ends.
        let quiet = stream::iter([Ok(event("response.created"))]).chain(stream::pending());
        let reply = settle(Reply::Events(quiet.boxed()), Duration::from_secs(10))
            .await
            .unwrap();
        assert_eq!(started.elapsed(), Duration::from_secs(10));
        assert!(matches!(reply, Reply::Events(_)));
    }

    #[tokio::test]
    async fn a_stream_failing_inside_its_first_image_is_a_failed_call() {
        let events = stream::iter(opened_image())
            .chain(stream::iter([Err(Failure::new(FailureKind::Transient, "reset"))]))
            .boxed();
        let failure = settle(Reply::Events(events), Duration::from_secs(5))
            .await
            .unwrap_err();
        assert_eq!(failure.message, "reset", "failed over, not relayed");
    }

    #[tokio::test]
    async fn a_stream_failing_before_its_first_event_is_a_failed_call() {
        let events = stream::iter([Err(Failure::new(FailureKind::Transient, "boom"))]).boxed();
        let failure = settle(Reply::Events(events), Duration::from_secs(5))
            .await
            .unwrap_err();
        assert_eq!(failure.kind, FailureKind::Transient);
        assert_eq!(failure.message, "boom");
    }

    #[tokio::test]
    async fn a_stream_ending_before_any_event_is_a_transient_failure() {
        let events = stream::empty().boxed();
        let failure = settle(Reply::Events(events), Duration::from_secs(5))
            .await
            .unwrap_err();
        assert_eq!(failure.kind, FailureKind::Transient);
    }

    #[tokio::test]
    async fn the_first_event_is_kept_in_front_of_the_rest() {
        let events = stream::iter([
            Ok(event("a")),
            Ok(event("b")),
            Err(Failure::new(FailureKind::Transient, "late")),
        ])
        .boxed();
        let reply = settle(Reply::Events(events), Duration::from_secs(5))
            .await
            .unwrap();
        assert_eq!(names(reply).await, ["a", "b", "failure: late"]);
    }

    #[tokio::test(start_paused = true)]
    async fn a_quiet_stream_is_answered_after_the_wait_and_loses_nothing() {
        let slow = stream::once(async {
            tokio::time::sleep(Duration::from_secs(60)).await;
            Ok(event("late"))
        });
        let events = slow.chain(stream::iter([Ok(event("next"))])).boxed();
        let started = tokio::time::Instant::now();
        let reply = settle(Reply::Events(events), Duration::from_secs(2))
            .await
            .unwrap();
        assert_eq!(started.elapsed(), Duration::from_secs(2));
        assert_eq!(names(reply).await, ["late", "next"]);
    }

    #[tokio::test(start_paused = true)]
    async fn one_wait_covers_every_try_of_a_request() {
        let quiet = || {
            let never = stream::once(async {
                tokio::time::sleep(Duration::from_secs(60)).await;
                Ok(event("late"))
            });
            Reply::Events(never.boxed())
        };
        let mut wait = FirstEventWait::new(Duration::from_secs(2));
        let started = tokio::time::Instant::now();
        assert!(wait.settle(quiet()).await.is_ok());
        assert!(wait.settle(quiet()).await.is_ok());
        assert_eq!(
            started.elapsed(),
            Duration::from_secs(2),
            "the second try found the wait spent"
        );
    }

    const LIFECYCLE: [&str; 5] = [
        "response.created",
        "response.in_progress",
        "response.output_item.added",
        "response.image_generation_call.in_progress",
        "response.image_generation_call.generating",
    ];

    #[tokio::test]
    async fn a_responses_stream_failing_after_its_lifecycle_events_is_a_failed_call() {
        let limited = Failure::new(
            FailureKind::RateLimited {
                reset_at_unix_ms: None,
                images_only: false,
            },
            "limited",
        );
        let events = stream::iter(LIFECYCLE.map(event))
            .map(Ok)
            .chain(stream::iter([Err(limited)]))
            .boxed();
        let failure = settle(Reply::Events(events), Duration::from_secs(5))
            .await
            .unwrap_err();
        assert_eq!(failure.message, "limited");
    }

    #[tokio::test]
    async fn lifecycle_events_are_held_until_the_first_telling_one_and_kept_in_order() {
        let events = stream::iter(LIFECYCLE.map(event))
            .map(Ok)
            .chain(stream::iter([
                Ok(event("response.image_generation_call.partial_image")),
                Err(Failure::new(FailureKind::Transient, "late")),
            ]))
            .boxed();
        let reply = settle(Reply::Events(events), Duration::from_secs(5))
            .await
            .unwrap();
        let mut expected: Vec<String> = LIFECYCLE.iter().map(|n| (*n).to_owned()).collect();
        expected.push("response.image_generation_call.partial_image".to_owned());
        expected.push("failure: late".to_owned());
        assert_eq!(names(reply).await, expected);
    }

    #[tokio::test(start_paused = true)]
    async fn lifecycle_events_are_answered_after_the_wait_and_nothing_is_lost() {
        let slow = stream::once(async {
            tokio::time::sleep(Duration::from_secs(60)).await;
            Ok(event("response.completed"))
        });
        let events = stream::iter([Ok(event("response.created")), Ok(event("response.in_progress"))])
            .chain(slow)
            .boxed();
        let started = tokio::time::Instant::now();
        let reply = settle(Reply::Events(events), Duration::from_secs(2))
            .await
            .unwrap();
        assert_eq!(started.elapsed(), Duration::from_secs(2));
        assert_eq!(
            names(reply).await,
            ["response.created", "response.in_progress", "response.completed"]
        );
    }

    #[tokio::test]
    async fn other_replies_pass_untouched() {
        let reply = Reply::Json {
            body: bytes::Bytes::from_static(b"{}"),
            request_id: None,
            summary: None,
        };
        let settled = settle(reply, Duration::ZERO).await.unwrap();
        assert!(matches!(settled, Reply::Json { .. }));
    }
}
