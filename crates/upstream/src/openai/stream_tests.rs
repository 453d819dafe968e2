use super::*;
use crate::failure::FailureKind;
use futures::stream;
use std::time::Duration;
use tokio::time::Instant;

fn deadline_in(budget: Duration) -> Deadline {
    Deadline {
        at: Instant::now() + budget,
        budget,
    }
}

fn chunks(parts: &[&str]) -> BoxStream<'static, Result<Bytes, Failure>> {
    let owned: Vec<Result<Bytes, Failure>> = parts.iter().map(|p| Ok(Bytes::from(p.to_string()))).collect();
    stream::iter(owned).boxed()
}

async fn collect(
    body: BoxStream<'static, Result<Bytes, Failure>>,
    endpoint: Endpoint,
) -> Vec<Result<SseEvent, Failure>> {
    let deadline = Duration::from_secs(60);
    crate::reply::joined_events(relay_chunks(body, endpoint, 1, deadline_in(deadline)))
        .collect()
        .await
}

fn event(name: &str, data: &str) -> SseEvent {
    SseEvent {
        event: Some(name.to_owned()),
        data: data.to_owned(),
        id: None,
    }
}

#[tokio::test]
async fn events_split_across_chunks_arrive_in_order() {
    let partial = r#"{"type":"image_generation.partial_image","b64_json":"AAAA","partial_image_index":0}"#;
    let done = r#"{"type":"image_generation.completed","b64_json":"BBBB"}"#;
    let text = format!(
        ": keepalive\n\nevent: image_generation.partial_image\ndata: {partial}\n\nevent: image_generation.completed\r\ndata: {done}\r\n\r\n"
    );
    let (a, b) = text.split_at(40);
    let (b, c) = b.split_at(70);
    let items = collect(chunks(&[a, b, c]), Endpoint::Generations).await;
    let events: Vec<SseEvent> = items.into_iter().map(Result::unwrap).collect();
    assert_eq!(
        events,
        vec![
            event("image_generation.partial_image", partial),
            event("image_generation.completed", done)
        ]
    );
}

#[tokio::test]
async fn a_stream_without_final_event_ends_with_a_transient_failure() {
    let items = collect(
        chunks(&["event: image_edit.partial_image\ndata: {}\n\n"]),
        Endpoint::Edits,
    )
    .await;
    assert_eq!(items.len(), 2);
    assert!(items[0].is_ok());
    let failure = items[1].as_ref().unwrap_err();
    assert_eq!(failure.kind, FailureKind::Transient);
    assert!(failure.message.contains("ended before its final event"));
}

#[tokio::test]
async fn the_final_event_depends_on_the_endpoint() {
    let body = "event: image_generation.completed\ndata: {}\n\n";
    assert!(
        collect(chunks(&[body]), Endpoint::Generations)
            .await
            .iter()
            .all(Result::is_ok)
    );
    let items = collect(chunks(&[body]), Endpoint::Edits).await;
    assert!(items.last().unwrap().is_err());
    let responses = "data: {\"type\":\"response.failed\",\"response\":{\"error\":{\"code\":\"x\"}}}\n\n";
    let items = collect(chunks(&[responses]), Endpoint::Responses).await;
    assert_eq!(items.len(), 1);
    assert!(
        items[0].is_ok(),
        "response.failed is relayed as an event, not an error"
    );
}

#[tokio::test]
async fn error_events_end_the_stream_as_failures() {
    let images = "event: error\ndata: {\"error\":{\"message\":\"Your request was rejected by the safety system.\",\"type\":\"image_generation_user_error\",\"param\":null,\"code\":\"moderation_blocked\"}}\n\nevent: image_generation.completed\ndata: {}\n\n";
    let items = collect(chunks(&[images]), Endpoint::Generations).await;
    assert_eq!(items.len(), 1);
    let failure = items[0].as_ref().unwrap_err();
    assert_eq!(failure.kind, FailureKind::Refused);
    assert_eq!(
        failure.client_error().message,
        "Upstream request failed: the content was refused. Your request was rejected by the safety system."
    );

    let responses = "data: {\"type\":\"error\",\"code\":\"server_error\",\"message\":\"boom\",\"param\":null,\"sequence_number\":3}\n\n";
    let items = collect(chunks(&[responses]), Endpoint::Responses).await;
    assert_eq!(items.len(), 1);
    assert_eq!(items[0].as_ref().unwrap_err().kind, FailureKind::Transient);

    let unnamed = "data: {\"error\":{\"message\":\"slow down\",\"type\":\"requests\",\"code\":\"rate_limit_exceeded\"}}\n\n";
    let items = collect(chunks(&[unnamed]), Endpoint::Generations).await;
    assert!(matches!(
        items[0].as_ref().unwrap_err().kind,
        FailureKind::RateLimited { .. }
    ));
}

#[tokio::test]
async fn done_sentinel_ends_the_stream_without_being_relayed() {
    let body = "event: image_generation.completed\ndata: {}\n\ndata: [DONE]\n\ndata: {\"late\":1}\n\n";
    let items = collect(chunks(&[body]), Endpoint::Generations).await;
    assert_eq!(items.len(), 1);
    assert_eq!(
        items[0].as_ref().unwrap().event.as_deref(),
        Some("image_generation.completed")
    );
}

#[tokio::test]
async fn done_sentinel_before_any_final_event_is_a_transient_failure() {
    // A `[DONE]` that comes before the image would otherwise end a truncated answer as if it
    // were complete: the client's SDK stops iterating, and the account is credited a success.
    let body = "event: image_generation.partial_image\ndata: {}\n\ndata: [DONE]\n\n";
    let items = collect(chunks(&[body]), Endpoint::Generations).await;
    assert_eq!(items.len(), 2, "{items:?}");
    assert!(items[0].is_ok());
    let failure = items[1].as_ref().unwrap_err();
    assert_eq!(failure.kind, FailureKind::Transient);
    assert!(failure.message.contains("before its final event"), "{failure:?}");

    let responses = "data: {\"type\":\"response.created\"}\n\ndata: [DONE]\n\n";
    let items = collect(chunks(&[responses]), Endpoint::Responses).await;
    assert_eq!(items.len(), 2, "{items:?}");
    assert_eq!(items[1].as_ref().unwrap_err().kind, FailureKind::Transient);
}

#[tokio::test]
async fn done_sentinel_after_some_of_several_finals_ends_quietly() {
    // As the end of the body does: once a final event was relayed, the client has an image.
    let body = "event: image_generation.completed\ndata: {}\n\ndata: [DONE]\n\n";
    let deadline = deadline_in(Duration::from_secs(60));
    let items: Vec<_> =
        crate::reply::joined_events(relay_chunks(chunks(&[body]), Endpoint::Generations, 2, deadline))
            .collect()
            .await;
    assert_eq!(items.len(), 1, "{items:?}");
    assert!(items[0].is_ok());
}

#[tokio::test]
async fn a_body_error_mid_stream_is_the_last_item() {
    let body = stream::iter(vec![
        Ok(Bytes::from_static(
            b"event: image_generation.partial_image\ndata: {}\n\n",
        )),
        Err(Failure::transient("the connection to the upstream failed: reset")),
        Ok(Bytes::from_static(
            b"event: image_generation.completed\ndata: {}\n\n",
        )),
    ])
    .boxed();
    let items = collect(body, Endpoint::Generations).await;
    assert_eq!(items.len(), 2);
    assert_eq!(
        items[1].as_ref().unwrap_err().message,
        "the connection to the upstream failed: reset"
    );
}

#[tokio::test(start_paused = true)]
async fn the_deadline_ends_a_silent_stream() {
    let first = stream::iter(vec![Ok(Bytes::from_static(
        b"event: image_generation.partial_image\ndata: {}\n\n",
    ))]);
    let body = first.chain(stream::pending()).boxed();
    let deadline = Duration::from_secs(5);
    let items: Vec<_> = relay_chunks(body, Endpoint::Generations, 1, deadline_in(deadline))
        .collect()
        .await;
    assert_eq!(items.len(), 2);
    assert_eq!(items[1].as_ref().unwrap_err().kind, FailureKind::Timeout);
}

#[tokio::test(start_paused = true)]
async fn the_stream_ends_after_the_expected_final_events_even_if_the_body_stays_open() {
    let frames = "event: image_generation.completed\ndata: {\"i\":0}\n\nevent: image_generation.completed\ndata: {\"i\":1}\n\n";
    let body = stream::iter(vec![Ok(Bytes::from_static(frames.as_bytes()))])
        .chain(stream::pending())
        .boxed();
    let deadline = Duration::from_secs(600);
    let started = Instant::now();
    let items: Vec<_> = relay_chunks(body, Endpoint::Generations, 2, deadline_in(deadline))
        .collect()
        .await;
    assert_eq!(items.len(), 2);
    assert!(items.iter().all(Result::is_ok));
    assert_eq!(started.elapsed(), Duration::ZERO, "no wait for the body to end");
}

#[tokio::test(start_paused = true)]
async fn after_a_final_event_the_deadline_ends_the_stream_quietly() {
    let frames = "event: image_generation.completed\ndata: {\"i\":0}\n\n";
    let body = stream::iter(vec![Ok(Bytes::from_static(frames.as_bytes()))])
        .chain(stream::pending())
        .boxed();
    let deadline = Duration::from_secs(5);
    let items: Vec<_> = relay_chunks(body, Endpoint::Generations, 3, deadline_in(deadline))
        .collect()
        .await;
    assert_eq!(items.len(), 1);
    assert!(items[0].is_ok());
}

/// Three partial images and the completed event, each arriving 10 ms after it is asked for (a
/// prompt upstream held back only by flow control).
fn paced_body() -> BoxStream<'static, Result<Bytes, Failure>> {
    let mut frames: Vec<String> = (0..3)
        .map(|i| format!("event: image_generation.partial_image\ndata: {{\"i\":{i}}}\n\n"))
        .collect();
    frames.push("event: image_generation.completed\ndata: {\"i\":3}\n\n".to_owned());
    stream::iter(frames)
        .then(|frame| async move {
            tokio::time::sleep(Duration::from_millis(10)).await;
            Ok(Bytes::from(frame))
        })
        .boxed()
}

/// Relays [`paced_body`] under a 5 s deadline to a client that takes `pause` with each event.
async fn relay_to_a_client_pausing(pause: Duration) -> Vec<Result<SseEvent, Failure>> {
    let mut events = crate::reply::joined_events(relay_chunks(
        paced_body(),
        Endpoint::Generations,
        1,
        deadline_in(Duration::from_secs(5)),
    ));
    let mut items = Vec::new();
    while let Some(item) = events.next().await {
        items.push(item);
        tokio::time::sleep(pause).await;
    }
    items
}

#[tokio::test(start_paused = true)]
async fn a_client_slower_than_the_deadline_does_not_time_the_upstream_out() {
    // 4 x 2 s with the client: past the 5 s deadline, but the upstream took 40 ms of it.
    let items = relay_to_a_client_pausing(Duration::from_secs(2)).await;
    assert_eq!(items.len(), 4, "{items:?}");
    assert!(items.iter().all(Result::is_ok), "{items:?}");
}

#[tokio::test(start_paused = true)]
async fn a_client_holding_the_stream_past_its_own_budget_is_too_slow() {
    // 6 s with the client after each event: by the third read the client has held the stream
    // for 12 s, past the 5 + 5 s the call allows.
    let items = relay_to_a_client_pausing(Duration::from_secs(6)).await;
    assert_eq!(items.len(), 3, "{items:?}");
    assert!(items[..2].iter().all(Result::is_ok));
    assert_eq!(items[2].as_ref().unwrap_err().kind, FailureKind::ClientTooSlow);
}

#[tokio::test]
async fn a_responses_stream_failing_on_a_rate_limit_is_a_failure_of_the_account() {
    let failed = r#"{"type":"response.failed","sequence_number":2,"response":{"status":"failed","error":{"code":"rate_limit_exceeded","message":"Rate limit reached. Please try again in 20s."}}}"#;
    let frames = format!(
        "event: response.created\ndata: {{\"type\":\"response.created\",\"sequence_number\":0}}\n\n\
         event: response.in_progress\ndata: {{\"type\":\"response.in_progress\",\"sequence_number\":1}}\n\n\
         event: response.failed\ndata: {failed}\n\n"
    );
    let items = collect(chunks(&[&frames]), Endpoint::Responses).await;
    assert_eq!(items.len(), 3, "{items:?}");
    assert!(items[..2].iter().all(Result::is_ok));
    let failure = items[2].as_ref().unwrap_err();
    assert!(
        matches!(
            failure.kind,
            FailureKind::RateLimited {
                reset_at_unix_ms: Some(_),
                ..
            }
        ),
        "{failure:?}"
    );
    let kept = failure.final_event.as_deref().unwrap();
    assert_eq!(kept.event.as_deref(), Some("response.failed"));
    assert_eq!(
        kept.data, failed,
        "the event itself, for a client that has the headers"
    );
}

#[tokio::test]
async fn a_responses_stream_failing_for_the_request_ends_with_its_final_event() {
    let failed = r#"{"type":"response.failed","sequence_number":1,"response":{"status":"failed","error":{"code":"image_content_policy_violation","message":"Rejected."}}}"#;
    let frames = format!(
        "event: response.created\ndata: {{\"type\":\"response.created\",\"sequence_number\":0}}\n\n\
         event: response.failed\ndata: {failed}\n\n"
    );
    let items = collect(chunks(&[&frames]), Endpoint::Responses).await;
    assert_eq!(items.len(), 2, "{items:?}");
    assert_eq!(
        items[1].as_ref().unwrap().event.as_deref(),
        Some("response.failed")
    );
}

#[tokio::test]
async fn a_responses_stream_failing_on_a_server_error_is_a_failure_of_the_account() {
    let failed = r#"{"type":"response.failed","sequence_number":1,"response":{"status":"failed","error":{"code":"server_error","message":"The model failed."}}}"#;
    let frames = format!(
        "event: response.created\ndata: {{\"type\":\"response.created\",\"sequence_number\":0}}\n\n\
         event: response.failed\ndata: {failed}\n\n"
    );
    let items = collect(chunks(&[&frames]), Endpoint::Responses).await;
    assert_eq!(items.len(), 2, "{items:?}");
    let failure = items[1].as_ref().unwrap_err();
    assert_eq!(failure.kind, FailureKind::Transient, "{failure:?}");
    let kept = failure.final_event.as_deref().unwrap();
    assert_eq!(
        kept.data, failed,
        "the event itself, for a client that has the headers"
    );
    // An error code the gateway does not know is the request's, as a refusal is.
    let unknown = failed.replace("server_error", "invalid_prompt");
    let frames = format!("event: response.failed\ndata: {unknown}\n\n");
    let items = collect(chunks(&[&frames]), Endpoint::Responses).await;
    assert_eq!(items.len(), 1, "{items:?}");
    assert_eq!(items[0].as_ref().unwrap().data, unknown);
}

/// An Images event whose base64 is `image_bytes` long, split into its head, its middle and its end.
fn large_event(name: &str, image_bytes: usize) -> (String, String) {
    let data = format!(
        r#"{{"type":"{name}","b64_json":"{}","usage":{{"total_tokens":7}}}}"#,
        "A".repeat(image_bytes)
    );
    (format!("event: {name}\ndata: {data}\n\n"), data)
}

#[tokio::test]
async fn a_large_image_event_is_relayed_in_pieces_as_it_arrives() {
    let (partial, partial_data) = large_event("image_generation.partial_image", STREAM_EVENTS_OVER * 2);
    let (done, done_data) = large_event("image_generation.completed", STREAM_EVENTS_OVER * 2);
    let text = format!("{partial}{done}event: after\ndata: {{}}\n\n");
    let parts: Vec<&str> = text
        .as_bytes()
        .chunks(STREAM_EVENTS_OVER / 2)
        .map(|piece| std::str::from_utf8(piece).unwrap())
        .collect();
    let items: Vec<SseItem> = relay_chunks(
        chunks(&parts),
        Endpoint::Generations,
        1,
        deadline_in(Duration::from_secs(60)),
    )
    .map(Result::unwrap)
    .collect()
    .await;
    let largest_piece = items
        .iter()
        .filter_map(|item| match item {
            SseItem::Data(piece) => Some(piece.len()),
            _ => None,
        })
        .max()
        .unwrap();
    assert!(
        largest_piece <= STREAM_EVENTS_OVER * 2,
        "no piece holds a whole image: {largest_piece}"
    );
    let names: Vec<&str> = items
        .iter()
        .filter_map(|item| match item {
            SseItem::Opened { event, .. } => Some(event.as_str()),
            SseItem::Closed => Some("closed"),
            SseItem::Event(_) => Some("whole"),
            SseItem::Data(_) => None,
        })
        .collect();
    assert_eq!(
        names,
        [
            "image_generation.partial_image",
            "closed",
            "image_generation.completed",
            "closed"
        ],
        "both come in pieces, and the final one ends the stream"
    );
    let joined: Vec<SseEvent> = crate::reply::joined_events(stream::iter(items.into_iter().map(Ok)).boxed())
        .map(Result::unwrap)
        .collect()
        .await;
    assert_eq!(
        joined,
        vec![
            event("image_generation.partial_image", &partial_data),
            event("image_generation.completed", &done_data)
        ]
    );
}

#[tokio::test]
async fn a_stream_ending_inside_an_open_event_fails_even_after_a_final_one() {
    let (done, _) = large_event("image_generation.completed", STREAM_EVENTS_OVER * 2);
    let (second, _) = large_event("image_generation.completed", STREAM_EVENTS_OVER * 2);
    let cut = &second[..second.len() / 2];
    let items: Vec<Result<SseItem, Failure>> = relay_chunks(
        chunks(&[done.as_str(), cut]),
        Endpoint::Generations,
        2,
        deadline_in(Duration::from_secs(60)),
    )
    .collect()
    .await;
    let last = items.last().unwrap();
    assert!(
        matches!(last, Err(failure) if failure.kind == FailureKind::Transient),
        "{:?}",
        last.as_ref().err()
    );
    assert!(
        matches!(items.get(items.len() - 2), Some(Ok(SseItem::Data(_)))),
        "the failure follows a piece of the open event"
    );
}

#[tokio::test]
async fn errors_and_responses_events_stay_whole_however_large() {
    let (error, _) = large_event("error", STREAM_EVENTS_OVER * 2);
    let items = collect(chunks(&[error.as_str()]), Endpoint::Generations).await;
    assert!(
        matches!(&items[..], [Err(_)]),
        "the error event was read whole and classified"
    );
    let (completed, completed_data) = large_event("response.completed", STREAM_EVENTS_OVER * 2);
    let items: Vec<Result<SseItem, Failure>> = relay_chunks(
        chunks(&[&completed[..100], &completed[100..]]),
        Endpoint::Responses,
        1,
        deadline_in(Duration::from_secs(60)),
    )
    .collect()
    .await;
    assert!(
        matches!(&items[..], [Ok(SseItem::Event(event))] if event.data == completed_data),
        "a Responses event comes whole"
    );
}
