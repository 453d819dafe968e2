use super::*;

fn rule(json: &str) -> FaultRule {
    serde_json::from_str(json).unwrap()
}

#[test]
fn names_parse_to_kinds_and_back() {
    assert_eq!("429".parse::<FaultKind>().unwrap(), FaultKind::UsageLimit);
    assert_eq!("rate_limit".parse::<FaultKind>().unwrap(), FaultKind::RateLimit);
    assert_eq!("HTML_403".parse::<FaultKind>().unwrap(), FaultKind::Html403);
    assert_eq!(
        "moderation_blocked".parse::<FaultKind>().unwrap(),
        FaultKind::Refusal
    );
    assert!("teapot".parse::<FaultKind>().is_err());
    for kind in FaultKind::ALL {
        assert_eq!(kind.as_str().parse::<FaultKind>().unwrap(), kind);
    }
}

#[test]
fn script_rules_deserialize_and_reject_unknown_fields() {
    let parsed = rule(r#"{"key":"sk-a","fault":"429","times":2,"resets_in_seconds":30}"#);
    assert_eq!(parsed.key.as_deref(), Some("sk-a"));
    assert_eq!(parsed.fault, FaultKind::UsageLimit);
    assert_eq!(parsed.times, Some(2));
    assert_eq!(parsed.resets_in_seconds, Some(30));
    assert!(serde_json::from_str::<FaultRule>(r#"{"fault":"500","bogus":1}"#).is_err());
    assert!(serde_json::from_str::<FaultRule>(r#"{"fault":"nope"}"#).is_err());
}

#[test]
fn a_rule_with_after_lets_that_many_requests_through_first() {
    let config = SimConfig::default();
    let book = FaultBook::new(1);
    book.add([rule(r#"{"fault":"429","after":2,"times":1}"#)]);
    let path = "/v1/responses";
    assert_eq!(book.choose(None, path, &config), None);
    assert_eq!(book.choose(None, path, &config), None);
    let third = book.choose(None, path, &config).unwrap();
    assert_eq!(third.kind, FaultKind::UsageLimit);
    assert_eq!(book.choose(None, path, &config), None, "times: 1 is spent");
    assert!(book.rules().is_empty());
}

#[test]
fn scripted_faults_match_token_and_count_down() {
    let config = SimConfig::default();
    let book = FaultBook::new(1);
    book.add([rule(
        r#"{"key":"sk-a","fault":"429","times":2,"resets_in_seconds":30}"#,
    )]);
    let generations = "/v1/images/generations";
    assert_eq!(book.choose(Some("sk-b"), generations, &config), None);
    let first = book.choose(Some("sk-a"), generations, &config).unwrap();
    assert_eq!((first.kind, first.resets_in_seconds), (FaultKind::UsageLimit, 30));
    assert_eq!(book.rules()[0].times, Some(1));
    assert!(book.choose(Some("sk-a"), generations, &config).is_some());
    assert_eq!(book.choose(Some("sk-a"), generations, &config), None);
    assert!(book.rules().is_empty());
}

#[test]
fn rules_without_key_match_everyone_but_only_image_paths_by_default() {
    let config = SimConfig::default();
    let book = FaultBook::new(1);
    book.add([rule(r#"{"key":null,"fault":"stall","stall_ms":250}"#)]);
    assert_eq!(book.choose(Some("x"), "/v1/models", &config), None);
    let fault = book.choose(None, "/v1/responses", &config).unwrap();
    assert_eq!(fault.stall, Duration::from_millis(250));
    // Without `times` the rule stays.
    assert!(book.choose(Some("y"), "/v1/images/edits", &config).is_some());
    book.clear();
    assert_eq!(book.choose(Some("y"), "/v1/images/edits", &config), None);
}

#[test]
fn a_rule_with_a_path_applies_only_there() {
    let config = SimConfig::default();
    let book = FaultBook::new(1);
    book.add([rule(r#"{"fault":"503","path":"/v1/models"}"#)]);
    assert_eq!(book.choose(None, "/v1/images/generations", &config), None);
    assert_eq!(
        book.choose(None, "/v1/models", &config).unwrap().kind,
        FaultKind::Unavailable503
    );
}

#[test]
fn random_faults_follow_the_rate() {
    let config = SimConfig {
        fault_rate: 0.3,
        random_faults: vec![FaultKind::BadGateway502, FaultKind::RateLimit],
        ..SimConfig::default()
    };
    let book = FaultBook::new(42);
    let faults: Vec<_> = (0..2000)
        .filter_map(|_| book.choose(None, "/v1/images/generations", &config))
        .collect();
    assert!(
        (450..750).contains(&faults.len()),
        "{} faults out of 2000",
        faults.len()
    );
    assert!(faults.iter().any(|f| f.kind == FaultKind::BadGateway502));
    assert!(faults.iter().any(|f| f.kind == FaultKind::RateLimit));
    assert!(
        faults
            .iter()
            .all(|f| matches!(f.kind, FaultKind::BadGateway502 | FaultKind::RateLimit))
    );
    assert_eq!(book.choose(None, "/v1/models", &config), None);
    let never = SimConfig::default();
    assert!((0..100).all(|_| book.choose(None, "/v1/responses", &never).is_none()));
}

#[test]
fn model_rules_wait_for_the_main_model_and_leave_other_requests_alone() {
    let config = SimConfig::default();
    let book = FaultBook::new(1);
    book.add([rule(
        r#"{"key":"at-1","fault":"model_unsupported","model":"gpt-5.5","times":1}"#,
    )]);
    let responses = "/v1/responses";
    assert_eq!(
        book.choose(Some("at-1"), responses, &config),
        None,
        "the gate cannot see the model"
    );
    assert_eq!(
        book.choose_for_model(Some("at-1"), responses, "gpt-5", &config),
        None
    );
    assert_eq!(
        book.choose_for_model(Some("at-2"), responses, "gpt-5.5", &config),
        None
    );
    let fault = book
        .choose_for_model(Some("at-1"), responses, "gpt-5.5", &config)
        .unwrap();
    assert_eq!(fault.kind, FaultKind::ModelUnsupported);
    assert_eq!(
        book.choose_for_model(Some("at-1"), responses, "gpt-5.5", &config),
        None,
        "used up"
    );
    assert!(book.rules().is_empty());
    assert_eq!(
        "model_not_found".parse::<FaultKind>().unwrap(),
        FaultKind::ModelUnsupported
    );
}
