//! Reading and writing the console's cookies (no cookie jar: two cookies do not need one).

use axum::http::header::{COOKIE, HeaderMap, HeaderValue};

/// The session cookie.
pub(crate) const SESSION_COOKIE: &str = "imagegate_session";
/// The cookie holding the login form's CSRF token (before there is a session).
pub(crate) const LOGIN_COOKIE: &str = "imagegate_login";

/// The value of cookie `name` in the request's `Cookie` headers.
pub(crate) fn read(headers: &HeaderMap, name: &str) -> Option<String> {
    headers
        .get_all(COOKIE)
        .iter()
        .filter_map(|value| value.to_str().ok())
        .flat_map(|line| line.split(';'))
        .filter_map(|pair| pair.trim().split_once('='))
        .find(|(key, _)| *key == name)
        .map(|(_, value)| value.trim_matches('"').to_owned())
}

/// Whether the request came over TLS as far as we can tell, or cookies are configured `Secure`.
pub(crate) fn should_be_secure(headers: &HeaderMap, configured: bool, base_url_hint: Option<&str>) -> bool {
    let forwarded_https = headers
        .get("x-forwarded-proto")
        .and_then(|v| v.to_str().ok())
        .is_some_and(|v| v.trim().eq_ignore_ascii_case("https"));
    let hint_https = base_url_hint.is_some_and(|url| url.starts_with("https://"));
    configured || forwarded_https || hint_https
}

/// A `Set-Cookie` value: HttpOnly, SameSite=Lax, path `/`, `Secure` if asked; `max_age` in
/// seconds (0 deletes the cookie).
pub(crate) fn set(name: &str, value: &str, max_age: u64, secure: bool) -> HeaderValue {
    let secure = if secure { "; Secure" } else { "" };
    let text = format!("{name}={value}; Path=/; HttpOnly; SameSite=Lax; Max-Age={max_age}{secure}");
    // Names and values are ours (hex tokens), so this never fails; fall back to a deletion.
    HeaderValue::from_str(&text).unwrap_or_else(|_| HeaderValue::from_static("imagegate_session=; Max-Age=0"))
}

/// A `Set-Cookie` value that deletes cookie `name`.
pub(crate) fn clear(name: &str, secure: bool) -> HeaderValue {
    set(name, "", 0, secure)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn reads_one_cookie_among_many() {
        let mut headers = HeaderMap::new();
        headers.append(
            COOKIE,
            HeaderValue::from_static("a=1; imagegate_session=abc ; b=2"),
        );
        headers.append(COOKIE, HeaderValue::from_static("imagegate_login=xyz"));
        assert_eq!(read(&headers, SESSION_COOKIE).as_deref(), Some("abc"));
        assert_eq!(read(&headers, LOGIN_COOKIE).as_deref(), Some("xyz"));
        assert_eq!(read(&headers, "missing"), None);
    }

    #[test]
    fn cookie_flags() {
        let plain = set(SESSION_COOKIE, "tok", 60, false);
        assert_eq!(
            plain,
            "imagegate_session=tok; Path=/; HttpOnly; SameSite=Lax; Max-Age=60"
        );
        let secure = set(SESSION_COOKIE, "tok", 60, true);
        assert!(secure.to_str().unwrap().ends_with("; Secure"));
        assert!(clear(LOGIN_COOKIE, false).to_str().unwrap().contains("Max-Age=0"));
    }

    #[test]
    fn secure_when_forwarded_over_tls_or_configured() {
        let mut headers = HeaderMap::new();
        assert!(!should_be_secure(&headers, false, None));
        assert!(should_be_secure(&headers, true, None));
        assert!(should_be_secure(&headers, false, Some("https://img.example.com")));
        headers.insert("x-forwarded-proto", HeaderValue::from_static("https"));
        assert!(should_be_secure(&headers, false, None));
    }
}
