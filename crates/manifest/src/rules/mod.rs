//! The semantic rules, one module per area, and the rule catalog.
//!
//! Rules read the span-keeping tree, never the raw text, and skip values of the wrong JSON type: the
//! schema reports those once (`R-SCHEMA-TYPE`).

mod apis;
mod catalog;
mod json;
mod langtag;
mod lists;
pub(crate) mod paths;
mod repository;
pub(crate) mod schema;
mod schema_parts;
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

/// A string member or list item with its span. The JSON Pointer is built only when a finding needs it,
/// which keeps clean manifests free of per-field allocations.
#[derive(Debug, Clone, Copy)]
pub(crate) struct Field<'a, 'p> {
    pub text: &'a str,
    pub node: &'a Node,
    parent: &'p str,
    key: &'static str,
    index: Option<usize>,
}

impl Field<'_, '_> {
    pub fn span(&self) -> Span {
        self.node.span
    }

    /// The JSON Pointer of the value.
    pub fn ptr(&self) -> String {
        let member = child(self.parent, self.key);
        match self.index {
            Some(i) => format!("{member}/{i}"),
            None => member,
        }
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
    pub fn str(&self, key: &'static str) -> Option<Field<'a, 'p>> {
        let node = self.node.get(key)?;
        Some(Field {
            text: node.as_str()?,
            node,
            parent: self.ptr,
            key,
            index: None,
        })
    }

    /// Any member.
    pub fn get(&self, key: &str) -> Option<&'a Node> {
        self.node.get(key)
    }

    /// The string items of an array member (non-strings are skipped).
    pub fn strings(&self, key: &'static str) -> Vec<Field<'a, 'p>> {
        let Some(items) = self.node.get(key).and_then(Node::as_array) else {
            return Vec::new();
        };
        items
            .iter()
            .enumerate()
            .filter_map(|(i, item)| {
                Some(Field {
                    text: item.as_str()?,
                    node: item,
                    parent: self.ptr,
                    key,
                    index: Some(i),
                })
            })
            .collect()
    }
}

/// An element of `skills` or `apis` that is an object, with its pointer.
#[derive(Debug, Clone)]
pub(crate) struct Entry<'a> {
    pub ptr: String,
    pub node: &'a Node,
}

impl<'a> Entry<'a> {
    pub fn obj(&self) -> Obj<'a, '_> {
        Obj {
            node: self.node,
            ptr: &self.ptr,
        }
    }
}

/// The parsed manifest with its `skills` and `apis` entries located once for all rules.
#[derive(Debug)]
pub(crate) struct Doc<'a> {
    pub root: &'a Node,
    pub skills: Vec<Entry<'a>>,
    pub apis: Vec<Entry<'a>>,
}

impl<'a> Doc<'a> {
    pub fn new(root: &'a Node) -> Self {
        Self {
            root,
            skills: entries(root, "skills"),
            apis: entries(root, "apis"),
        }
    }

    pub fn top(&self) -> Obj<'a, 'static> {
        Obj {
            node: self.root,
            ptr: "",
        }
    }
}

/// Each element of the array at `/key` of the root that is an object.
fn entries<'a>(root: &'a Node, key: &str) -> Vec<Entry<'a>> {
    let Some(items) = root.get(key).and_then(Node::as_array) else {
        return Vec::new();
    };
    items
        .iter()
        .enumerate()
        .filter(|(_, item)| item.as_object().is_some())
        .map(|(i, item)| Entry {
            ptr: format!("/{key}/{i}"),
            node: item,
        })
        .collect()
}

/// Run every offline rule over a parsed manifest.
pub(crate) fn check_document(doc: &Doc<'_>, options: &CheckOptions, sink: &mut Sink) {
    json::duplicate_keys(doc.root, sink);
    if doc.root.as_object().is_none() {
        return;
    }
    top::check(doc, options, sink);
    repository::check(doc.top(), sink);
    skills::check(doc, sink);
    apis::check(doc, sink);
    paths::check(doc, sink);
    xref::check(doc, sink);
}
