//! The tokenizer behind [`ImagesResponseScanner`].

use super::{Field, MAX_CAPTURE_BYTES, MAX_DEPTH, MAX_KEY_BYTES, ResponseSummary};

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Expect {
    Value,
    ValueOrClose,
    KeyOrClose,
    Key,
    Colon,
    CommaOrClose,
    End,
}

#[derive(Debug, Clone, Copy, PartialEq, Eq)]
enum Lex {
    Structure,
    ValueString { escaped: bool },
    KeyString { escaped: bool },
    Scalar,
}

#[derive(Debug)]
struct Capture {
    field: Field,
    depth: usize,
    buf: Vec<u8>,
    overflow: bool,
}

/// Feeds on chunks of a JSON document and keeps a [`ResponseSummary`].
#[derive(Debug)]
pub struct ImagesResponseScanner {
    lex: Lex,
    expect: Expect,
    /// One entry per open container: `true` for an object.
    stack: Vec<bool>,
    key: Vec<u8>,
    key_too_long: bool,
    field: Field,
    in_data_array: bool,
    capture: Option<Capture>,
    malformed: bool,
    summary: ResponseSummary,
}

impl Default for ImagesResponseScanner {
    fn default() -> Self {
        Self::new()
    }
}

impl ImagesResponseScanner {
    /// A scanner at the start of a document.
    pub fn new() -> Self {
        Self {
            lex: Lex::Structure,
            expect: Expect::Value,
            stack: Vec::new(),
            key: Vec::new(),
            key_too_long: false,
            field: Field::Other,
            in_data_array: false,
            capture: None,
            malformed: false,
            summary: ResponseSummary::default(),
        }
    }

    /// The fields found so far.
    pub fn summary(&self) -> &ResponseSummary {
        &self.summary
    }

    /// Consumes the scanner and returns what it found.
    pub fn into_summary(self) -> ResponseSummary {
        self.summary
    }

    /// True once the top-level value has ended (trailing whitespace allowed).
    pub fn is_complete(&self) -> bool {
        !self.malformed && self.expect == Expect::End
    }

    /// True when the input stopped being JSON; later input is ignored.
    pub fn is_malformed(&self) -> bool {
        self.malformed
    }

    /// Feeds the next chunk.
    pub fn push(&mut self, chunk: &[u8]) {
        let mut pos = 0;
        let mut capture_from = 0;
        while pos < chunk.len() && !self.malformed {
            match self.lex {
                Lex::ValueString { escaped } | Lex::KeyString { escaped } => {
                    let is_key = matches!(self.lex, Lex::KeyString { .. });
                    let start = pos;
                    if escaped {
                        pos += 1;
                        self.set_string_state(is_key, false);
                    }
                    let rest = chunk.get(pos..).unwrap_or_default();
                    match memchr::memchr2(b'"', b'\\', rest) {
                        None => {
                            if is_key {
                                self.push_key(chunk.get(start..).unwrap_or_default());
                            }
                            pos = chunk.len();
                        }
                        Some(offset) => {
                            let at = pos + offset;
                            if is_key {
                                self.push_key(chunk.get(start..=at).unwrap_or_default());
                            }
                            pos = at + 1;
                            if chunk.get(at) == Some(&b'\\') {
                                self.set_string_state(is_key, true);
                            } else if is_key {
                                self.lex = Lex::Structure;
                                self.expect = Expect::Colon;
                            } else {
                                self.lex = Lex::Structure;
                                self.value_done(chunk, &mut capture_from, pos);
                            }
                        }
                    }
                }
                Lex::Scalar => {
                    let byte = chunk.get(pos).copied().unwrap_or_default();
                    if is_scalar_byte(byte) {
                        pos += 1;
                    } else {
                        self.lex = Lex::Structure;
                        self.value_done(chunk, &mut capture_from, pos);
                    }
                }
                Lex::Structure => {
                    let byte = chunk.get(pos).copied().unwrap_or_default();
                    pos += 1;
                    if !matches!(byte, b' ' | b'\t' | b'\n' | b'\r') {
                        self.structure_byte(byte, chunk, &mut capture_from, pos);
                    }
                }
            }
        }
        if let Some(capture) = self.capture.as_mut() {
            append_capped(capture, chunk.get(capture_from..).unwrap_or_default());
        }
    }

    fn set_string_state(&mut self, is_key: bool, escaped: bool) {
        self.lex = if is_key {
            Lex::KeyString { escaped }
        } else {
            Lex::ValueString { escaped }
        };
    }

    fn push_key(&mut self, bytes: &[u8]) {
        if self.stack.len() != 1 || self.key_too_long {
            return;
        }
        if self.key.len() + bytes.len() > MAX_KEY_BYTES + 2 {
            self.key_too_long = true;
        } else {
            self.key.extend_from_slice(bytes);
        }
    }

    /// Handles one non-whitespace byte outside strings and scalars; `next` is the index after it.
    fn structure_byte(&mut self, byte: u8, chunk: &[u8], capture_from: &mut usize, next: usize) {
        match self.expect {
            Expect::Value | Expect::ValueOrClose => {
                if byte == b']' && self.expect == Expect::ValueOrClose {
                    self.close(false, chunk, capture_from, next);
                } else {
                    self.value_start(byte, next - 1, capture_from);
                }
            }
            Expect::KeyOrClose | Expect::Key => {
                if byte == b'"' {
                    self.key.clear();
                    self.key_too_long = false;
                    self.key.push(b'"');
                    self.lex = Lex::KeyString { escaped: false };
                } else if byte == b'}' && self.expect == Expect::KeyOrClose {
                    self.close(true, chunk, capture_from, next);
                } else {
                    self.malformed = true;
                }
            }
            Expect::Colon => {
                if byte == b':' {
                    self.field = self.current_field();
                    self.expect = Expect::Value;
                } else {
                    self.malformed = true;
                }
            }
            Expect::CommaOrClose => match (byte, self.stack.last()) {
                (b',', Some(true)) => self.expect = Expect::Key,
                (b',', Some(false)) => self.expect = Expect::Value,
                (b'}', Some(true)) => self.close(true, chunk, capture_from, next),
                (b']', Some(false)) => self.close(false, chunk, capture_from, next),
                _ => self.malformed = true,
            },
            Expect::End => self.malformed = true,
        }
    }

    fn current_field(&self) -> Field {
        if self.stack.len() != 1 || self.key_too_long {
            return Field::Other;
        }
        if self.key.contains(&b'\\') {
            match serde_json::from_slice::<String>(&self.key) {
                Ok(decoded) => Field::from_key(decoded.as_bytes()),
                Err(_) => Field::Other,
            }
        } else {
            let inner = self
                .key
                .get(1..self.key.len().saturating_sub(1))
                .unwrap_or_default();
            Field::from_key(inner)
        }
    }

    /// A value starts with `byte` at index `at` of the chunk.
    fn value_start(&mut self, byte: u8, at: usize, capture_from: &mut usize) {
        let depth = self.stack.len();
        if depth == 1 && self.stack.first() == Some(&true) && self.field != Field::Other {
            if self.field == Field::Model {
                self.summary.names_model = true;
            }
            if self.field == Field::Data {
                self.in_data_array = byte == b'[';
            } else {
                self.capture = Some(Capture {
                    field: self.field,
                    depth,
                    buf: Vec::new(),
                    overflow: false,
                });
                *capture_from = at;
            }
        }
        if depth == 2 && self.in_data_array {
            self.summary.images += 1;
        }
        match byte {
            b'{' | b'[' => {
                if self.stack.len() >= MAX_DEPTH {
                    self.malformed = true;
                    return;
                }
                self.stack.push(byte == b'{');
                self.expect = if byte == b'{' {
                    Expect::KeyOrClose
                } else {
                    Expect::ValueOrClose
                };
            }
            b'"' => self.lex = Lex::ValueString { escaped: false },
            b if is_scalar_byte(b) => self.lex = Lex::Scalar,
            _ => self.malformed = true,
        }
    }

    fn close(&mut self, object: bool, chunk: &[u8], capture_from: &mut usize, next: usize) {
        if self.stack.pop() != Some(object) {
            self.malformed = true;
            return;
        }
        if self.stack.len() == 1 && !object {
            self.in_data_array = false;
        }
        self.value_done(chunk, capture_from, next);
    }

    /// A value (of any depth) ended just before index `end` of the chunk.
    fn value_done(&mut self, chunk: &[u8], capture_from: &mut usize, end: usize) {
        self.expect = if self.stack.is_empty() {
            Expect::End
        } else {
            Expect::CommaOrClose
        };
        let ends_capture = self.capture.as_ref().is_some_and(|c| c.depth == self.stack.len());
        if !ends_capture {
            return;
        }
        if let Some(mut capture) = self.capture.take() {
            append_capped(&mut capture, chunk.get(*capture_from..end).unwrap_or_default());
            if !capture.overflow {
                self.summary.record(capture.field, &capture.buf);
            }
        }
        *capture_from = end;
    }
}

fn append_capped(capture: &mut Capture, bytes: &[u8]) {
    if capture.overflow {
        return;
    }
    if capture.buf.len() + bytes.len() > MAX_CAPTURE_BYTES {
        capture.overflow = true;
        capture.buf = Vec::new();
    } else {
        capture.buf.extend_from_slice(bytes);
    }
}

fn is_scalar_byte(byte: u8) -> bool {
    byte.is_ascii_alphanumeric() || matches!(byte, b'-' | b'+' | b'.')
}
