#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

mod support;

use futures::StreamExt;
use imagegate_codec::sse::{
    KEEPALIVE, MAX_ID_BYTES, SseDecoder, SseError, SseEvent, SseItem, decode_stream, encode_comment,
    encode_event,
};
use proptest::prelude::*;
use serde_json::{Value, json};

fn decode_all(chunks: &[&[u8]]) -> Vec<SseEvent> {
    let mut decoder = SseDecoder::new();
    let mut events = Vec::new();
    for chunk in chunks {
        decoder.push(chunk).unwrap();
        while let Some(event) = decoder.pop() {
            events.push(event);
        }
    }
    events
}

fn event(name: Option<&str>, data: &str) -> SseEvent {
    SseEvent {
        event: name.map(str::to_owned),
        data: data.to_owned(),
        id: None,
    }
}

#[test]
fn encoder_writes_event_line_one_data_line_and_blank_line() {
    let frame = encode_event(
        "image_generation.completed",
        &json!({"type": "image_generation.completed", "a": "x\ny"}),
    );
    assert_eq!(
        &frame[..],
        b"event: image_generation.completed\ndata: {\"a\":\"x\\ny\",\"type\":\"image_generation.completed\"}\n\n"
    );
}

#[test]
fn encoder_strips_line_breaks_from_the_event_name() {
    let frame = encode_event("bad\r\nname", &json!(1));
    assert_eq!(&frame[..], b"event: badname\ndata: 1\n\n");
}

#[test]
fn comment_frames_are_ignored_by_the_decoder() {
    assert_eq!(KEEPALIVE, b": keepalive\n\n");
    assert_eq!(&encode_comment("a\nb")[..], b": a b\n\n");
    let mut decoder = SseDecoder::new();
    decoder.push(KEEPALIVE).unwrap();
    decoder.push(&encode_comment("still working")).unwrap();
    assert_eq!(decoder.pop(), None);
    assert_eq!(decoder.comments_seen(), 2);
    assert!(decoder.is_idle());
}

#[test]
fn decoder_accepts_lf_cr_and_crlf_line_ends() {
    for ending in ["\n", "\r", "\r\n"] {
        let text = format!("event: a{ending}data: 1{ending}{ending}data: 2{ending}{ending}");
        let events = decode_all(&[text.as_bytes()]);
        assert_eq!(
            events,
            vec![event(Some("a"), "1"), event(None, "2")],
            "ending {ending:?}"
        );
    }
}

#[test]
fn crlf_split_between_cr_and_lf_is_one_line_end() {
    let events = decode_all(&[b"data: 1\r", b"\ndata: 2\r", b"\n\r", b"\n"]);
    assert_eq!(events, vec![event(None, "1\n2")]);
}

#[test]
fn cr_at_chunk_end_followed_by_other_text_still_ends_the_line() {
    let events = decode_all(&[b"data: 1\r", b"\r", b"data: 2\r\r"]);
    assert_eq!(events, vec![event(None, "1"), event(None, "2")]);
}

#[test]
fn multi_line_data_is_joined_with_newlines() {
    let events = decode_all(&[b"event: x\ndata: first\ndata:second\ndata\n\n"]);
    assert_eq!(events, vec![event(Some("x"), "first\nsecond\n")]);
}

#[test]
fn only_one_leading_space_is_removed_and_colons_in_values_are_kept() {
    let events = decode_all(&[b"data:  two spaces: yes\n\n"]);
    assert_eq!(events, vec![event(None, " two spaces: yes")]);
}

#[test]
fn events_without_data_are_dropped_and_reset_the_event_name() {
    let events = decode_all(&[b"event: lonely\n\ndata: after\n\n"]);
    assert_eq!(events, vec![event(None, "after")]);
}

#[test]
fn ids_persist_and_retry_is_read_and_unknown_fields_are_ignored() {
    let mut decoder = SseDecoder::new();
    decoder
        .push(b"id: 7\nretry: 1500\nfoo: bar\ndata: a\n\ndata: b\n\nretry: x\n")
        .unwrap();
    let first = decoder.pop().unwrap();
    let second = decoder.pop().unwrap();
    assert_eq!(first.id.as_deref(), Some("7"));
    assert_eq!(second.id.as_deref(), Some("7"));
    assert_eq!(second.data, "b");
    assert_eq!(decoder.retry_ms(), Some(1500));
}

#[test]
fn an_over_long_id_is_ignored_instead_of_copied_into_every_event() {
    let long = "i".repeat(MAX_ID_BYTES + 1);
    let kept = "k".repeat(MAX_ID_BYTES);
    let mut decoder = SseDecoder::new();
    let text = format!("id: 7\ndata: a\n\nid: {long}\ndata: b\n\nid: {kept}\ndata: c\n\n");
    decoder.push(text.as_bytes()).unwrap();
    let ids: Vec<Option<String>> = std::iter::from_fn(|| decoder.pop()).map(|e| e.id).collect();
    assert_eq!(ids, vec![Some("7".to_owned()), Some("7".to_owned()), Some(kept)]);
}

#[test]
fn a_leading_byte_order_mark_is_skipped() {
    let events = decode_all(&[b"\xEF\xBB", b"\xBFdata: x\n\n"]);
    assert_eq!(events, vec![event(None, "x")]);
}

#[test]
fn a_stream_cut_inside_an_event_is_not_idle_and_dispatches_nothing() {
    let mut decoder = SseDecoder::new();
    decoder.push(b"event: a\ndata: {\"partial\"").unwrap();
    assert_eq!(decoder.pop(), None);
    assert!(!decoder.is_idle());
}

#[test]
fn an_oversized_event_is_refused() {
    let mut decoder = SseDecoder::with_max_event_bytes(16);
    assert_eq!(
        decoder.push(b"data: 0123456789abcdef0123\n"),
        Err(SseError::EventTooLarge { limit: 16 })
    );
    let mut decoder = SseDecoder::with_max_event_bytes(16);
    assert_eq!(
        decoder.push(b"data: 0123456789abcdef0123"),
        Err(SseError::EventTooLarge { limit: 16 })
    );
}

#[tokio::test]
async fn decode_stream_reads_a_chunked_body() {
    let mut body = Vec::new();
    body.extend_from_slice(&encode_event("a", &json!({"n": 1})));
    body.extend_from_slice(KEEPALIVE);
    body.extend_from_slice(&encode_event("b", &json!({"n": 2})));
    body.extend_from_slice(b"data: trailing without blank line");
    let events: Vec<_> = decode_stream(support::chunked(body, 3)).collect().await;
    let events: Vec<SseEvent> = events.into_iter().map(Result::unwrap).collect();
    assert_eq!(
        events,
        vec![event(Some("a"), r#"{"n":1}"#), event(Some("b"), r#"{"n":2}"#)]
    );
}

fn json_value() -> impl Strategy<Value = Value> {
    let leaf = prop_oneof![
        Just(Value::Null),
        any::<bool>().prop_map(Value::from),
        any::<i64>().prop_map(Value::from),
        "\\PC{0,12}".prop_map(Value::from),
        prop::sample::select(vec![
            "line\nbreak",
            "cr\rhere",
            "crlf\r\n",
            ": colon",
            "\u{feff}bom"
        ])
        .prop_map(Value::from),
    ];
    leaf.prop_recursive(3, 24, 4, |inner| {
        prop_oneof![
            prop::collection::vec(inner.clone(), 0..4).prop_map(Value::from),
            prop::collection::btree_map("[a-z_]{1,8}", inner, 0..4)
                .prop_map(|map| Value::Object(map.into_iter().collect())),
        ]
    })
}

proptest! {
    #[test]
    fn encode_then_decode_round_trips_with_any_chunking(
        events in prop::collection::vec(("[a-z_.]{1,24}", json_value(), any::<bool>()), 0..8),
        cuts in prop::collection::vec(0.0f64..1.0, 0..24),
        ending in prop::sample::select(vec!["\n", "\r", "\r\n"]),
    ) {
        let mut stream = Vec::new();
        for (name, data, keepalive) in &events {
            if *keepalive {
                stream.extend_from_slice(KEEPALIVE);
            }
            stream.extend_from_slice(&encode_event(name, data));
        }
        // The encoder writes LF; the decoder must read the same events with any line ending.
        let text = String::from_utf8(stream).unwrap().replace('\n', ending);
        let cuts: Vec<usize> = cuts.iter().map(|at| (at * text.len() as f64) as usize).collect();
        let pieces = support::split_at_points(text.as_bytes(), &cuts);
        let refs: Vec<&[u8]> = pieces.iter().map(Vec::as_slice).collect();
        let decoded = decode_all(&refs);
        prop_assert_eq!(decoded.len(), events.len());
        for (got, (name, data, _)) in decoded.iter().zip(&events) {
            prop_assert_eq!(got.event.as_deref(), Some(name.as_str()));
            let parsed: Value = serde_json::from_str(&got.data).unwrap();
            prop_assert_eq!(&parsed, data);
        }
    }
}

/// Pieces of event-stream text, valid or not, that a byte stream is made of.
fn stream_piece() -> impl Strategy<Value = Vec<u8>> {
    prop_oneof![
        prop::sample::select(vec![
            &b"data:"[..],
            b"data: ",
            b"data",
            b"datum: ",
            b"event: ",
            b"id: ",
            b"retry: 5",
            b": ",
            b"\n",
            b"\r",
            b"\r\n",
            b"\n\n",
            b"\xef\xbb\xbf",
            b"\xff",
            b"\xe2\x82",
            b"\xe2\x82\xac",
        ])
        .prop_map(<[u8]>::to_vec),
        "[a-z{}\":, ]{0,12}".prop_map(String::into_bytes),
    ]
}

proptest! {
    /// Lines whose value goes straight into the event's data as it arrives (a chunk ending inside a
    /// `data` line) must decode exactly as when each line arrives whole.
    #[test]
    fn any_chunking_of_any_bytes_decodes_like_the_whole(
        pieces in prop::collection::vec(stream_piece(), 0..40),
        cuts in prop::collection::vec(0.0f64..1.0, 0..24),
    ) {
        let bytes = pieces.concat();
        let mut whole = SseDecoder::new();
        whole.push(&bytes).unwrap();
        let mut expected = Vec::new();
        while let Some(event) = whole.pop() {
            expected.push(event);
        }
        let cuts: Vec<usize> = cuts.iter().map(|at| (at * bytes.len() as f64) as usize).collect();
        let chunks = support::split_at_points(&bytes, &cuts);
        let mut chunked = SseDecoder::new();
        let mut decoded = Vec::new();
        for chunk in &chunks {
            chunked.push(chunk).unwrap();
            while let Some(event) = chunked.pop() {
                decoded.push(event);
            }
        }
        prop_assert_eq!(decoded, expected);
        prop_assert_eq!(chunked.is_idle(), whole.is_idle());
        prop_assert_eq!(chunked.retry_ms(), whole.retry_ms());
    }
}

#[test]
fn a_data_line_arriving_in_pieces_is_one_value() {
    let chunks: [&[u8]; 6] = [
        b"event: e\nda",
        b"ta",
        b": ab",
        b"c\xe2\x82",
        b"\xac\r",
        b"\ndata:x\n\n",
    ];
    assert_eq!(decode_all(&chunks), vec![event(Some("e"), "abc\u{20ac}\nx")]);
    // A stream cut in the middle of a data line was cut in the middle of an event.
    let mut decoder = SseDecoder::new();
    decoder.push(b": comment\ndata: unfinished").unwrap();
    assert!(!decoder.is_idle());
}

/// Events and pieces of large events joined back into events (`event` and `data` only).
fn join_items(items: Vec<SseItem>) -> Vec<(Option<String>, String)> {
    let mut events = Vec::new();
    let mut open: Option<(String, Vec<u8>)> = None;
    for item in items {
        match item {
            SseItem::Event(event) => events.push((event.event, event.data)),
            SseItem::Opened { event, .. } => {
                assert!(open.is_none(), "opened twice");
                open = Some((event, Vec::new()));
            }
            SseItem::Data(piece) => open
                .as_mut()
                .expect("data of no event")
                .1
                .extend_from_slice(&piece),
            SseItem::Closed => {
                let (name, data) = open.take().expect("closed no event");
                events.push((Some(name), String::from_utf8_lossy(&data).into_owned()));
            }
        }
    }
    assert!(open.is_none(), "an event left open");
    events
}

/// One event of a stream: its type, its data lines, and its line end.
fn stream_event() -> impl Strategy<Value = Vec<u8>> {
    (
        prop::option::of(prop::sample::select(vec![
            "image_generation.partial_image",
            "error",
            "x",
        ])),
        prop::collection::vec("[a-z0-9+/={}\":, ]{0,40}", 1..4),
        prop::sample::select(vec!["\n", "\r\n", "\r"]),
        any::<bool>(),
    )
        .prop_map(|(name, lines, end, comment)| {
            let mut text = String::new();
            if comment {
                text.push_str(": keepalive");
                text.push_str(end);
            }
            if let Some(name) = name {
                text.push_str("event: ");
                text.push_str(name);
                text.push_str(end);
            }
            for line in lines {
                text.push_str("data: ");
                text.push_str(&line);
                text.push_str(end);
            }
            text.push_str(end);
            text.into_bytes()
        })
}

proptest! {
    /// A decoder that streams large events yields, once their pieces are joined, the events a
    /// plain decoder yields, whatever the chunking and the size past which events are streamed.
    #[test]
    fn streamed_events_join_into_the_events_of_a_plain_decoder(
        events in prop::collection::vec(stream_event(), 1..8),
        cuts in prop::collection::vec(0.0f64..1.0, 0..24),
        over in 0usize..48,
    ) {
        let bytes = events.concat();
        let mut whole = SseDecoder::new();
        whole.push(&bytes).unwrap();
        let mut expected = Vec::new();
        while let Some(event) = whole.pop() {
            expected.push((event.event, event.data));
        }
        let cuts: Vec<usize> = cuts.iter().map(|at| (at * bytes.len() as f64) as usize).collect();
        let mut streaming = SseDecoder::new().stream_events_over(over);
        let mut items = Vec::new();
        for chunk in support::split_at_points(&bytes, &cuts) {
            streaming.push(&chunk).unwrap();
            while let Some(item) = streaming.pop_item() {
                prop_assert!(
                    !matches!(&item, SseItem::Opened { event, .. } if event == "error"),
                    "an error event was streamed"
                );
                items.push(item);
            }
        }
        prop_assert!(streaming.is_idle());
        prop_assert_eq!(join_items(items), expected);
    }
}

#[test]
fn a_large_typed_event_comes_in_pieces_between_whole_events() {
    let image = "A".repeat(100);
    let stream = format!(
        "event: small\ndata: {{}}\n\nevent: image_generation.partial_image\ndata: {image}\n\nevent: error\ndata: {image}\n\n"
    );
    let mut decoder = SseDecoder::new().stream_events_over(8);
    let (head, tail) = stream.as_bytes().split_at(80);
    let mut items = Vec::new();
    for chunk in [head, tail] {
        decoder.push(chunk).unwrap();
        while let Some(item) = decoder.pop_item() {
            items.push(item);
        }
    }
    let [
        SseItem::Event(small),
        SseItem::Opened { event, .. },
        pieces @ ..,
        SseItem::Closed,
        SseItem::Event(error),
    ] = &items[..]
    else {
        panic!("{items:?}");
    };
    assert_eq!(small.event.as_deref(), Some("small"));
    assert_eq!(event, "image_generation.partial_image");
    assert!(pieces.len() >= 2, "the data came in two chunks: {pieces:?}");
    let data: Vec<u8> = pieces
        .iter()
        .flat_map(|piece| match piece {
            SseItem::Data(bytes) => bytes.to_vec(),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(data, image.as_bytes());
    assert_eq!(
        error.event.as_deref(),
        Some("error"),
        "an error event stays whole"
    );
    assert_eq!(error.data, image);
}

#[test]
fn an_open_event_cannot_change_its_type_or_outgrow_the_bound() {
    let mut decoder = SseDecoder::with_max_event_bytes(100).stream_events_over(8);
    decoder
        .push(b"event: image_generation.partial_image\ndata: AAAAAAAAAAAA")
        .unwrap();
    assert_eq!(
        decoder.push(b"\nevent: error\n\n"),
        Err(SseError::TypeChangedInOpenEvent),
        "an error cannot hide behind the type the event opened with"
    );
    let mut decoder = SseDecoder::with_max_event_bytes(100).stream_events_over(8);
    decoder.push(b"event: image\ndata: ").unwrap();
    let mut refused = None;
    for _ in 0..20 {
        if let Err(err) = decoder.push(b"AAAAAAAAAA") {
            refused = Some(err);
            break;
        }
        while decoder.pop_item().is_some() {}
    }
    assert_eq!(refused, Some(SseError::EventTooLarge { limit: 100 }));
}
