//! Well-formed BCP 47 language tags (RFC 5646, section 2.1): the `Language-Tag` grammar, checked here and
//! mirrored by the JSON Schema's `language` pattern. Well-formed, not valid: subtags are not looked up in the
//! IANA registry, and repeated variants or extensions are not refused.

/// The irregular grandfathered tags: well-formed although the `langtag` production does not match them.
/// (The regular grandfathered tags, such as `zh-min-nan`, match `langtag`.)
const IRREGULAR: [&str; 17] = [
    "en-GB-oed",
    "i-ami",
    "i-bnn",
    "i-default",
    "i-enochian",
    "i-hak",
    "i-klingon",
    "i-lux",
    "i-mingo",
    "i-navajo",
    "i-pwn",
    "i-tao",
    "i-tay",
    "i-tsu",
    "sgn-BE-FR",
    "sgn-BE-NL",
    "sgn-CH-DE",
];

fn alpha(s: &str, lo: usize, hi: usize) -> bool {
    (lo..=hi).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_alphabetic())
}

fn alnum(s: &str, lo: usize, hi: usize) -> bool {
    (lo..=hi).contains(&s.len()) && s.bytes().all(|b| b.is_ascii_alphanumeric())
}

/// `variant = 5*8alphanum / (DIGIT 3alphanum)`
fn variant(s: &str) -> bool {
    alnum(s, 5, 8) || (alnum(s, 4, 4) && s.starts_with(|c: char| c.is_ascii_digit()))
}

/// `singleton`: one letter or digit other than `x`.
fn singleton(s: &str) -> bool {
    alnum(s, 1, 1) && !s.eq_ignore_ascii_case("x")
}

/// `privateuse = "x" 1*("-" (1*8alphanum))`, given the subtags after the `x`.
fn private_use(rest: &[&str]) -> bool {
    !rest.is_empty() && rest.iter().all(|p| alnum(p, 1, 8))
}

/// Whether `tag` is a well-formed BCP 47 language tag, case-insensitively:
///
/// ```text
/// langtag  = language ["-" script] ["-" region] *("-" variant) *("-" extension) ["-" privateuse]
/// language = 2*3ALPHA ["-" extlang] / 4ALPHA / 5*8ALPHA     extlang = 3ALPHA *2("-" 3ALPHA)
/// script = 4ALPHA   region = 2ALPHA / 3DIGIT   extension = singleton 1*("-" (2*8alphanum))
/// Language-Tag = langtag / privateuse / grandfathered
/// ```
///
/// Every subtag kind has its own length or shape, so reading the subtags greedily in this order decides.
pub(crate) fn is_language_tag(tag: &str) -> bool {
    if IRREGULAR.iter().any(|g| g.eq_ignore_ascii_case(tag)) {
        return true;
    }
    let parts: Vec<&str> = tag.split('-').collect();
    let at = |i: usize| parts.get(i).copied().unwrap_or_default();
    let language = at(0);
    if language.eq_ignore_ascii_case("x") {
        return private_use(parts.get(1..).unwrap_or_default());
    }
    let mut i = 1;
    if alpha(language, 2, 3) {
        while i <= 3 && alpha(at(i), 3, 3) {
            i += 1; // extlang
        }
    } else if !alpha(language, 4, 8) {
        return false;
    }
    if alpha(at(i), 4, 4) {
        i += 1; // script
    }
    if alpha(at(i), 2, 2) || (at(i).len() == 3 && at(i).bytes().all(|b| b.is_ascii_digit())) {
        i += 1; // region
    }
    while variant(at(i)) {
        i += 1;
    }
    while singleton(at(i)) {
        i += 1;
        let first = i;
        while alnum(at(i), 2, 8) {
            i += 1;
        }
        if i == first {
            return false; // an extension needs a subtag
        }
    }
    if at(i).eq_ignore_ascii_case("x") {
        return private_use(parts.get(i + 1..).unwrap_or_default());
    }
    i == parts.len()
}

/// Well-formed tags, from RFC 5646 appendix A among others (the schema's pattern is tested on them too).
#[cfg(test)]
pub(super) const WELL_FORMED: &[&str] = &[
    "en",
    "zh",
    "zh-CN",
    "zh-Hant-TW",
    "sr-Latn",
    "es-419",
    "de-CH-1996",
    "zh-yue",
    "zh-cmn-Hans-CN",
    "zh-yue-HK",
    "abc-def-ghi-jkl",
    "sl-rozaj-biske",
    "hy-Latn-IT-arevela",
    "de-DE-u-co-phonebk",
    "en-US-u-islamcal",
    "en-a-myext-b-another",
    "en-x-private",
    "de-CH-x-phonebk",
    "az-Arab-x-AZE-derbend",
    "qaa-Qaaa-QM-x-southern",
    "x-klingon",
    "X-WHATEVER",
    "i-klingon",
    "en-gb-OED",
    "zh-min-nan",
    "abcd",
    "english",
    "EN-us",
];

/// Tags that are not well-formed.
#[cfg(test)]
pub(super) const MALFORMED: &[&str] = &[
    "",
    "e",
    "zh_CN",
    "english-us-",
    "en-",
    "-en",
    "en--US",
    "en-US-x",
    "x",
    "123",
    "toolonglang",
    "abc-def-ghi-jkl-mno",
    "de-419-DE",
    "en-a-b",
    "en-a",
    "a-DE",
    "ar-a-aaa-b-bbb-a",
    "en-US-abc",
    "de-x-toolongsubtag",
    "i-klingonx",
    "zh-\u{4e2d}",
];

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn language_tags_follow_the_rfc_5646_grammar() {
        for ok in WELL_FORMED {
            assert!(is_language_tag(ok), "{ok}");
        }
        for bad in MALFORMED {
            assert!(!is_language_tag(bad), "{bad}");
        }
    }
}
