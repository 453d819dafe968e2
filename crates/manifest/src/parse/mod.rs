//! A strict JSON parser that keeps the byte span of every value and key.
//!
//! `serde_json` keeps the last of two equal keys and forgets where things were. The checker needs both:
//! every finding carries a line and column, and duplicate keys are findings. This parser accepts exactly
//! RFC 8259 JSON in UTF-8 without a byte order mark (no comments, no trailing commas, no `NaN`), builds a
//! tree of [`Node`]s with their [`Span`]s, and reports the first syntax error at the offending character.

mod lines;
mod reader;

pub use lines::{LineCol, LineIndex};
pub use reader::parse;

/// Half-open byte range `start..end` in the source text.
#[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Default)]
pub struct Span {
    /// First byte.
    pub start: usize,
    /// One past the last byte.
    pub end: usize,
}

impl Span {
    /// A span from `start` to `end`.
    pub fn new(start: usize, end: usize) -> Self {
        Self { start, end }
    }
}

/// A parsed JSON value with its span.
#[derive(Debug, Clone, PartialEq)]
pub struct Node {
    /// Where the value is in the source.
    pub span: Span,
    /// The value.
    pub value: NodeValue,
}

/// The kinds of JSON value.
#[derive(Debug, Clone, PartialEq)]
pub enum NodeValue {
    /// `null`
    Null,
    /// `true` or `false`
    Bool(bool),
    /// A number, kept as written (`12`, `12.0`, `1e3` are different texts).
    Number(String),
    /// A string with its escapes resolved.
    String(String),
    /// An array.
    Array(Vec<Node>),
    /// An object, members in source order, duplicates kept.
    Object(Vec<Member>),
}

/// One `"key": value` pair of an object.
#[derive(Debug, Clone, PartialEq)]
pub struct Member {
    /// The key with escapes resolved.
    pub key: String,
    /// The span of the key including its quotes.
    pub key_span: Span,
    /// The value.
    pub value: Node,
}

/// What kind of syntax error stopped parsing.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub enum SyntaxErrorKind {
    /// The input starts with a byte order mark.
    Bom,
    /// The input is not valid UTF-8.
    Utf8,
    /// A `//` or `/* */` comment.
    Comment,
    /// A `,` directly before `]` or `}`.
    TrailingComma,
    /// Arrays and objects nested deeper than [`MAX_DEPTH`].
    Depth,
    /// Any other violation of the JSON grammar.
    Grammar,
}

/// The deepest nesting of arrays and objects the parser accepts.
pub const MAX_DEPTH: usize = 128;

/// The first syntax error in a document.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("{message} (at byte {offset})")]
pub struct SyntaxError {
    /// The kind of error.
    pub kind: SyntaxErrorKind,
    /// Byte offset of the offending character.
    pub offset: usize,
    /// What is wrong, in words.
    pub message: String,
    /// What the grammar allows at the offset, briefly.
    pub expected: String,
    /// What stands at the offset, briefly (e.g. `` `}` `` or `end of input`).
    pub found: String,
}

impl Node {
    /// The value of `key` if this is an object holding it (the last one when the key is repeated,
    /// as `serde_json` does).
    pub fn get(&self, key: &str) -> Option<&Node> {
        match &self.value {
            NodeValue::Object(members) => members.iter().rev().find(|m| m.key == key).map(|m| &m.value),
            _ => None,
        }
    }

    /// The member holding `key` (the last one when repeated).
    pub fn member(&self, key: &str) -> Option<&Member> {
        match &self.value {
            NodeValue::Object(members) => members.iter().rev().find(|m| m.key == key),
            _ => None,
        }
    }

    /// The string if this is a string.
    pub fn as_str(&self) -> Option<&str> {
        match &self.value {
            NodeValue::String(s) => Some(s),
            _ => None,
        }
    }

    /// The elements if this is an array.
    pub fn as_array(&self) -> Option<&[Node]> {
        match &self.value {
            NodeValue::Array(items) => Some(items),
            _ => None,
        }
    }

    /// The members if this is an object.
    pub fn as_object(&self) -> Option<&[Member]> {
        match &self.value {
            NodeValue::Object(members) => Some(members),
            _ => None,
        }
    }

    /// The node a JSON Pointer (RFC 6901) names, if any.
    pub fn pointer(&self, pointer: &str) -> Option<&Node> {
        if pointer.is_empty() {
            return Some(self);
        }
        let rest = pointer.strip_prefix('/')?;
        let mut node = self;
        for token in rest.split('/') {
            let token = unescape_token(token);
            node = match &node.value {
                NodeValue::Object(_) => node.get(&token)?,
                NodeValue::Array(items) => items.get(token.parse::<usize>().ok()?)?,
                _ => return None,
            };
        }
        Some(node)
    }

    /// The equivalent `serde_json::Value` (for schema validation). A repeated key keeps its last value.
    /// A number too large for `f64` becomes the largest finite `f64` of its sign.
    pub fn to_value(&self) -> serde_json::Value {
        use serde_json::Value;
        match &self.value {
            NodeValue::Null => Value::Null,
            NodeValue::Bool(b) => Value::Bool(*b),
            NodeValue::Number(raw) => Value::Number(number_from_raw(raw)),
            NodeValue::String(s) => Value::String(s.clone()),
            NodeValue::Array(items) => Value::Array(items.iter().map(Node::to_value).collect()),
            NodeValue::Object(members) => {
                let mut map = serde_json::Map::new();
                for m in members {
                    map.insert(m.key.clone(), m.value.to_value());
                }
                Value::Object(map)
            }
        }
    }

    /// A short name of the value's JSON type, for messages.
    pub fn type_name(&self) -> &'static str {
        match &self.value {
            NodeValue::Null => "null",
            NodeValue::Bool(_) => "boolean",
            NodeValue::Number(_) => "number",
            NodeValue::String(_) => "string",
            NodeValue::Array(_) => "array",
            NodeValue::Object(_) => "object",
        }
    }
}

fn number_from_raw(raw: &str) -> serde_json::Number {
    if let Ok(n) = raw.parse::<serde_json::Number>() {
        return n;
    }
    let big = if raw.starts_with('-') { f64::MIN } else { f64::MAX };
    serde_json::Number::from_f64(big).unwrap_or_else(|| serde_json::Number::from(0))
}

/// Escape one reference token for a JSON Pointer (`~` -> `~0`, `/` -> `~1`).
pub fn escape_token(token: &str) -> String {
    token.replace('~', "~0").replace('/', "~1")
}

/// Undo [`escape_token`].
pub fn unescape_token(token: &str) -> String {
    token.replace("~1", "/").replace("~0", "~")
}

#[cfg(test)]
mod tests;
