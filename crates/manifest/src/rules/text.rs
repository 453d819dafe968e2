//! Small value checkers shared by the rules: slugs, git ref names, timestamps, URLs (language tags are in
//! `langtag`).

use chrono::{DateTime, FixedOffset};

/// Whether `text` starts with a Windows drive letter (`C:`).
pub(crate) fn has_drive_letter(text: &str) -> bool {
    let bytes = text.as_bytes();
    bytes.len() >= 2 && bytes.first().is_some_and(u8::is_ascii_alphabetic) && bytes.get(1) == Some(&b':')
}

/// Whether `text` is a SHA-256 digest as the format writes it: 64 lowercase hex digits.
pub(crate) fn is_sha256_hex(text: &str) -> bool {
    text.len() == 64
        && text
            .bytes()
            .all(|b| b.is_ascii_digit() || (b'a'..=b'f').contains(&b))
}

/// Why `name` breaks the agentskills naming rules, if it does.
pub(crate) fn slug_problem(name: &str) -> Option<&'static str> {
    let length = name.chars().count();
    if length == 0 {
        Some("it is empty")
    } else if length > 64 {
        Some("it is longer than 64 characters")
    } else if name.chars().any(|c| c.is_ascii_uppercase()) {
        Some("it has uppercase letters")
    } else if !name
        .chars()
        .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit() || c == '-')
    {
        Some("it has characters other than a-z, 0-9 and -")
    } else if name.starts_with('-') || name.ends_with('-') {
        Some("it starts or ends with -")
    } else if name.contains("--") {
        Some("it has a double hyphen")
    } else {
        None
    }
}

/// A slug made from `name`: lowercase, other characters turned into single hyphens.
pub(crate) fn suggest_slug(name: &str) -> String {
    let mut out = String::new();
    for c in name.chars().flat_map(char::to_lowercase) {
        if c.is_ascii_lowercase() || c.is_ascii_digit() {
            out.push(c);
        } else if !out.ends_with('-') && !out.is_empty() {
            out.push('-');
        }
    }
    out.trim_end_matches('-')
        .chars()
        .take(64)
        .collect::<String>()
        .trim_end_matches('-')
        .to_owned()
}

/// Why `name` is not a valid git branch name (`git check-ref-format --branch`), if it is not.
pub(crate) fn git_ref_problem(name: &str) -> Option<&'static str> {
    if name.is_empty() {
        return Some("it is empty");
    }
    if name.chars().any(|c| c.is_control() || c == ' ') {
        return Some("it contains a space or control character");
    }
    if let Some(c) = name
        .chars()
        .find(|c| matches!(c, '~' | '^' | ':' | '?' | '*' | '[' | '\\'))
    {
        return Some(match c {
            '~' | '^' => "it contains ~ or ^",
            ':' => "it contains :",
            '\\' => "it contains a backslash",
            _ => "it contains ?, * or [",
        });
    }
    if name.contains("..") {
        return Some("it contains ..");
    }
    if name.contains("@{") || name == "@" {
        return Some("it contains @{ or is @");
    }
    if name.starts_with('/') || name.ends_with('/') || name.contains("//") {
        return Some("it starts or ends with / or has an empty component");
    }
    if name.ends_with('.') || name.ends_with(".lock") {
        return Some("it ends with . or .lock");
    }
    if name.starts_with('-') {
        return Some("it starts with -");
    }
    if name
        .split('/')
        .any(|part| part.starts_with('.') || part.ends_with(".lock"))
    {
        return Some("a component starts with . or ends with .lock");
    }
    None
}

/// Parse an RFC 3339 timestamp with an explicit offset (`Z` or `+hh:mm`) and a `T` between date and time.
pub(crate) fn rfc3339(text: &str) -> Result<DateTime<FixedOffset>, String> {
    // chrono also takes U+2212 (minus sign) in an offset; RFC 3339 has ASCII only, and so do the
    // parsers installers use.
    if let Some(other) = text.chars().find(|c| !c.is_ascii()) {
        return Err(format!(
            "it has the character {other:?} (U+{:04X}); RFC 3339 is written in ASCII (`-` and `+` in offsets)",
            u32::from(other)
        ));
    }
    if !matches!(text.as_bytes().get(10), Some(b'T' | b't')) {
        return Err("date and time must be separated by `T`".to_owned());
    }
    DateTime::parse_from_rfc3339(text).map_err(|e| match e.kind() {
        chrono::format::ParseErrorKind::TooShort => {
            "it ends early; an offset such as Z or +02:00 is required".to_owned()
        }
        _ => format!("it does not parse as RFC 3339 ({e})"),
    })
}

/// The parts of an absolute URL that the rules look at.
#[derive(Debug, Clone, PartialEq, Eq)]
pub(crate) struct UrlParts<'a> {
    pub scheme: String,
    pub host: &'a str,
    pub path: &'a str,
    pub has_userinfo: bool,
    pub has_query: bool,
    pub has_fragment: bool,
}

/// Split an absolute `scheme://authority/path?query#fragment` URL, or say why it is not one.
pub(crate) fn parse_url(text: &str) -> Result<UrlParts<'_>, &'static str> {
    if text.chars().any(|c| c.is_whitespace() || c.is_control()) {
        return Err("it contains whitespace or control characters");
    }
    let (scheme, rest) = text
        .split_once("://")
        .ok_or("it is not an absolute URL (no scheme://)")?;
    let valid_scheme = scheme.starts_with(|c: char| c.is_ascii_alphabetic())
        && scheme
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || matches!(c, '+' | '-' | '.'));
    if !valid_scheme {
        return Err("its scheme is not valid");
    }
    let (before_fragment, fragment) = match rest.split_once('#') {
        Some((a, _)) => (a, true),
        None => (rest, false),
    };
    let (before_query, query) = match before_fragment.split_once('?') {
        Some((a, _)) => (a, true),
        None => (before_fragment, false),
    };
    let (authority, path) = match before_query.find('/') {
        Some(i) => before_query.split_at(i),
        None => (before_query, ""),
    };
    let (userinfo, host_port) = match authority.rsplit_once('@') {
        Some((_, h)) => (true, h),
        None => (false, authority),
    };
    let (host, port) = split_host_port(host_port)?;
    if port.is_some_and(|p| !p.bytes().all(|b| b.is_ascii_digit())) {
        return Err("its port is not a number");
    }
    let host_ok = if let Some(literal) = host.strip_prefix('[').and_then(|h| h.strip_suffix(']')) {
        literal.contains(':')
            && literal
                .bytes()
                .all(|b| b.is_ascii_hexdigit() || matches!(b, b':' | b'.'))
    } else {
        !host.is_empty()
            && host
                .chars()
                .all(|c| c.is_alphanumeric() || matches!(c, '-' | '.' | '_' | '%'))
    };
    if !host_ok {
        return Err("it has no valid host");
    }
    Ok(UrlParts {
        scheme: scheme.to_ascii_lowercase(),
        host,
        path,
        has_userinfo: userinfo,
        has_query: query,
        has_fragment: fragment,
    })
}

/// Split `host[:port]`, where the host may be a bracketed IPv6 literal (`[::1]:8080`, RFC 3986 section 3.2.2).
fn split_host_port(host_port: &str) -> Result<(&str, Option<&str>), &'static str> {
    if host_port.starts_with('[') {
        let end = host_port.find(']').ok_or("its IPv6 host has no closing `]`")? + 1;
        let (host, rest) = host_port.split_at(end);
        return match rest.strip_prefix(':') {
            Some(port) => Ok((host, Some(port))),
            None if rest.is_empty() => Ok((host, None)),
            None => Err("its IPv6 host is followed by something other than a port"),
        };
    }
    Ok(match host_port.rsplit_once(':') {
        Some((host, port)) => (host, Some(port)),
        None => (host_port, None),
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn slugs() {
        assert_eq!(slug_problem("pdf-tools"), None);
        assert_eq!(slug_problem("a"), None);
        assert_eq!(slug_problem("Pdf"), Some("it has uppercase letters"));
        assert_eq!(slug_problem("-a"), Some("it starts or ends with -"));
        assert_eq!(slug_problem("a--b"), Some("it has a double hyphen"));
        assert_eq!(
            slug_problem("a_b"),
            Some("it has characters other than a-z, 0-9 and -")
        );
        assert_eq!(
            slug_problem(&"a".repeat(65)),
            Some("it is longer than 64 characters")
        );
        assert_eq!(suggest_slug("My PDF_Tools!"), "my-pdf-tools");
    }

    #[test]
    fn git_refs() {
        assert_eq!(git_ref_problem("main"), None);
        assert_eq!(git_ref_problem("release/1.2"), None);
        assert_eq!(git_ref_problem("a..b"), Some("it contains .."));
        assert_eq!(
            git_ref_problem("feature x"),
            Some("it contains a space or control character")
        );
        assert_eq!(git_ref_problem("x.lock"), Some("it ends with . or .lock"));
        assert_eq!(
            git_ref_problem("x/"),
            Some("it starts or ends with / or has an empty component")
        );
        assert_eq!(git_ref_problem("a@{1}"), Some("it contains @{ or is @"));
        assert_eq!(
            git_ref_problem("a/.hidden"),
            Some("a component starts with . or ends with .lock")
        );
    }

    #[test]
    fn timestamps() {
        assert!(rfc3339("2026-03-09T09:25:22.582508+00:00").is_ok());
        assert!(rfc3339("2026-03-09T09:25:22Z").is_ok());
        assert!(rfc3339("2026-03-09 09:25:22Z").is_err());
        assert!(rfc3339("2026-03-09T09:25:22").unwrap_err().contains("offset"));
        assert!(rfc3339("2026-13-09T09:25:22Z").is_err());
        // U+2212 MINUS SIGN, which chrono takes, is not RFC 3339.
        assert!(
            rfc3339("2026-05-01T12:00:00\u{2212}02:00")
                .unwrap_err()
                .contains("U+2212")
        );
        assert!(rfc3339("2026-05-01T12:00:00-02:00").is_ok());
    }

    #[test]
    fn urls() {
        let u = parse_url("https://raw.githubusercontent.com/o/r/main").unwrap();
        assert_eq!(
            (u.scheme.as_str(), u.host, u.path),
            ("https", "raw.githubusercontent.com", "/o/r/main")
        );
        assert!(parse_url("https://user@host/x").unwrap().has_userinfo);
        assert!(parse_url("https://host/x?y=1").unwrap().has_query);
        assert!(parse_url("https://host/x#f").unwrap().has_fragment);
        assert!(parse_url("https://host:8080/x").is_ok());
        assert!(parse_url("https://host:80a/x").is_err());
        assert!(parse_url("host/x").is_err());
        assert!(parse_url("https:///x").is_err());
        assert!(parse_url("https://ho st/x").is_err());
        assert_eq!(parse_url("HTTPS://Host/x").unwrap().scheme, "https");
        let v6 = parse_url("https://[::1]/a/b/main").unwrap();
        assert_eq!((v6.host, v6.path), ("[::1]", "/a/b/main"));
        let v6 = parse_url("https://user@[2001:db8::7]:8443/x").unwrap();
        assert_eq!((v6.host, v6.path, v6.has_userinfo), ("[2001:db8::7]", "/x", true));
        assert!(parse_url("https://[::ffff:192.0.2.1]").is_ok());
        assert!(parse_url("https://[::1]:80a/x").is_err());
        assert!(parse_url("https://[::1/x").is_err());
        assert!(parse_url("https://[::1]x/y").is_err());
        assert!(parse_url("https://[]/x").is_err());
        assert!(parse_url("https://[g::1]/x").is_err());
    }
}
