//! Usage records: batches, filters, daily totals, the background writer.

use std::sync::Arc;
use std::time::Duration;

use imagegate_store::{
    AccountId, GroupId, KeyId, KeyLimits, NewApiKey, NewUser, StatusFilter, Timestamp, TokenCounts,
    UsageFilter, UsageRecord, UsageSpool, UsageWriter, UsageWriterConfig, UserId,
};

use crate::common::{Kind, TestDb};

crate::on_every_backend!(
    usage_batches_and_filters,
    usage_daily_totals,
    usage_by_size_in_the_database,
    usage_pages_by_place_are_not_shifted_by_late_records,
    usage_large_batches,
    usage_writer_flushes_on_shutdown,
    usage_text_the_database_refuses_and_absurd_counts_are_stored,
    usage_a_record_the_database_refuses_is_set_aside_and_the_rest_stored,
    usage_a_file_of_records_is_replayed_by_hand
);

/// 2024-12-31T00:00:00Z
const DAY_ONE: i64 = 1_735_603_200_000;
const HOUR: i64 = 3_600_000;

fn records() -> [UsageRecord; 3] {
    let mut first = UsageRecord::new("req-1", "/v1/images/generations", "gpt-image-2");
    first.created_at = Timestamp::from_unix_ms(DAY_ONE + HOUR);
    first.user_id = Some(UserId(1));
    first.key_id = Some(KeyId(11));
    first.account_id = Some(AccountId(21));
    first.group_id = Some(GroupId(1));
    first.images = 2;
    first.n = 2;
    first.tokens = TokenCounts {
        input: 10,
        output: 100,
        total: 110,
        ..TokenCounts::default()
    };
    first.latency_ms = 900;

    let mut second = UsageRecord::new("req-2", "/v1/images/edits", "gpt-image-2");
    second.created_at = Timestamp::from_unix_ms(DAY_ONE + 2 * HOUR);
    second.user_id = Some(UserId(2));
    second.key_id = Some(KeyId(12));
    second.account_id = Some(AccountId(22));
    second.group_id = Some(GroupId(2));
    second.status = 429;
    second.error_code = Some("usage_limit_reached".into());

    let third = UsageRecord {
        request_id: "req-3".into(),
        created_at: Timestamp::from_unix_ms(DAY_ONE + 24 * HOUR + HOUR),
        endpoint: "/v1/responses".into(),
        model: "gpt-image-1".into(),
        size_requested: Some("auto".into()),
        size_produced: Some("1536x1024".into()),
        quality_requested: Some("high".into()),
        quality_produced: Some("medium".into()),
        output_format: Some("webp".into()),
        n: 1,
        images: 1,
        stream: true,
        status: 200,
        error_code: None,
        tokens: TokenCounts {
            input: 5,
            output: 50,
            total: 55,
            input_text: Some(4),
            input_image: Some(1),
            output_text: Some(0),
            output_image: Some(50),
        },
        latency_ms: 12_345,
        ttfb_ms: Some(321),
        account_id: Some(AccountId(22)),
        group_id: Some(GroupId(1)),
        user_id: Some(UserId(1)),
        key_id: Some(KeyId(11)),
        fallback_note: Some("quality high -> medium after 429 on account 21".into()),
    };
    [first, second, third]
}

async fn ids(db: &TestDb, filter: UsageFilter) -> Vec<String> {
    let entries = db.store.list_usage(&filter).await.unwrap();
    entries.into_iter().map(|e| e.record.request_id).collect()
}

async fn usage_batches_and_filters(db: Arc<TestDb>) {
    let store = db.store.as_ref();
    let all = records();
    assert_eq!(store.insert_usage_batch(&all).await.unwrap(), 3);
    // Retried batches do not double-count.
    assert_eq!(store.insert_usage_batch(&all[..1]).await.unwrap(), 0);
    assert_eq!(store.insert_usage_batch(&[]).await.unwrap(), 0);

    let listed = store.list_usage(&UsageFilter::default()).await.unwrap();
    assert_eq!(listed.len(), 3);
    assert_eq!(listed[0].record, all[2], "every field round-trips");
    assert_eq!(listed[2].record, all[0]);
    assert!(listed[0].id > listed[2].id);

    let f = UsageFilter::default;
    assert_eq!(ids(&db, f()).await, ["req-3", "req-2", "req-1"]);
    assert_eq!(
        ids(
            &db,
            UsageFilter {
                user: Some(UserId(1)),
                ..f()
            }
        )
        .await,
        ["req-3", "req-1"]
    );
    assert_eq!(
        ids(
            &db,
            UsageFilter {
                key: Some(KeyId(12)),
                ..f()
            }
        )
        .await,
        ["req-2"]
    );
    assert_eq!(
        ids(
            &db,
            UsageFilter {
                account: Some(AccountId(22)),
                ..f()
            }
        )
        .await,
        ["req-3", "req-2"]
    );
    assert_eq!(
        ids(
            &db,
            UsageFilter {
                group: Some(GroupId(1)),
                ..f()
            }
        )
        .await,
        ["req-3", "req-1"]
    );
    assert_eq!(
        ids(
            &db,
            UsageFilter {
                model: Some("gpt-image-1".into()),
                ..f()
            }
        )
        .await,
        ["req-3"]
    );
    let day_two = Timestamp::from_unix_ms(DAY_ONE + 24 * HOUR);
    assert_eq!(
        ids(
            &db,
            UsageFilter {
                since: Some(day_two),
                ..f()
            }
        )
        .await,
        ["req-3"]
    );
    assert_eq!(
        ids(
            &db,
            UsageFilter {
                until: Some(day_two),
                ..f()
            }
        )
        .await,
        ["req-2", "req-1"]
    );
    assert_eq!(
        ids(
            &db,
            UsageFilter {
                status: Some(StatusFilter::Success),
                ..f()
            }
        )
        .await,
        ["req-3", "req-1"]
    );
    assert_eq!(
        ids(
            &db,
            UsageFilter {
                status: Some(StatusFilter::Failure),
                ..f()
            }
        )
        .await,
        ["req-2"]
    );
    assert_eq!(
        ids(
            &db,
            UsageFilter {
                status: Some(StatusFilter::Exact(429)),
                ..f()
            }
        )
        .await,
        ["req-2"]
    );
    assert_eq!(
        ids(
            &db,
            UsageFilter {
                limit: Some(2),
                ..f()
            }
        )
        .await,
        ["req-3", "req-2"]
    );
    assert_eq!(
        ids(
            &db,
            UsageFilter {
                limit: Some(1),
                offset: Some(1),
                ..f()
            }
        )
        .await,
        ["req-2"]
    );
    let combined = UsageFilter {
        user: Some(UserId(1)),
        account: Some(AccountId(21)),
        status: Some(StatusFilter::Exact(200)),
        ..f()
    };
    assert_eq!(ids(&db, combined).await, ["req-1"]);
    assert!(
        ids(
            &db,
            UsageFilter {
                user: Some(UserId(2)),
                model: Some("gpt-image-1".into()),
                ..f()
            }
        )
        .await
        .is_empty()
    );
}

async fn usage_text_the_database_refuses_and_absurd_counts_are_stored(db: Arc<TestDb>) {
    // A client's model name with a NUL character (valid JSON) and an upstream's absurd token
    // counts: PostgreSQL would refuse the first and both backends overflow summing the second,
    // failing the whole batch, and every later try of it, with the good record beside them.
    let [good, ..] = records();
    let mut odd = UsageRecord::new("req-odd", "/v1/images/generations", "gpt\0image");
    odd.created_at = good.created_at;
    odd.error_code = Some("invalid_\0value".into());
    odd.tokens = TokenCounts {
        input: u64::MAX,
        output: u64::MAX,
        total: u64::MAX,
        output_image: Some(u64::MAX),
        ..TokenCounts::default()
    };
    let mut twin = odd.clone();
    twin.request_id = "req-odd-twin".into();
    let batch = [good, odd, twin];
    assert_eq!(db.store.insert_usage_batch(&batch).await.unwrap(), 3);

    let listed = db.store.list_usage(&UsageFilter::default()).await.unwrap();
    let stored = listed
        .iter()
        .find(|e| e.record.request_id == "req-odd")
        .expect("the odd record is stored");
    assert_eq!(stored.record.model, "gpt\u{FFFD}image");
    // Filtering by the text the client sent finds the records stored with it.
    let by_model = |model: &str, size: Option<&str>| UsageFilter {
        model: Some(model.to_owned()),
        size: size.map(str::to_owned),
        ..UsageFilter::default()
    };
    assert_eq!(
        ids(&db, by_model("gpt\0image", None)).await,
        ["req-odd-twin", "req-odd"]
    );
    assert!(
        ids(&db, by_model("gpt\0image", Some("1024\u{0}x1024")))
            .await
            .is_empty()
    );
    assert_eq!(stored.record.error_code.as_deref(), Some("invalid_\u{FFFD}value"));
    let cap = 1u64 << 40;
    assert_eq!(stored.record.tokens.total, cap);
    assert_eq!(stored.record.tokens.output_image, Some(cap));

    let days = db.store.daily_usage(&UsageFilter::default()).await.unwrap();
    assert_eq!(days.len(), 1);
    assert_eq!(days[0].requests, 3);
    assert_eq!(days[0].total_tokens, 110 + 2 * cap);
}

async fn usage_daily_totals(db: Arc<TestDb>) {
    db.store.insert_usage_batch(&records()).await.unwrap();
    let days = db.store.daily_usage(&UsageFilter::default()).await.unwrap();
    assert_eq!(days.len(), 2);
    assert_eq!(days[0].date, "2025-01-01");
    assert_eq!(days[0].day_start, Timestamp::from_unix_ms(DAY_ONE + 24 * HOUR));
    assert_eq!(
        (days[0].requests, days[0].failed_requests, days[0].images),
        (1, 0, 1)
    );
    assert_eq!(
        (days[0].input_tokens, days[0].output_tokens, days[0].total_tokens),
        (5, 50, 55)
    );
    assert_eq!(days[1].date, "2024-12-31");
    assert_eq!(
        (days[1].requests, days[1].failed_requests, days[1].images),
        (2, 1, 2)
    );
    assert_eq!(
        (days[1].input_tokens, days[1].output_tokens, days[1].total_tokens),
        (10, 100, 110)
    );

    let only_user_two = db
        .store
        .daily_usage(&UsageFilter {
            user: Some(UserId(2)),
            ..UsageFilter::default()
        })
        .await
        .unwrap();
    assert_eq!(only_user_two.len(), 1);
    assert_eq!(
        (only_user_two[0].date.as_str(), only_user_two[0].requests),
        ("2024-12-31", 1)
    );
    let newest_day = db
        .store
        .daily_usage(&UsageFilter {
            limit: Some(1),
            ..UsageFilter::default()
        })
        .await
        .unwrap();
    assert_eq!(newest_day.len(), 1);
    assert_eq!(newest_day[0].date, "2025-01-01");
}

async fn usage_by_size_in_the_database(db: Arc<TestDb>) {
    db.store.insert_usage_batch(&records()).await.unwrap();
    let by_size = |size: &str| UsageFilter {
        size: Some(size.to_owned()),
        ..UsageFilter::default()
    };
    // Produced or asked for.
    assert_eq!(ids(&db, by_size("1536x1024")).await, ["req-3"]);
    assert_eq!(ids(&db, by_size("auto")).await, ["req-3"]);
    assert!(ids(&db, by_size("3840x2160")).await.is_empty());
    // The totals follow the same selection, whatever the number of rows.
    let days = db.store.daily_usage(&by_size("1536x1024")).await.unwrap();
    assert_eq!(days.len(), 1);
    assert_eq!((days[0].requests, days[0].total_tokens), (1, 55));
}

async fn usage_pages_by_place_are_not_shifted_by_late_records(db: Arc<TestDb>) {
    let at = |i: i64| Timestamp::from_unix_ms(DAY_ONE + i * HOUR);
    let batch: Vec<UsageRecord> = (0..5)
        .map(|i| {
            let mut record = UsageRecord::new(format!("req-{i}"), "/v1/images/generations", "gpt-image-2");
            // Two records share each hour but the last: ties are broken by id.
            record.created_at = at(i / 2);
            record
        })
        .collect();
    db.store.insert_usage_batch(&batch).await.unwrap();
    let page = |older_than| UsageFilter {
        older_than,
        limit: Some(2),
        ..UsageFilter::default()
    };
    let first = db.store.list_usage(&page(None)).await.unwrap();
    let first_ids: Vec<&str> = first.iter().map(|e| e.record.request_id.as_str()).collect();
    assert_eq!(first_ids, ["req-4", "req-3"]);
    // A record written now that started earlier (a long request, a replayed spool) lands
    // among the rows already read: it must not push one of them into the next page.
    let mut late = UsageRecord::new("req-late", "/v1/images/generations", "gpt-image-2");
    late.created_at = at(2);
    db.store.insert_usage_batch(&[late]).await.unwrap();
    let mut seen: Vec<String> = first_ids.iter().map(|id| (*id).to_owned()).collect();
    let mut cursor = first.last().map(|e| e.cursor());
    while let Some(place) = cursor {
        let next = db.store.list_usage(&page(Some(place))).await.unwrap();
        seen.extend(next.iter().map(|e| e.record.request_id.clone()));
        cursor = next.last().map(|e| e.cursor());
    }
    assert_eq!(seen, ["req-4", "req-3", "req-2", "req-1", "req-0"]);
}

async fn usage_large_batches(db: Arc<TestDb>) {
    let batch: Vec<UsageRecord> = (0..1_203)
        .map(|i| {
            let mut r = UsageRecord::new(format!("bulk-{i}"), "/v1/images/generations", "gpt-image-2");
            r.created_at = Timestamp::from_unix_ms(DAY_ONE + i);
            r.images = 1;
            r
        })
        .collect();
    assert_eq!(db.store.insert_usage_batch(&batch).await.unwrap(), 1_203);
    assert_eq!(db.raw_ints("SELECT COUNT(*) FROM usage_records").await, [1_203]);
    let newest = db
        .store
        .list_usage(&UsageFilter {
            limit: Some(1),
            ..UsageFilter::default()
        })
        .await
        .unwrap();
    assert_eq!(newest[0].record.request_id, "bulk-1202");
    let days = db.store.daily_usage(&UsageFilter::default()).await.unwrap();
    assert_eq!((days.len(), days[0].images), (1, 1_203));
}

async fn usage_writer_flushes_on_shutdown(db: Arc<TestDb>) {
    let store = Arc::clone(&db.store);
    let user = store
        .create_user(NewUser {
            name: "alice".into(),
            ..NewUser::default()
        })
        .await
        .unwrap();
    let key = store
        .create_key(NewApiKey {
            user_id: user.id,
            group_id: store.default_group().await.unwrap().id,
            name: "k".into(),
            limits: KeyLimits::default(),
            fallback_ladder: false,
        })
        .await
        .unwrap();
    let config = UsageWriterConfig {
        batch_size: 10,
        flush_interval: Duration::from_secs(3600),
        ..UsageWriterConfig::default()
    };
    let (sink, writer) = UsageWriter::spawn(Arc::clone(&store), config);
    for i in 0..25 {
        let mut r = UsageRecord::new(format!("w-{i}"), "/v1/images/generations", "gpt-image-2");
        r.created_at = Timestamp::from_unix_ms(DAY_ONE + i * 1000);
        r.key_id = Some(key.record.id);
        r.user_id = Some(user.id);
        let clone = sink.clone();
        clone.record(r).unwrap();
    }
    let stats = writer.shutdown().await.unwrap();
    assert_eq!((stats.written, stats.pending, stats.rejected), (25, 0, 0));
    let stored = store
        .list_usage(&UsageFilter {
            key: Some(key.record.id),
            ..UsageFilter::default()
        })
        .await
        .unwrap();
    assert_eq!(stored.len(), 25);
    assert_eq!(stored[0].record.request_id, "w-24");
    assert_eq!(
        store.key(key.record.id).await.unwrap().last_used_at,
        Some(Timestamp::from_unix_ms(DAY_ONE + 24_000))
    );
}

async fn usage_a_record_the_database_refuses_is_set_aside_and_the_rest_stored(db: Arc<TestDb>) {
    refuse_poison(&db).await;
    let dir = tempfile::tempdir().unwrap();
    let config = UsageWriterConfig {
        batch_size: 10,
        flush_interval: Duration::from_secs(3600),
        ..UsageWriterConfig::default()
    };
    let spool = UsageSpool::open(dir.path()).unwrap();
    let (sink, writer) = UsageWriter::spawn_spooled(Arc::clone(&db.store), config, spool);
    for i in 0..10 {
        let id = if i == 4 {
            "poison".to_owned()
        } else {
            format!("w-{i}")
        };
        let mut r = UsageRecord::new(id, "/v1/images/generations", "gpt-image-2");
        r.created_at = Timestamp::from_unix_ms(DAY_ONE + i * 1000);
        sink.record(r).unwrap();
    }
    drop(sink);
    let stats = writer.shutdown().await.unwrap();
    assert_eq!(
        (stats.written, stats.set_aside, stats.spooled, stats.pending),
        (9, 1, 0, 0)
    );
    let stored = db.store.list_usage(&UsageFilter::default()).await.unwrap();
    assert_eq!(stored.len(), 9);
    assert!(stored.iter().all(|e| e.record.request_id != "poison"));
    let rejected: Vec<String> = std::fs::read_dir(dir.path())
        .unwrap()
        .map(|entry| entry.unwrap().path())
        .filter(|path| path.extension().is_some_and(|e| e == "rejected"))
        .map(|path| std::fs::read_to_string(path).unwrap())
        .collect();
    assert_eq!(rejected.len(), 1, "one file of set-aside records");
    assert!(
        rejected[0].contains("\"request_id\":\"poison\""),
        "{}",
        rejected[0]
    );
    assert_eq!(rejected[0].lines().count(), 1);
}

/// Makes the database refuse any usage record whose request id is `poison`. A trigger stands for
/// whatever the database may refuse in one record (a constraint added by an operator, a value out
/// of range): a batch holding it fails as a whole, on every try.
async fn refuse_poison(db: &TestDb) {
    let trigger: &[&str] = match db.kind {
        Kind::Sqlite => &["CREATE TRIGGER refuse_poison BEFORE INSERT ON usage_records
             WHEN NEW.request_id = 'poison'
             BEGIN SELECT RAISE(ABORT, 'poison refused'); END"],
        Kind::Postgres => &[
            "CREATE FUNCTION refuse_poison() RETURNS trigger LANGUAGE plpgsql AS $$
             BEGIN
               IF NEW.request_id = 'poison' THEN
                 RAISE EXCEPTION 'poison refused' USING ERRCODE = 'check_violation';
               END IF;
               RETURN NEW;
             END $$",
            "CREATE TRIGGER refuse_poison BEFORE INSERT ON usage_records
               FOR EACH ROW EXECUTE FUNCTION refuse_poison()",
        ],
    };
    db.execute(trigger).await;
}

async fn usage_a_file_of_records_is_replayed_by_hand(db: Arc<TestDb>) {
    refuse_poison(&db).await;
    let store = db.store.as_ref();
    let record = |id: &str| {
        let mut r = UsageRecord::new(id, "/v1/images/generations", "gpt-image-2");
        r.created_at = Timestamp::from_unix_ms(DAY_ONE);
        r
    };
    store
        .insert_usage_batch(&[record("w-0"), record("w-1")])
        .await
        .unwrap();
    // Line 1 is stored already; lines 2 to 301 fill more than one insert, with the poison on
    // line 52; line 302 was cut short; line 303 is blank; line 304 is new; line 305 is too long to
    // be a record, and the record on line 306 after it is read.
    let mut lines = vec![serde_json::to_string(&record("w-1")).unwrap()];
    lines.extend((0..300).map(|i| {
        let id = if i == 50 {
            "poison".to_owned()
        } else {
            format!("b-{i}")
        };
        serde_json::to_string(&record(&id)).unwrap()
    }));
    lines.push(r#"{"request_id":"cut-sh"#.to_owned());
    lines.push(String::new());
    lines.push(serde_json::to_string(&record("w-2")).unwrap());
    lines.push("x".repeat(imagegate_store::MAX_USAGE_LINE + 10));
    lines.push(serde_json::to_string(&record("w-3")).unwrap());
    let dir = tempfile::tempdir().unwrap();
    let path = dir.path().join("usage-1-2.rejected");
    std::fs::write(&path, lines.join("\n") + "\n").unwrap();
    let count = || db.raw_ints("SELECT COUNT(*) FROM usage_records");

    let first = imagegate_store::replay_usage_file(store, &path).await.unwrap();
    assert_eq!((first.inserted, first.already_stored), (301, 1), "{first:?}");
    assert_eq!(first.refused.len(), 1, "{first:?}");
    assert_eq!(
        (first.refused[0].line, first.refused[0].request_id.as_str()),
        (52, "poison")
    );
    assert!(first.refused[0].reason.contains("poison refused"), "{first:?}");
    let unreadable: Vec<usize> = first.unreadable.iter().map(|u| u.line).collect();
    assert_eq!(unreadable, [302, 305], "{first:?}");
    assert!(first.unreadable[1].reason.contains("longer than"), "{first:?}");
    assert!(!first.is_complete());
    assert_eq!(count().await, [303]);

    // The cause fixed, the same file again: only the refused record is new.
    let untrigger = match db.kind {
        Kind::Sqlite => "DROP TRIGGER refuse_poison",
        Kind::Postgres => "DROP TRIGGER refuse_poison ON usage_records",
    };
    db.execute(&[untrigger]).await;
    let second = imagegate_store::replay_usage_file(store, &path).await.unwrap();
    assert_eq!((second.inserted, second.already_stored), (1, 302), "{second:?}");
    assert!(second.refused.is_empty(), "{second:?}");
    assert_eq!(count().await, [304]);
    assert!(
        std::fs::read_to_string(&path).unwrap().contains("poison"),
        "the file is left as it was"
    );

    let missing = imagegate_store::replay_usage_file(store, &dir.path().join("none.jsonl")).await;
    assert!(
        matches!(missing, Err(imagegate_store::ReplayError::Read { .. })),
        "{missing:?}"
    );
    // A database out of reach stops the replay, saying how far it got.
    store.close().await;
    let stopped = imagegate_store::replay_usage_file(store, &path)
        .await
        .unwrap_err();
    assert!(
        matches!(
            stopped,
            imagegate_store::ReplayError::Store {
                line: 1,
                stored: 0,
                ..
            }
        ),
        "{stopped:?}"
    );
}
