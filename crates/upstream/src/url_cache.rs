//! Parsed upstream URLs, kept per process: parsing `{base_url}/{path}` anew on every call cost about
//! 20,000 instructions per request (callgrind, see docs/benchmarks.md), a cached clone a few hundred.

use std::collections::HashMap;
use std::sync::{LazyLock, Mutex, PoisonError};

use reqwest::Url;

/// More distinct URLs than this (accounts times endpoints) empties the cache before the next insert.
const MAX_ENTRIES: usize = 4096;

static PARSED: LazyLock<Mutex<HashMap<String, Url>>> = LazyLock::new(Mutex::default);

/// The parsed form of `url`, or `None` if it does not parse (the caller then hands reqwest the text,
/// which reports the error as before).
pub(crate) fn parsed(url: &str) -> Option<Url> {
    let mut cache = PARSED.lock().unwrap_or_else(PoisonError::into_inner);
    if let Some(hit) = cache.get(url) {
        return Some(hit.clone());
    }
    let parsed = Url::parse(url).ok()?;
    if cache.len() >= MAX_ENTRIES {
        cache.clear();
    }
    cache.insert(url.to_owned(), parsed.clone());
    Some(parsed)
}

#[cfg(test)]
mod tests {
    use super::parsed;

    #[test]
    fn cached_urls_equal_a_fresh_parse() {
        let text = "http://127.0.0.1:9/v1/images/generations";
        let first = parsed(text).unwrap();
        let second = parsed(text).unwrap();
        assert_eq!(first, reqwest::Url::parse(text).unwrap());
        assert_eq!(first, second);
        assert_eq!(
            parsed("http://127.0.0.1:9/v1/responses").unwrap().path(),
            "/v1/responses"
        );
    }

    #[test]
    fn unparsable_urls_are_not_cached() {
        assert!(parsed("not a url").is_none());
        assert!(parsed("not a url").is_none());
    }
}
