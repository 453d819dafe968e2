//! The recursive-descent reader behind [`parse`].

use super::{MAX_DEPTH, Member, Node, NodeValue, Span, SyntaxError, SyntaxErrorKind};

/// Parse a whole document. The input must be UTF-8 without a byte order mark and hold exactly one JSON
/// value, optionally surrounded by whitespace.
///
/// # Errors
///
/// The first [`SyntaxError`], with the byte offset of the offending character.
pub fn parse(bytes: &[u8]) -> Result<Node, SyntaxError> {
    if bytes.starts_with(&[0xEF, 0xBB, 0xBF]) {
        return Err(error(
            SyntaxErrorKind::Bom,
            0,
            "the file starts with a UTF-8 byte order mark (BOM); save it as UTF-8 without BOM",
            NO_BOM,
            "the UTF-8 byte order mark EF BB BF".to_owned(),
        ));
    }
    if bytes.starts_with(&[0xFF, 0xFE]) || bytes.starts_with(&[0xFE, 0xFF]) {
        return Err(error(
            SyntaxErrorKind::Bom,
            0,
            "the file starts with a UTF-16 byte order mark; the manifest must be UTF-8 without BOM",
            NO_BOM,
            format!(
                "the UTF-16 byte order mark {}",
                hex_bytes(bytes.get(..2).unwrap_or_default())
            ),
        ));
    }
    let text = std::str::from_utf8(bytes).map_err(|e| {
        let at = e.valid_up_to();
        let bad = bytes
            .get(at..at + e.error_len().unwrap_or(bytes.len() - at))
            .unwrap_or_default();
        error(
            SyntaxErrorKind::Utf8,
            at,
            "invalid UTF-8 byte sequence; the manifest must be UTF-8",
            "a UTF-8 encoded character",
            format!("the bytes {}", hex_bytes(bad)),
        )
    })?;
    let mut reader = Reader {
        text,
        bytes,
        pos: 0,
        depth: 0,
    };
    reader.skip_ws()?;
    let node = reader.value()?;
    reader.skip_ws()?;
    if reader.pos < bytes.len() {
        return Err(reader.unexpected("end of input after the top-level value"));
    }
    Ok(node)
}

/// `expected` of a byte order mark error.
const NO_BOM: &str = "UTF-8 text without a byte order mark";

fn error(kind: SyntaxErrorKind, offset: usize, message: &str, expected: &str, found: String) -> SyntaxError {
    SyntaxError {
        kind,
        offset,
        message: message.to_owned(),
        expected: expected.to_owned(),
        found,
    }
}

/// `EF BB BF`.
fn hex_bytes(bytes: &[u8]) -> String {
    bytes
        .iter()
        .map(|b| format!("{b:02X}"))
        .collect::<Vec<_>>()
        .join(" ")
}

struct Reader<'a> {
    text: &'a str,
    bytes: &'a [u8],
    pos: usize,
    depth: usize,
}

impl Reader<'_> {
    fn peek(&self) -> Option<u8> {
        self.bytes.get(self.pos).copied()
    }

    /// The character at `offset` for a message: `` `c` `` (control characters escaped) or `end of input`.
    fn found_at(&self, offset: usize) -> String {
        match self.text.get(offset..).and_then(|rest| rest.chars().next()) {
            None => "end of input".to_owned(),
            Some(c) if c.is_control() => format!("`{}`", c.escape_debug()),
            Some(c) => format!("`{c}`"),
        }
    }

    /// Error for the character at `pos` (or the end of input), saying what was expected instead.
    fn unexpected(&self, expected: &str) -> SyntaxError {
        let found = self.found_at(self.pos);
        let message = if found == "end of input" {
            format!("unexpected end of input; expected {expected}")
        } else {
            format!("unexpected character {found}; expected {expected}")
        };
        error(SyntaxErrorKind::Grammar, self.pos, &message, expected, found)
    }

    /// Skip whitespace; a `/` here starts a comment, which JSON does not have.
    fn skip_ws(&mut self) -> Result<(), SyntaxError> {
        while let Some(b) = self.peek() {
            match b {
                b' ' | b'\t' | b'\n' | b'\r' => self.pos += 1,
                b'/' if matches!(self.bytes.get(self.pos + 1), Some(b'/' | b'*')) => {
                    let opener = self.text.get(self.pos..self.pos + 2).unwrap_or_default();
                    return Err(error(
                        SyntaxErrorKind::Comment,
                        self.pos,
                        "comments are not allowed in JSON; remove the comment",
                        "whitespace or a JSON value; JSON has no comments",
                        format!("the comment opener `{opener}`"),
                    ));
                }
                _ => break,
            }
        }
        Ok(())
    }

    fn value(&mut self) -> Result<Node, SyntaxError> {
        let start = self.pos;
        let value = match self.peek() {
            Some(b'{') => self.nested(Self::object)?,
            Some(b'[') => self.nested(Self::array)?,
            Some(b'"') => NodeValue::String(self.string()?),
            Some(b'-' | b'0'..=b'9') => NodeValue::Number(self.number()?),
            Some(b't') => self.literal("true", NodeValue::Bool(true))?,
            Some(b'f') => self.literal("false", NodeValue::Bool(false))?,
            Some(b'n') => self.literal("null", NodeValue::Null)?,
            _ => return Err(self.unexpected("a JSON value")),
        };
        Ok(Node {
            span: Span::new(start, self.pos),
            value,
        })
    }

    fn nested(
        &mut self,
        inner: fn(&mut Self) -> Result<NodeValue, SyntaxError>,
    ) -> Result<NodeValue, SyntaxError> {
        if self.depth >= MAX_DEPTH {
            return Err(error(
                SyntaxErrorKind::Depth,
                self.pos,
                &format!("arrays and objects are nested deeper than {MAX_DEPTH} levels"),
                &format!("at most {MAX_DEPTH} nested arrays and objects"),
                format!("{} opening level {}", self.found_at(self.pos), MAX_DEPTH + 1),
            ));
        }
        self.depth += 1;
        let result = inner(self);
        self.depth -= 1;
        result
    }

    fn literal(&mut self, word: &str, value: NodeValue) -> Result<NodeValue, SyntaxError> {
        for expected in word.bytes() {
            if self.peek() != Some(expected) {
                return Err(self.unexpected(&format!("`{word}`")));
            }
            self.pos += 1;
        }
        if self
            .peek()
            .is_some_and(|b| b.is_ascii_alphanumeric() || b == b'_')
        {
            return Err(self.unexpected(&format!("a delimiter after `{word}`")));
        }
        Ok(value)
    }

    /// After a `,`: a closing bracket here means a trailing comma.
    fn check_trailing_comma(&self, comma: usize, close: u8) -> Result<(), SyntaxError> {
        if self.peek() == Some(close) {
            let close = close as char;
            return Err(error(
                SyntaxErrorKind::TrailingComma,
                comma,
                &format!("trailing comma before `{close}`; remove the comma"),
                &format!("another value after `,`, or `{close}` without the comma"),
                format!("`,` directly before `{close}`"),
            ));
        }
        Ok(())
    }

    fn array(&mut self) -> Result<NodeValue, SyntaxError> {
        self.pos += 1; // [
        let mut items = Vec::new();
        self.skip_ws()?;
        if self.peek() == Some(b']') {
            self.pos += 1;
            return Ok(NodeValue::Array(items));
        }
        loop {
            self.skip_ws()?;
            items.push(self.value()?);
            self.skip_ws()?;
            match self.peek() {
                Some(b',') => {
                    let comma = self.pos;
                    self.pos += 1;
                    self.skip_ws()?;
                    self.check_trailing_comma(comma, b']')?;
                }
                Some(b']') => {
                    self.pos += 1;
                    return Ok(NodeValue::Array(items));
                }
                _ => return Err(self.unexpected("`,` or `]`")),
            }
        }
    }

    fn object(&mut self) -> Result<NodeValue, SyntaxError> {
        self.pos += 1; // {
        let mut members = Vec::new();
        self.skip_ws()?;
        if self.peek() == Some(b'}') {
            self.pos += 1;
            return Ok(NodeValue::Object(members));
        }
        loop {
            self.skip_ws()?;
            if self.peek() != Some(b'"') {
                return Err(self.unexpected("a string key in double quotes"));
            }
            let key_start = self.pos;
            let key = self.string()?;
            let key_span = Span::new(key_start, self.pos);
            self.skip_ws()?;
            if self.peek() != Some(b':') {
                return Err(self.unexpected("`:` after the key"));
            }
            self.pos += 1;
            self.skip_ws()?;
            let value = self.value()?;
            members.push(Member { key, key_span, value });
            self.skip_ws()?;
            match self.peek() {
                Some(b',') => {
                    let comma = self.pos;
                    self.pos += 1;
                    self.skip_ws()?;
                    self.check_trailing_comma(comma, b'}')?;
                }
                Some(b'}') => {
                    self.pos += 1;
                    return Ok(NodeValue::Object(members));
                }
                _ => return Err(self.unexpected("`,` or `}`")),
            }
        }
    }

    fn number(&mut self) -> Result<String, SyntaxError> {
        let start = self.pos;
        if self.peek() == Some(b'-') {
            self.pos += 1;
        }
        match self.peek() {
            Some(b'0') => {
                self.pos += 1;
                if self.peek().is_some_and(|b| b.is_ascii_digit()) {
                    return Err(self.unexpected("no leading zero in a number"));
                }
            }
            Some(b'1'..=b'9') => self.digits(),
            _ => return Err(self.unexpected("a digit")),
        }
        if self.peek() == Some(b'.') {
            self.pos += 1;
            if !self.peek().is_some_and(|b| b.is_ascii_digit()) {
                return Err(self.unexpected("a digit after the decimal point"));
            }
            self.digits();
        }
        if matches!(self.peek(), Some(b'e' | b'E')) {
            self.pos += 1;
            if matches!(self.peek(), Some(b'+' | b'-')) {
                self.pos += 1;
            }
            if !self.peek().is_some_and(|b| b.is_ascii_digit()) {
                return Err(self.unexpected("a digit in the exponent"));
            }
            self.digits();
        }
        Ok(self.text.get(start..self.pos).unwrap_or_default().to_owned())
    }

    fn digits(&mut self) {
        while self.peek().is_some_and(|b| b.is_ascii_digit()) {
            self.pos += 1;
        }
    }

    fn string(&mut self) -> Result<String, SyntaxError> {
        self.pos += 1; // opening quote
        let mut out = String::new();
        loop {
            let run_start = self.pos;
            while let Some(b) = self.peek() {
                if b == b'"' || b == b'\\' || b < 0x20 {
                    break;
                }
                self.pos += 1;
            }
            // Stops only at ASCII bytes, so both ends are char boundaries.
            out.push_str(self.text.get(run_start..self.pos).unwrap_or_default());
            match self.peek() {
                Some(b'"') => {
                    self.pos += 1;
                    return Ok(out);
                }
                Some(b'\\') => out.push(self.escape()?),
                Some(_) => {
                    return Err(error(
                        SyntaxErrorKind::Grammar,
                        self.pos,
                        "control character in a string; write it as an escape such as \\n or \\u0009",
                        "an escape such as \\n or \\u0009 instead of a control character",
                        self.found_at(self.pos),
                    ));
                }
                None => return Err(self.unexpected("`\"` to close the string")),
            }
        }
    }

    /// Read one escape sequence; `pos` is at the backslash.
    fn escape(&mut self) -> Result<char, SyntaxError> {
        let backslash = self.pos;
        self.pos += 1;
        let c = match self.peek() {
            Some(b'"') => '"',
            Some(b'\\') => '\\',
            Some(b'/') => '/',
            Some(b'b') => '\u{8}',
            Some(b'f') => '\u{c}',
            Some(b'n') => '\n',
            Some(b'r') => '\r',
            Some(b't') => '\t',
            Some(b'u') => {
                self.pos += 1;
                return self.unicode_escape(backslash);
            }
            _ => return Err(self.unexpected("an escape (one of \\\" \\\\ \\/ \\b \\f \\n \\r \\t \\uXXXX)")),
        };
        self.pos += 1;
        Ok(c)
    }

    fn hex4(&mut self) -> Result<u32, SyntaxError> {
        let mut value = 0u32;
        for _ in 0..4 {
            let digit = self.peek().and_then(|b| (b as char).to_digit(16));
            match digit {
                Some(d) => value = value * 16 + d,
                None => return Err(self.unexpected("four hex digits after \\u")),
            }
            self.pos += 1;
        }
        Ok(value)
    }

    fn unicode_escape(&mut self, backslash: usize) -> Result<char, SyntaxError> {
        let text = self.text;
        // The escapes read so far, `backslash..end`, are the value found.
        let lone = |end: usize| {
            error(
                SyntaxErrorKind::Grammar,
                backslash,
                "lone UTF-16 surrogate in a \\u escape; it is not a character",
                "a \\u escape of a character (U+10000 and above as a surrogate pair)",
                format!("`{}`", text.get(backslash..end).unwrap_or_default()),
            )
        };
        let first = self.hex4()?;
        let code = match first {
            0xD800..=0xDBFF => {
                if self.bytes.get(self.pos..self.pos + 2) != Some(b"\\u") {
                    return Err(lone(self.pos));
                }
                self.pos += 2;
                let second = self.hex4()?;
                if !(0xDC00..=0xDFFF).contains(&second) {
                    return Err(lone(self.pos));
                }
                0x10000 + ((first - 0xD800) << 10) + (second - 0xDC00)
            }
            0xDC00..=0xDFFF => return Err(lone(self.pos)),
            other => other,
        };
        char::from_u32(code).ok_or_else(|| lone(self.pos))
    }
}
