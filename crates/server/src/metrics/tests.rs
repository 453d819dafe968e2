use std::time::Duration;

use imagegate_dispatch::{AccountSnapshot, AccountSpec, PoolSnapshot, Tier, UnixMillis};
use imagegate_domain::SizeClass;
use imagegate_store::WriterStats;

use super::*;

fn metrics() -> Metrics {
    Metrics::new(["gpt-image-2".to_owned(), "gpt-5".to_owned()])
}

fn observation(model: &str, status: u16, total_ms: u64, upstream_ms: u64) -> RequestObservation<'_> {
    RequestObservation {
        endpoint: "/v1/images/generations",
        status,
        model,
        size_class: Some(SizeClass::Large),
        total: Duration::from_millis(total_ms),
        upstream: Duration::from_millis(upstream_ms),
        pool_wait: None,
        kept_alive: false,
    }
}

#[test]
fn answers_the_keepalive_committed_are_counted_by_endpoint() {
    let m = metrics();
    m.observe(&observation("gpt-image-2", 200, 1200, 1199));
    let text = render(&m, None, &WriterStats::default());
    assert!(
        !text.contains("imagegate_json_keepalive_answers_total{"),
        "{text}"
    );
    for status in [200, 502] {
        m.observe(&RequestObservation {
            kept_alive: true,
            ..observation("gpt-image-2", status, 30_000, 29_999)
        });
    }
    let text = render(&m, None, &WriterStats::default());
    assert_eq!(
        line(
            &text,
            "imagegate_json_keepalive_answers_total{endpoint=\"/v1/images/generations\"}"
        )
        .rsplit(' ')
        .next(),
        Some("2")
    );
}

fn line<'a>(text: &'a str, prefix: &str) -> &'a str {
    text.lines()
        .find(|l| l.starts_with(prefix))
        .unwrap_or_else(|| panic!("no line starting with {prefix:?} in\n{text}"))
}

#[test]
fn requests_are_counted_by_endpoint_status_model_and_class() {
    let m = metrics();
    m.observe(&observation("gpt-image-2", 200, 1200, 1199));
    m.observe(&observation("gpt-image-2", 200, 900, 899));
    m.observe(&observation("gpt-image-2", 429, 3, 0));
    let text = render(&m, None, &WriterStats::default());
    assert_eq!(
        line(
            &text,
            "imagegate_requests_total{endpoint=\"/v1/images/generations\",status=\"200\",model=\"gpt-image-2\",size_class=\"large\"}"
        )
        .rsplit(' ')
        .next(),
        Some("2")
    );
    assert!(
        text.contains("status=\"429\",model=\"gpt-image-2\",size_class=\"large\"} 1"),
        "{text}"
    );
    assert!(text.ends_with("# EOF\n"), "OpenMetrics ends with EOF");
}

#[test]
fn model_labels_stay_bounded() {
    let m = metrics();
    m.observe(&observation("some-random-client-text", 400, 1, 0));
    m.observe(&observation("", 401, 1, 0));
    let text = render(&m, None, &WriterStats::default());
    assert!(!text.contains("some-random-client-text"), "{text}");
    assert!(text.contains("model=\"other\""), "{text}");
    assert!(text.contains("model=\"none\""), "{text}");
}

#[test]
fn overhead_is_the_duration_minus_upstream_time() {
    let m = metrics();
    // 2 s total of which 1.9995 s upstream: 0.5 ms overhead, inside the 0.64 ms bucket, not the 0.32 ms one.
    m.observe(&RequestObservation {
        total: Duration::from_micros(2_000_000),
        upstream: Duration::from_micros(1_999_500),
        ..observation("gpt-image-2", 200, 0, 0)
    });
    let text = render(&m, None, &WriterStats::default());
    let bucket = |le: &str| {
        line(
            &text,
            &format!(
                "imagegate_gateway_overhead_seconds_bucket{{le=\"{le}\",endpoint=\"/v1/images/generations\"}}"
            ),
        )
        .rsplit(' ')
        .next()
        .map(str::to_owned)
    };
    assert_eq!(bucket("0.00032").as_deref(), Some("0"), "{text}");
    assert_eq!(bucket("0.00064").as_deref(), Some("1"), "{text}");
    let sum = line(&text, "imagegate_gateway_overhead_seconds_sum");
    let value: f64 = sum.rsplit(' ').next().unwrap().parse().unwrap();
    assert!((value - 0.0005).abs() < 1e-9, "{sum}");
    assert!(text.contains("imagegate_upstream_duration_seconds_count{endpoint=\"/v1/images/generations\",size_class=\"large\"} 1"), "{text}");
}

#[test]
fn in_flight_follows_the_guards() {
    let m = metrics();
    let a = m.request_started();
    let b = m.request_started();
    assert!(render(&m, None, &WriterStats::default()).contains("imagegate_requests_in_flight 2"));
    drop(a);
    assert!(render(&m, None, &WriterStats::default()).contains("imagegate_requests_in_flight 1"));
    drop(b);
    assert!(render(&m, None, &WriterStats::default()).contains("imagegate_requests_in_flight 0"));
}

#[test]
fn scrapes_show_the_pool_and_the_usage_queue() {
    let m = metrics();
    let now = UnixMillis(1_700_000_000_000);
    let spec = AccountSpec::new("7", Tier::Pro, &["g"]);
    let mut account = AccountSnapshot::new(&spec, None, now);
    account.in_flight.large = 1;
    account.in_flight.standard = 3;
    account.cooldowns.push(imagegate_dispatch::CooldownView {
        scope: imagegate_dispatch::LimitScope::ImagesOnly,
        until: now.plus(Duration::from_secs(90)),
        kind: imagegate_dispatch::CooldownKind::RateLimited,
        reason: "429".into(),
    });
    let pool = PoolSnapshot {
        at: now,
        accounts: vec![account],
    };
    let writer = WriterStats {
        pending: 12,
        written: 40,
        spooled: 9,
        replayed: 7,
        failed_spool_writes: 2,
        set_aside: 3,
        ..WriterStats::default()
    };
    let text = render(&m, Some(&pool), &writer);
    assert!(
        text.contains("imagegate_account_in_flight{account=\"7\",size_class=\"large\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("imagegate_account_in_flight{account=\"7\",size_class=\"standard\"} 3"),
        "{text}"
    );
    assert!(
        text.contains("imagegate_account_limit{account=\"7\",size_class=\"large\"} 1"),
        "{text}"
    );
    assert!(
        text.contains("imagegate_account_cooldown_seconds{account=\"7\",scope=\"images\"} 90"),
        "{text}"
    );
    assert!(
        text.contains("imagegate_account_cooldown_seconds{account=\"7\",scope=\"all\"} 0"),
        "{text}"
    );
    assert!(
        text.contains("imagegate_account_usable{account=\"7\"} 1"),
        "{text}"
    );
    assert!(text.contains("imagegate_usage_queue_depth 12"), "{text}");
    assert!(
        text.contains("imagegate_usage_records_written_total 40"),
        "{text}"
    );
    assert!(text.contains("imagegate_usage_records_spooled_total 9"), "{text}");
    assert!(
        text.contains("imagegate_usage_records_replayed_total 7"),
        "{text}"
    );
    assert!(
        text.contains("imagegate_usage_spool_write_failures_total 2"),
        "{text}"
    );
    assert!(
        text.contains("imagegate_usage_records_set_aside_total 3"),
        "{text}"
    );
    assert!(
        text.contains("# TYPE imagegate_usage_records_written counter"),
        "{text}"
    );
    // A later scrape follows the writer's totals.
    let later = WriterStats {
        written: 55,
        ..writer
    };
    let text = render(&m, Some(&pool), &later);
    assert!(
        text.contains("imagegate_usage_records_written_total 55"),
        "{text}"
    );
    assert!(text.contains("imagegate_usage_records_spooled_total 9"), "{text}");

    // An account removed from the pool disappears from the next scrape.
    let empty = PoolSnapshot {
        at: now,
        accounts: Vec::new(),
    };
    let text = render(&m, Some(&empty), &writer);
    assert!(!text.contains("account=\"7\""), "{text}");
}

#[test]
fn scrapes_at_once_each_show_every_account() {
    let m = std::sync::Arc::new(metrics());
    let now = UnixMillis(1_700_000_000_000);
    let spec = AccountSpec::new("1", Tier::Pro, &["g"]);
    let pool = std::sync::Arc::new(PoolSnapshot {
        at: now,
        accounts: vec![AccountSnapshot::new(&spec, None, now)],
    });
    let scrapers: Vec<_> = (0..4)
        .map(|_| {
            let (m, pool) = (std::sync::Arc::clone(&m), std::sync::Arc::clone(&pool));
            std::thread::spawn(move || {
                (0..200)
                    .filter(|_| {
                        !render(&m, Some(&pool), &WriterStats::default())
                            .contains("imagegate_account_usable{account=\"1\"} 1")
                    })
                    .count()
            })
        })
        .collect();
    let missing: usize = scrapers.into_iter().map(|s| s.join().unwrap()).sum();
    assert_eq!(
        missing, 0,
        "scrapes whose output lacked the account, another scrape having cleared it"
    );
}

#[test]
fn waits_for_an_account_are_timed_for_requests_that_asked_for_one() {
    let m = metrics();
    m.observe(&observation("gpt-image-2", 400, 2, 0));
    m.observe(&RequestObservation {
        pool_wait: Some(Duration::from_millis(1500)),
        ..observation("gpt-image-2", 200, 9000, 7000)
    });
    m.observe(&RequestObservation {
        pool_wait: Some(Duration::ZERO),
        ..observation("gpt-image-2", 200, 7000, 6990)
    });
    let text = render(&m, None, &WriterStats::default());
    let series = "{endpoint=\"/v1/images/generations\",size_class=\"large\"}";
    assert_eq!(
        line(&text, &format!("imagegate_pool_wait_seconds_count{series}"))
            .rsplit(' ')
            .next(),
        Some("2"),
        "the refused request never asked for an account: {text}"
    );
    assert_eq!(
        line(&text, &format!("imagegate_pool_wait_seconds_sum{series}"))
            .rsplit(' ')
            .next(),
        Some("1.5")
    );
}

#[test]
fn what_uploads_keep_on_disk_is_shown_against_its_bound() {
    let bounded = metrics().with_upload_disk(imagegate_codec::multipart::DiskBudget::new(3 << 20));
    let text = render(&bounded, None, &WriterStats::default());
    assert_eq!(
        line(&text, "imagegate_upload_disk_bytes ").rsplit(' ').next(),
        Some("0")
    );
    assert_eq!(
        line(&text, "imagegate_upload_disk_budget_bytes ")
            .rsplit(' ')
            .next(),
        Some("3145728")
    );
    // Without a bound, only what is kept.
    let unbounded = metrics().with_upload_disk(imagegate_codec::multipart::DiskBudget::new(u64::MAX));
    let text = render(&unbounded, None, &WriterStats::default());
    assert!(text.contains("imagegate_upload_disk_bytes 0"), "{text}");
    assert!(!text.contains("imagegate_upload_disk_budget_bytes"), "{text}");
}
