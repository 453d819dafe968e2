//! `apis[]` rules.

use std::collections::HashMap;

use super::langtag::is_language_tag;
use super::lists::{blank, slug, string_list};
use super::skills::{unique, unique_path};
use super::text::parse_url;
use super::{Doc, Rule};
use crate::finding::{Sink, quote};

pub(crate) fn check(doc: &Doc<'_>, sink: &mut Sink) {
    let mut ids = HashMap::new();
    let mut paths = HashMap::new();
    for entry in &doc.apis {
        let api = entry.obj();
        if let Some(id) = api.str("id") {
            slug(Rule::ApiId, &id, "API id", sink);
            unique(&id, &mut ids, Rule::ApiDupId, "API id", sink);
        }
        for key in ["title", "product"] {
            if let Some(field) = api.str(key) {
                blank(&field, sink);
            }
        }
        if let Some(language) = api.str("language")
            && !is_language_tag(language.text)
        {
            let draft = sink
                .add(
                    Rule::ApiLanguage,
                    &language.ptr(),
                    language.span(),
                    format!("language {} is not a BCP 47 tag", quote(language.text)),
                )
                .expected("a language tag such as en, zh or zh-CN")
                .found(quote(language.text));
            let fixed = language.text.replace('_', "-");
            if fixed != language.text && is_language_tag(&fixed) {
                draft.hint(format!(
                    "BCP 47 separates subtags with `-`: write {}.",
                    quote(&fixed)
                ));
            }
        }
        if let Some(path) = api.str("path") {
            if !path.text.ends_with(".md") {
                sink.add(
                    Rule::ApiPathExt,
                    &path.ptr(),
                    path.span(),
                    "the API document is not a .md file",
                )
                .expected("a path ending in .md")
                .found(quote(path.text));
            }
            unique_path(&path, &mut paths, Rule::ApiDupPath, "API path", sink);
        }
        string_list(api, "tags", Rule::ListDup, sink);
        for url in string_list(api, "source_urls", Rule::ApiSourceDup, sink) {
            match parse_url(url.text) {
                Ok(parts) if parts.scheme == "https" => {}
                Ok(parts) if parts.scheme == "http" => {
                    sink.add(
                        Rule::ApiSourceHttp,
                        &url.ptr(),
                        url.span(),
                        "the source URL uses plain http",
                    )
                    .expected("https://...")
                    .found(quote(url.text));
                }
                Ok(parts) => {
                    sink.add(
                        Rule::ApiSourceUrl,
                        &url.ptr(),
                        url.span(),
                        format!("the source URL has the scheme `{}`", parts.scheme),
                    )
                    .expected("an absolute http(s) URL")
                    .found(quote(url.text));
                }
                Err(why) => {
                    sink.add(
                        Rule::ApiSourceUrl,
                        &url.ptr(),
                        url.span(),
                        format!("the source URL is not usable: {why}"),
                    )
                    .expected("an absolute http(s) URL")
                    .found(quote(url.text));
                }
            }
        }
    }
}
