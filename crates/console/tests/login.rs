//! Signing in and out: cookies, wrong passwords, the rate limit, CSRF on the login form.

#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

mod support;

use std::net::SocketAddr;
use std::time::Duration;

use axum::body::Body;
use axum::extract::ConnectInfo;
use axum::http::{Request, StatusCode, header};
use imagegate_console::{ConsoleConfig, LoginLimit};
use imagegate_store::NewUser;
use support::Console;

#[tokio::test]
async fn login_sets_an_httponly_lax_session_cookie_and_follows_next() {
    let console = Console::new().await;
    console.user("alice", "alice-password", false).await;

    let login = console.get("/login?next=%2Fusage", None).await;
    assert_eq!(login.status, StatusCode::OK);
    assert!(login.body.contains("name=\"next\" value=\"/usage\""));
    let login_cookie = login
        .set_cookies()
        .into_iter()
        .find(|c| c.starts_with("imagegate_login="))
        .unwrap();
    assert!(
        login_cookie.contains("HttpOnly") && login_cookie.contains("SameSite=Lax"),
        "{login_cookie}"
    );

    let cookie = format!("imagegate_login={}", login.cookie("imagegate_login").unwrap());
    let csrf = login.csrf();
    let reply = console
        .post(
            "/login",
            Some(&cookie),
            &[
                ("csrf", &csrf),
                ("username", "alice"),
                ("password", "alice-password"),
                ("next", "/usage"),
            ],
        )
        .await;
    assert_eq!(reply.status, StatusCode::SEE_OTHER);
    assert_eq!(reply.location(), "/usage");
    let session = reply
        .set_cookies()
        .into_iter()
        .find(|c| c.starts_with("imagegate_session="))
        .unwrap();
    assert!(session.contains("; HttpOnly"), "{session}");
    assert!(session.contains("; SameSite=Lax"), "{session}");
    assert!(session.contains("; Path=/"), "{session}");
    assert!(
        !session.contains("Secure"),
        "plain HTTP without configuration: {session}"
    );
    let token = reply.cookie("imagegate_session").unwrap();
    assert_eq!(token.len(), 64, "256 random bits as hex");

    let page = console
        .get("/usage", Some(&format!("imagegate_session={token}")))
        .await;
    assert_eq!(page.status, StatusCode::OK);
    assert!(page.body.contains("Signed in as alice."), "flash after sign-in");
    assert!(page.body.contains("alice"));
}

#[tokio::test]
async fn session_cookie_is_secure_behind_tls_or_when_configured() {
    let console = Console::new().await;
    console.user("alice", "alice-password", false).await;
    let login = console.get("/login", None).await;
    let cookie = format!("imagegate_login={}", login.cookie("imagegate_login").unwrap());
    let body = serde_html_form::to_string([
        ("csrf", login.csrf().as_str()),
        ("username", "alice"),
        ("password", "alice-password"),
    ])
    .unwrap();
    let request = Request::post("/login")
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .header(header::COOKIE, cookie)
        .header("x-forwarded-proto", "https")
        .body(Body::from(body))
        .unwrap();
    let reply = console.send(request).await;
    assert_eq!(reply.status, StatusCode::SEE_OTHER);
    assert!(
        reply
            .set_cookies()
            .iter()
            .any(|c| c.starts_with("imagegate_session=") && c.ends_with("; Secure"))
    );

    let configured = Console::with_config(ConsoleConfig {
        secure_cookies: true,
        ..ConsoleConfig::default()
    })
    .await;
    configured.user("bob", "bob-password", false).await;
    let reply = configured.try_login("bob", "bob-password").await;
    assert!(
        reply
            .set_cookies()
            .iter()
            .any(|c| c.starts_with("imagegate_session=") && c.ends_with("; Secure"))
    );
}

#[tokio::test]
async fn wrong_password_and_unknown_user_get_the_same_answer() {
    let console = Console::new().await;
    console.user("alice", "alice-password", false).await;
    let wrong = console.try_login("alice", "not-her-password").await;
    let unknown = console.try_login("mallory", "whatever-password").await;
    for reply in [&wrong, &unknown] {
        assert_eq!(reply.status, StatusCode::UNAUTHORIZED);
        assert!(reply.body.contains("Wrong user name or password."));
        assert!(reply.cookie("imagegate_session").is_none());
    }
    // A user without a password cannot sign in at all.
    console
        .store
        .create_user(NewUser {
            name: "robot".into(),
            ..NewUser::default()
        })
        .await
        .unwrap();
    assert_eq!(
        console.try_login("robot", "").await.status,
        StatusCode::UNAUTHORIZED
    );
}

#[tokio::test]
async fn failed_logins_are_rate_limited_per_user_name() {
    let limit = LoginLimit {
        max_failures: 3,
        max_failures_per_name: 100,
        max_failures_per_address: 100,
        window: Duration::from_secs(300),
    };
    let console = Console::with_config(ConsoleConfig {
        login_limit: limit,
        ..ConsoleConfig::default()
    })
    .await;
    console.user("alice", "alice-password", false).await;
    for _ in 0..3 {
        assert_eq!(
            console.try_login("alice", "guess-guess").await.status,
            StatusCode::UNAUTHORIZED
        );
    }
    // Even the right password is refused now, without revealing whether it was right.
    let blocked = console.try_login("ALICE", "alice-password").await;
    assert_eq!(blocked.status, StatusCode::TOO_MANY_REQUESTS);
    assert!(
        blocked
            .body
            .contains("Too many failed sign-ins. Try again in 5 minutes."),
        "{}",
        blocked.body
    );
    assert!(blocked.cookie("imagegate_session").is_none());
    // Other users are not affected (the test requests carry no client address).
    console.user("bob", "bob-password", false).await;
    assert_eq!(
        console.try_login("bob", "bob-password").await.status,
        StatusCode::SEE_OTHER
    );
}

#[tokio::test]
async fn sign_ins_sent_together_are_limited_like_sign_ins_sent_one_by_one() {
    let limit = LoginLimit {
        max_failures: 2,
        max_failures_per_name: 100,
        max_failures_per_address: 100,
        window: Duration::from_secs(300),
    };
    let console = Console::with_config(ConsoleConfig {
        login_limit: limit,
        ..ConsoleConfig::default()
    })
    .await;
    console.user("alice", "alice-password", false).await;
    let guesses = (0..12).map(|i| {
        let console = &console;
        async move { console.try_login("alice", &format!("guess-{i}")).await.status }
    });
    let statuses = futures::future::join_all(guesses).await;
    let checked = statuses
        .iter()
        .filter(|s| **s == StatusCode::UNAUTHORIZED)
        .count();
    let refused = statuses
        .iter()
        .filter(|s| **s == StatusCode::TOO_MANY_REQUESTS)
        .count();
    assert_eq!((checked, refused), (2, 10), "{statuses:?}");
}

/// Posts the login form from the client address `ip`.
async fn login_from(console: &Console, ip: [u8; 4], name: &str, password: &str) -> StatusCode {
    login_via(console, ip, None, name, password).await
}

/// Posts the login form from `ip`, with `X-Forwarded-For: forwarded_for` if given.
async fn login_via(
    console: &Console,
    ip: [u8; 4],
    forwarded_for: Option<&str>,
    name: &str,
    password: &str,
) -> StatusCode {
    let page = console.get("/login", None).await;
    let cookie = format!("imagegate_login={}", page.cookie("imagegate_login").unwrap());
    let body = serde_html_form::to_string([
        ("csrf", page.csrf().as_str()),
        ("username", name),
        ("password", password),
    ])
    .unwrap();
    let mut request = Request::post("/login")
        .header(header::CONTENT_TYPE, "application/x-www-form-urlencoded")
        .header(header::COOKIE, cookie)
        .body(Body::from(body))
        .unwrap();
    if let Some(forwarded_for) = forwarded_for {
        request
            .headers_mut()
            .insert("x-forwarded-for", forwarded_for.parse().unwrap());
    }
    request
        .extensions_mut()
        .insert(ConnectInfo(SocketAddr::from((ip, 40_000))));
    console.send(request).await.status
}

#[tokio::test]
async fn failed_logins_are_rate_limited_per_client_address() {
    let limit = LoginLimit {
        max_failures: 5,
        max_failures_per_name: 100,
        max_failures_per_address: 2,
        window: Duration::from_secs(300),
    };
    let console = Console::with_config(ConsoleConfig {
        login_limit: limit,
        ..ConsoleConfig::default()
    })
    .await;
    console.user("alice", "alice-password", false).await;
    assert_eq!(
        login_from(&console, [10, 0, 0, 1], "carol", "guess-guess").await,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        login_from(&console, [10, 0, 0, 1], "dave", "guess-guess").await,
        StatusCode::UNAUTHORIZED
    );
    assert_eq!(
        login_from(&console, [10, 0, 0, 1], "alice", "alice-password").await,
        StatusCode::TOO_MANY_REQUESTS
    );
    assert_eq!(
        login_from(&console, [10, 0, 0, 2], "alice", "alice-password").await,
        StatusCode::SEE_OTHER
    );
}

#[tokio::test]
async fn failures_from_one_address_do_not_lock_a_user_out_but_guesses_from_many_are_bounded() {
    let limit = LoginLimit {
        max_failures: 2,
        max_failures_per_name: 4,
        max_failures_per_address: 100,
        window: Duration::from_secs(300),
    };
    let console = Console::with_config(ConsoleConfig {
        login_limit: limit,
        ..ConsoleConfig::default()
    })
    .await;
    console.user("alice", "alice-password", false).await;
    let attacker = [10, 0, 0, 9];
    for _ in 0..2 {
        assert_eq!(
            login_from(&console, attacker, "alice", "guess-guess").await,
            StatusCode::UNAUTHORIZED
        );
    }
    assert_eq!(
        login_from(&console, attacker, "alice", "alice-password").await,
        StatusCode::TOO_MANY_REQUESTS,
        "that address is done with alice for now"
    );
    assert_eq!(
        login_from(&console, [10, 0, 0, 1], "alice", "alice-password").await,
        StatusCode::SEE_OTHER,
        "alice herself, elsewhere, still signs in"
    );
    // Her sign-in cleared the count over all addresses; guesses from two more spend it.
    for ip in [[10, 0, 0, 2], [10, 0, 0, 3]] {
        for _ in 0..2 {
            assert_eq!(
                login_from(&console, ip, "alice", "guess-guess").await,
                StatusCode::UNAUTHORIZED
            );
        }
    }
    assert_eq!(
        login_from(&console, [10, 0, 0, 4], "alice", "alice-password").await,
        StatusCode::TOO_MANY_REQUESTS,
        "four guesses at alice from anywhere: no more for a while"
    );
    // A name no user can have is counted like any other, under one bounded key.
    let long = "x".repeat(10_000);
    assert_eq!(
        login_from(&console, [10, 0, 0, 5], &long, "guess-guess").await,
        StatusCode::UNAUTHORIZED
    );
}

#[tokio::test]
async fn login_form_needs_its_csrf_token() {
    let console = Console::new().await;
    console.user("alice", "alice-password", false).await;
    let page = console.get("/login", None).await;
    let cookie = format!("imagegate_login={}", page.cookie("imagegate_login").unwrap());
    let without = console
        .post(
            "/login",
            Some(&cookie),
            &[("username", "alice"), ("password", "alice-password")],
        )
        .await;
    assert_eq!(without.status, StatusCode::FORBIDDEN);
    let no_cookie = console
        .post(
            "/login",
            None,
            &[
                ("csrf", &page.csrf()),
                ("username", "alice"),
                ("password", "alice-password"),
            ],
        )
        .await;
    assert_eq!(no_cookie.status, StatusCode::FORBIDDEN);
    assert!(without.cookie("imagegate_session").is_none() && no_cookie.cookie("imagegate_session").is_none());
}

#[tokio::test]
async fn logout_ends_the_session() {
    let console = Console::new().await;
    console.user("alice", "alice-password", false).await;
    let browser = console.login("alice", "alice-password").await;
    let confirm = console.get("/logout", Some(&browser.cookie)).await;
    assert_eq!(confirm.status, StatusCode::OK);
    assert!(confirm.body.contains("action=\"/logout\""));

    let reply = console.submit(&browser, "/logout", &[]).await;
    assert_eq!(reply.status, StatusCode::SEE_OTHER);
    assert_eq!(reply.location(), "/login?signed_out=1");
    assert!(
        reply
            .set_cookies()
            .iter()
            .any(|c| c.starts_with("imagegate_session=;") && c.contains("Max-Age=0"))
    );
    let signed_out = console.get("/login?signed_out=1", None).await;
    assert!(signed_out.body.contains("You are signed out."));

    let after = console.get("/keys", Some(&browser.cookie)).await;
    assert_eq!(after.status, StatusCode::SEE_OTHER);
    assert_eq!(after.location(), "/login?next=%2Fkeys");
}

#[tokio::test]
async fn pages_carry_security_headers_and_assets_are_served() {
    let console = Console::new().await;
    let page = console.get("/login", None).await;
    let csp = page.headers["content-security-policy"].to_str().unwrap();
    assert!(
        csp.contains("script-src 'self'") && csp.contains("frame-ancestors 'none'"),
        "{csp}"
    );
    assert_eq!(page.headers["x-frame-options"], "DENY");
    assert_eq!(page.headers["cache-control"], "no-store");
    let css = console.get("/assets/style.css", None).await;
    assert_eq!(css.status, StatusCode::OK);
    assert!(
        css.headers["content-type"]
            .to_str()
            .unwrap()
            .starts_with("text/css")
    );
    assert!(css.body.contains(":focus-visible"));
    let js = console.get("/assets/console.js", None).await;
    assert!(js.body.contains("data-copy"));
}

/// A console trusting the proxies in 10.0.0.0/8, allowing 2 failures per address, with user
/// `alice`.
async fn behind_balancers_in_10_0_0_0_8() -> Console {
    let limit = LoginLimit {
        max_failures: 5,
        max_failures_per_name: 100,
        max_failures_per_address: 2,
        window: Duration::from_secs(300),
    };
    let console = Console::with_config(ConsoleConfig {
        login_limit: limit,
        trusted_proxies: vec!["10.0.0.0/8".parse().unwrap()],
        ..ConsoleConfig::default()
    })
    .await;
    console.user("alice", "alice-password", false).await;
    console
}

#[tokio::test]
async fn behind_a_trusted_balancer_each_client_has_its_own_address_allowance() {
    let console = behind_balancers_in_10_0_0_0_8().await;
    let balancer = [10, 0, 0, 1];
    for name in ["carol", "dave"] {
        let status = login_via(&console, balancer, Some("198.51.100.7"), name, "guess").await;
        assert_eq!(status, StatusCode::UNAUTHORIZED);
    }
    // That client is out of attempts, even naming another address in front of the balancer's.
    let spoofed = login_via(
        &console,
        balancer,
        Some("198.51.100.99, 198.51.100.7"),
        "alice",
        "alice-password",
    )
    .await;
    assert_eq!(spoofed, StatusCode::TOO_MANY_REQUESTS);
    // Another client behind the same balancer is not.
    let other = login_via(
        &console,
        balancer,
        Some("198.51.100.8"),
        "alice",
        "alice-password",
    )
    .await;
    assert_eq!(other, StatusCode::SEE_OTHER);
}

#[tokio::test]
async fn a_client_not_behind_a_trusted_proxy_cannot_pick_its_address() {
    let console = behind_balancers_in_10_0_0_0_8().await;
    let client = [203, 0, 113, 9];
    for (name, forwarded_for) in [("carol", "198.51.100.1"), ("dave", "198.51.100.2")] {
        let status = login_via(&console, client, Some(forwarded_for), name, "guess").await;
        assert_eq!(status, StatusCode::UNAUTHORIZED);
    }
    let third = login_via(&console, client, Some("198.51.100.3"), "alice", "alice-password").await;
    assert_eq!(
        third,
        StatusCode::TOO_MANY_REQUESTS,
        "counted under its own address"
    );
}
