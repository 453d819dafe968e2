use super::*;

fn err(input: &str) -> (SyntaxErrorKind, LineCol, String) {
    let e = parse(input.as_bytes()).unwrap_err();
    let at = LineIndex::new(input).locate(input, e.offset);
    (e.kind, at, e.message)
}

fn lc(line: usize, column: usize) -> LineCol {
    LineCol { line, column }
}

#[test]
fn spans_cover_values_and_keys() {
    let text = "{\n  \"a\": [1, \"x\"],\n  \"b\": null\n}";
    let root = parse(text.as_bytes()).unwrap();
    let a = root.member("a").unwrap();
    assert_eq!(&text[a.key_span.start..a.key_span.end], "\"a\"");
    assert_eq!(&text[a.value.span.start..a.value.span.end], "[1, \"x\"]");
    let x = root.pointer("/a/1").unwrap();
    assert_eq!(x.as_str(), Some("x"));
    let index = LineIndex::new(text);
    assert_eq!(index.locate(text, x.span.start), lc(2, 12));
    assert_eq!(root.pointer("/b").unwrap().value, NodeValue::Null);
    assert!(root.pointer("/a/2").is_none());
    assert!(root.pointer("a").is_none());
}

#[test]
fn numbers_keep_their_text() {
    let root = parse(br#"[12, 12.0, 1e3, -0, 1E+2]"#).unwrap();
    let raw: Vec<_> = root
        .as_array()
        .unwrap()
        .iter()
        .map(|n| match &n.value {
            NodeValue::Number(s) => s.clone(),
            other => panic!("{other:?}"),
        })
        .collect();
    assert_eq!(raw, ["12", "12.0", "1e3", "-0", "1E+2"]);
}

#[test]
fn escapes_and_surrogate_pairs_resolve() {
    let root = parse(br#""a\"\\\/\b\f\n\r\t\u00e9\ud83d\ude00""#).unwrap();
    assert_eq!(root.as_str(), Some("a\"\\/\u{8}\u{c}\n\r\t\u{e9}\u{1F600}"));
}

#[test]
fn duplicate_keys_are_kept_and_last_wins() {
    let root = parse(br#"{"k": 1, "k": 2}"#).unwrap();
    assert_eq!(root.as_object().unwrap().len(), 2);
    assert_eq!(root.to_value(), serde_json::json!({"k": 2}));
}

#[test]
fn syntax_errors_point_at_the_offending_character() {
    assert_eq!(err("{\"a\": 1,}").0, SyntaxErrorKind::TrailingComma);
    assert_eq!(err("{\"a\": 1,}").1, lc(1, 8));
    assert_eq!(err("[1,\n  ]").1, lc(1, 3));
    assert_eq!(err("{\n  // hi\n}").0, SyntaxErrorKind::Comment);
    assert_eq!(err("{\n  // hi\n}").1, lc(2, 3));
    assert_eq!(err("[1 /* x */]").0, SyntaxErrorKind::Comment);
    assert_eq!(err("\u{feff}{}").0, SyntaxErrorKind::Bom);
    assert_eq!(err("{\"a\" 1}").1, lc(1, 6));
    assert_eq!(err("[01]").1, lc(1, 3));
    assert_eq!(err("[1.]").1, lc(1, 4));
    assert_eq!(err("[tru]").1, lc(1, 5));
    assert_eq!(err("[NaN]").1, lc(1, 2));
    assert_eq!(err("{} x").1, lc(1, 4));
    assert_eq!(err("\"é\u{1}\"").1, lc(1, 3));
    assert_eq!(err("").2, "unexpected end of input; expected a JSON value");
    assert_eq!(err("[\"\\ud800\"]").1, lc(1, 3));
    assert_eq!(
        err("{'a': 1}").2,
        "unexpected character `'`; expected a string key in double quotes"
    );
}

#[test]
fn invalid_utf8_is_reported_at_the_first_bad_byte() {
    let e = parse(b"{\"a\": \"\xff\"}").unwrap_err();
    assert_eq!((e.kind, e.offset), (SyntaxErrorKind::Utf8, 7));
}

#[test]
fn nesting_is_bounded() {
    let deep = "[".repeat(MAX_DEPTH + 1);
    assert_eq!(parse(deep.as_bytes()).unwrap_err().kind, SyntaxErrorKind::Depth);
    let ok = format!("{}{}", "[".repeat(MAX_DEPTH), "]".repeat(MAX_DEPTH));
    assert!(parse(ok.as_bytes()).is_ok());
}

#[test]
fn pointer_tokens_are_unescaped() {
    let root = parse(br#"{"a/b": {"~c": true}}"#).unwrap();
    assert_eq!(root.pointer("/a~1b/~0c").unwrap().value, NodeValue::Bool(true));
    assert_eq!(escape_token("a/b~c"), "a~1b~0c");
}

#[test]
fn line_text_strips_line_endings() {
    let text = "one\r\ntwo\nthree";
    let index = LineIndex::new(text);
    assert_eq!(index.line_count(), 3);
    assert_eq!(index.line_text(text, 1), "one");
    assert_eq!(index.line_text(text, 3), "three");
    assert_eq!(index.line_text(text, 4), "");
}

#[test]
fn a_lone_carriage_return_ends_a_line_as_editors_show_it() {
    let text = "{\r  \"a\": 1,\r\n  \"b\": x\r}";
    let index = LineIndex::new(text);
    assert_eq!(index.line_count(), 4);
    assert_eq!(index.line_text(text, 1), "{");
    assert_eq!(index.line_text(text, 2), "  \"a\": 1,");
    assert_eq!(index.line_text(text, 3), "  \"b\": x");
    assert_eq!(index.locate(text, text.find('x').unwrap()), lc(3, 8));
    assert_eq!(index.locate(text, text.len() - 1), lc(4, 1));
}

/// Line and column counted the slow, obvious way.
fn naive(text: &str, offset: usize) -> LineCol {
    let before = &text[..offset];
    let line_start = before.rfind('\n').map_or(0, |i| i + 1);
    lc(
        before.matches('\n').count() + 1,
        text[line_start..offset].chars().count() + 1,
    )
}

#[test]
fn columns_count_characters_on_long_lines_across_blocks() {
    // Long lines of 1- to 4-byte characters crossing many table blocks, CRLF and LF lines, a last line
    // without newline.
    let unit = "a\u{e9}\u{4e2d}\u{1F600}\"x\": 1, ";
    let long = unit.repeat(700);
    let text = format!("{{\r\n{long}\n\n{}\nend {long}", "b".repeat(3000));
    let index = LineIndex::new(&text);
    for offset in (0..=text.len()).filter(|&o| text.is_char_boundary(o)) {
        assert_eq!(
            index.locate(&text, offset),
            naive(&text, offset),
            "offset {offset}"
        );
    }
    // Offsets inside a character or past the end are clamped to the boundary before them.
    let inside = text.find('\u{1F600}').unwrap() + 2;
    assert_eq!(index.locate(&text, inside), naive(&text, inside - 2));
    assert_eq!(index.locate(&text, text.len() + 7), naive(&text, text.len()));
}

#[test]
fn columns_in_ascii_text_are_byte_distances() {
    let text = format!("{{\n  \"a\": [{}]\n}}", "1, ".repeat(5000));
    let index = LineIndex::new(&text);
    for offset in [0, 1, 2, 5, 100, 4097, text.len() - 2, text.len()] {
        assert_eq!(
            index.locate(&text, offset),
            naive(&text, offset),
            "offset {offset}"
        );
    }
}

#[test]
fn syntax_errors_say_what_was_expected_and_found() {
    let pair = |input: &[u8]| {
        let e = parse(input).unwrap_err();
        (e.expected, e.found)
    };
    let depth = "[".repeat(MAX_DEPTH + 1);
    let cases: [(&[u8], &str, &str); 9] = [
        (b"{\"a\" 1}", "`:` after the key", "`1`"),
        (b"", "a JSON value", "end of input"),
        (
            b"{\"a\": 1,}",
            "another value after `,`, or `}` without the comma",
            "`,` directly before `}`",
        ),
        (
            b"[1 /* x */]",
            "whitespace or a JSON value; JSON has no comments",
            "the comment opener `/*`",
        ),
        (
            b"\xEF\xBB\xBF{}",
            "UTF-8 text without a byte order mark",
            "the UTF-8 byte order mark EF BB BF",
        ),
        (
            b"\xFF\xFE{}",
            "UTF-8 text without a byte order mark",
            "the UTF-16 byte order mark FF FE",
        ),
        (b"{\"a\": \"\xff\"}", "a UTF-8 encoded character", "the bytes FF"),
        (
            b"[\"\\ud800\"]",
            "a \\u escape of a character (U+10000 and above as a surrogate pair)",
            "`\\ud800`",
        ),
        (
            depth.as_bytes(),
            "at most 128 nested arrays and objects",
            "`[` opening level 129",
        ),
    ];
    for (input, expected, found) in cases {
        assert_eq!(pair(input), (expected.to_owned(), found.to_owned()), "{input:?}");
    }
    assert_eq!(pair(b"\"a\x01\"").1, "`\\u{1}`");
}
