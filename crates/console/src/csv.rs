//! CSV export of usage records (RFC 4180 quoting; text that a spreadsheet would run as a formula
//! gets a `'` in front).

use std::borrow::Cow;
use std::fmt::Write as _;

use imagegate_store::UsageEntry;

use crate::pages::usage_table::Names;

/// The header line.
pub(crate) const HEADER: &str = "created_at,request_id,user,key,group,account,endpoint,model,size_requested,\
size_produced,quality,output_format,n,images,stream,status,error_code,input_tokens,output_tokens,total_tokens,\
latency_ms\r\n";

/// What a formula starts with.
const FORMULA_START: [char; 6] = ['=', '+', '-', '@', '\t', '\r'];

/// One cell: quoted when it holds a comma, quote or line break; neutralised where a formula could
/// start: at its start, and after each `;` (the list separator of many locales, where a
/// spreadsheet opening the file may start a new cell whatever the quotes say).
pub(crate) fn cell(text: &str) -> Cow<'_, str> {
    let text = neutralised(text);
    if text.contains([',', '"', '\n', '\r']) {
        Cow::Owned(format!("\"{}\"", text.replace('"', "\"\"")))
    } else {
        text
    }
}

/// `text` with a `'` before each piece (between `;`s) that starts like a formula.
fn neutralised(text: &str) -> Cow<'_, str> {
    if !text.split(';').any(|piece| piece.starts_with(FORMULA_START)) {
        return Cow::Borrowed(text);
    }
    let mut out = String::with_capacity(text.len() + 4);
    for (index, piece) in text.split(';').enumerate() {
        if index > 0 {
            out.push(';');
        }
        if piece.starts_with(FORMULA_START) {
            out.push('\'');
        }
        out.push_str(piece);
    }
    Cow::Owned(out)
}

/// One record as a CSV line (ending in CRLF).
pub(crate) fn row(entry: &UsageEntry, names: &Names) -> String {
    let r = &entry.record;
    let opt = |v: &Option<String>| v.clone().unwrap_or_default();
    let fields: [String; 21] = [
        r.created_at.to_string(),
        r.request_id.clone(),
        r.user_id.map(|id| names.user(id)).unwrap_or_default(),
        r.key_id.map(|id| names.key(id)).unwrap_or_default(),
        r.group_id.map(|id| names.group(id)).unwrap_or_default(),
        r.account_id.map(|id| names.account(id)).unwrap_or_default(),
        r.endpoint.clone(),
        r.model.clone(),
        opt(&r.size_requested),
        opt(&r.size_produced),
        r.quality_produced
            .clone()
            .or_else(|| r.quality_requested.clone())
            .unwrap_or_default(),
        opt(&r.output_format),
        r.n.to_string(),
        r.images.to_string(),
        r.stream.to_string(),
        r.status.to_string(),
        opt(&r.error_code),
        r.tokens.input.to_string(),
        r.tokens.output.to_string(),
        r.tokens.total.to_string(),
        r.latency_ms.to_string(),
    ];
    let mut line = String::new();
    for (i, field) in fields.iter().enumerate() {
        if i > 0 {
            line.push(',');
        }
        let _ = write!(line, "{}", cell(field));
    }
    line.push_str("\r\n");
    line
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn quoting_and_formula_guard() {
        assert_eq!(cell("plain"), "plain");
        assert_eq!(cell("a,b"), "\"a,b\"");
        assert_eq!(cell("say \"hi\""), "\"say \"\"hi\"\"\"");
        assert_eq!(cell("=HYPERLINK(\"x\")"), "\"'=HYPERLINK(\"\"x\"\")\"");
        assert_eq!(cell("-1"), "'-1");
        assert_eq!(cell("line\nbreak"), "\"line\nbreak\"");
    }

    #[test]
    fn a_formula_after_a_semicolon_is_neutralised_too() {
        // Opened where `;` separates cells, "x;=1+1" would be two cells, the second a formula.
        assert_eq!(cell("x;=1+1"), "x;'=1+1");
        assert_eq!(cell("=a;b;@c"), "'=a;b;'@c");
        assert_eq!(cell("k;-1,2"), "\"k;'-1,2\"");
        assert_eq!(cell("a;b"), "a;b");
        assert!(matches!(cell("plain;text"), Cow::Borrowed(_)));
    }

    #[test]
    fn header_has_as_many_columns_as_rows() {
        let entry = UsageEntry {
            id: imagegate_store::UsageId(1),
            record: imagegate_store::UsageRecord::new("req-1", "/v1/images/generations", "gpt-image-2"),
        };
        let line = row(&entry, &Names::default());
        assert_eq!(HEADER.split(',').count(), line.split(',').count());
        assert!(line.contains(",req-1,"));
        assert!(line.ends_with(",0\r\n"));
    }
}
