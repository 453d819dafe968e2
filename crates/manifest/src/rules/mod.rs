//! The semantic rules, one module per area, and the rule catalog.
//!
//! Rules read the span-keeping tree, never the raw text, and skip values of the wrong JSON type: the
//! schema reports those once (`R-SCHEMA-TYPE`).

mod apis;
mod catalog;
mod json;
mod lists;
pub(crate) mod paths;
mod repository;
pub(crate) mod schema;
mod skills;
pub(crate) mod text;
mod top;
mod xref;

pub use catalog::Rule;

use crate::CheckOptions;
use crate::finding::Sink;
use crate::parse::{Node, Span, escape_token};

/// A JSON object in the manifest with its pointer.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Obj<'a, 'p> {
    pub node: &'a Node,
    pub ptr: &'p str,
}

/// A string field with its pointer and span.
#[derive(Debug, Clone)]
pub(crate) struct Field<'a> {
    pub text: &'a str,
    pub node: &'a Node,
    pub ptr: String,
}

impl Field<'_> {
    pub fn span(&self) -> Span {
        self.node.span
    }
}

/// `parent` + `/` + escaped `key`.
pub(crate) fn child(parent: &str, key: &str) -> String {
    format!("{parent}/{}", escape_token(key))
}

impl<'a, 'p> Obj<'a, 'p> {
    /// The object at `node`, if it is one.
    pub fn new(node: &'a Node, ptr: &'p str) -> Option<Self> {
        node.as_object().map(|_| Self { node, ptr })
    }

    /// A string member.
    pub fn str(&self, key: &str) -> Option<Field<'a>> {
        let node = self.node.get(key)?;
        Some(Field { text: node.as_str()?, node, ptr: child(self.ptr, key) })
    }

    /// Any member with its pointer.
    pub fn get(&self, key: &str) -> Option<(&'a Node, String)> {
        self.node.get(key).map(|node| (node, child(self.ptr, key)))
    }

    /// The string items of an array member (non-strings are skipped), each with its pointer.
    pub fn strings(&self, key: &str) -> Vec<Field<'a>> {
        let Some((node, ptr)) = self.get(key) else { return Vec::new() };
        let Some(items) = node.as_array() else { return Vec::new() };
        items
            .iter()
            .enumerate()
            .filter_map(|(i, item)| Some(Field { text: item.as_str()?, node: item, ptr: format!("{ptr}/{i}") }))
            .collect()
    }
}

/// Each element of the array at `/key` of the root that is an object, with its pointer.
pub(crate) fn entries<'a>(root: &'a Node, key: &str) -> Vec<(String, &'a Node)> {
    let Some(items) = root.get(key).and_then(Node::as_array) else { return Vec::new() };
    items
        .iter()
        .enumerate()
        .filter(|(_, item)| item.as_object().is_some())
        .map(|(i, item)| (format!("/{key}/{i}"), item))
        .collect()
}

/// Run every offline rule over a parsed manifest.
pub(crate) fn check_document(root: &Node, options: &CheckOptions, sink: &mut Sink) {
    json::duplicate_keys(root, "", sink);
    let Some(top) = Obj::new(root, "") else { return };
    top::check(top, options, sink);
    repository::check(top, sink);
    skills::check(root, top, sink);
    apis::check(root, sink);
    paths::check(root, sink);
    xref::check(root, sink);
}
