use super::*;

fn jwt(claims: &Value) -> String {
    let encode = |value: &Value| URL_SAFE_NO_PAD.encode(value.to_string());
    format!(
        "{}.{}.c2lnbmF0dXJl",
        encode(&serde_json::json!({"alg": "RS256"})),
        encode(claims)
    )
}

#[test]
fn the_flat_json_form_is_read_and_written_back_the_same() {
    let stored = Secret::new(
        r#"{"access_token":"at-1","refresh_token":"rt-1","expires_at":1800000000,"account_id":"acc-9"}"#,
    );
    let credential = CodexCredential::parse(&stored).unwrap();
    assert_eq!(credential.access_token, "at-1");
    assert_eq!(credential.refresh_token.as_deref(), Some("rt-1"));
    assert_eq!(credential.expires_at, Some(1_800_000_000));
    assert_eq!(credential.account_id.as_deref(), Some("acc-9"));
    assert_eq!(credential.to_secret(), stored);
}

#[test]
fn a_bare_string_is_an_access_token_without_refresh() {
    let credential = CodexCredential::parse(&Secret::new("  sk-or-at-123 \n")).unwrap();
    assert_eq!(credential.access_token, "sk-or-at-123");
    assert_eq!(
        (
            credential.refresh_token,
            credential.expires_at,
            credential.account_id
        ),
        (None, None, None)
    );
}

#[test]
fn the_codex_cli_auth_file_is_read_with_claims_from_the_tokens() {
    let access = jwt(&serde_json::json!({"exp": 1_900_000_000, "sub": "user"}));
    let id = jwt(&serde_json::json!({AUTH_CLAIM: {"chatgpt_account_id": "acct-from-id-token"}}));
    let file = serde_json::json!({"OPENAI_API_KEY": null, "last_refresh": "2026-01-01T00:00:00Z",
        "tokens": {"id_token": id, "access_token": access, "refresh_token": "rt-2"}});
    let credential = CodexCredential::parse(&Secret::new(file.to_string())).unwrap();
    assert_eq!(credential.access_token, access);
    assert_eq!(credential.refresh_token.as_deref(), Some("rt-2"));
    assert_eq!(credential.expires_at, Some(1_900_000_000));
    assert_eq!(credential.account_id.as_deref(), Some("acct-from-id-token"));
}

#[test]
fn expires_at_in_milliseconds_or_as_text_is_understood() {
    for expires in [r#"1800000000123"#, r#""1800000000""#, "1800000000.5"] {
        let text = format!(r#"{{"access_token":"a","expires_at":{expires}}}"#);
        let credential = CodexCredential::parse(&Secret::new(text)).unwrap();
        assert_eq!(credential.expires_at, Some(1_800_000_000), "{expires}");
    }
}

#[test]
fn only_a_refresh_token_means_refresh_first() {
    let credential = CodexCredential::parse(&Secret::new(r#"{"refresh_token":"rt-only"}"#)).unwrap();
    assert!(credential.access_token.is_empty());
    assert!(credential.is_expired(0));
    assert!(credential.expires_within(0, 0));
}

#[test]
fn expiry_checks_use_the_skew() {
    let credential = CodexCredential {
        access_token: "a".into(),
        refresh_token: None,
        expires_at: Some(1000),
        account_id: None,
    };
    assert!(!credential.expires_within(900, 60));
    assert!(credential.expires_within(940, 60));
    assert!(!credential.is_expired(999));
    assert!(credential.is_expired(1000));
    let unknown = CodexCredential {
        expires_at: None,
        ..credential
    };
    assert!(!unknown.expires_within(i64::MAX, 60));
}

#[test]
fn unusable_credentials_are_refused_without_quoting_them() {
    let broken = Secret::new(r#"{"access_token": "secret-at-value", "#);
    let err = CodexCredential::parse(&broken).unwrap_err();
    assert!(matches!(err, CredentialError::NotJson { .. }));
    assert!(!err.to_string().contains("secret-at-value"));
    let wrong_type = Secret::new(r#"{"access_token": 12345678}"#);
    let err = CodexCredential::parse(&wrong_type).unwrap_err();
    assert!(!err.to_string().contains("12345678"), "{err}");
    assert_eq!(
        CodexCredential::parse(&Secret::new(r#"{"account_id":"x"}"#)),
        Err(CredentialError::NoToken)
    );
    assert_eq!(
        CodexCredential::parse(&Secret::new("  ")),
        Err(CredentialError::Empty)
    );
}

#[test]
fn debug_hides_the_tokens() {
    let credential = CodexCredential {
        access_token: "at-very-secret".into(),
        refresh_token: Some("rt-very-secret".into()),
        expires_at: Some(5),
        account_id: Some("acc".into()),
    };
    let shown = format!("{credential:?}");
    assert!(!shown.contains("very-secret"), "{shown}");
    assert!(shown.contains("acc"));
}

#[test]
fn malformed_jwts_give_no_claims() {
    assert_eq!(jwt_expiry("a.b"), None);
    assert_eq!(jwt_expiry("a.!!!.c"), None);
    assert_eq!(jwt_expiry("a.b.c.d"), None);
    assert_eq!(jwt_account_id(&jwt(&serde_json::json!([1, 2]))), None);
}
