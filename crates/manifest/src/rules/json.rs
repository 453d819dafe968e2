//! Duplicate object keys (`R-JSON-DUP-KEY`), found on the span tree because `serde_json` drops them.

use std::collections::HashMap;

use super::{Rule, child};
use crate::finding::{Sink, quote};
use crate::parse::{Member, Node, NodeValue, escape_token};

/// One step of the path from the root to a value.
#[derive(Debug, Clone, Copy)]
enum Step<'a> {
    Key(&'a str),
    Index(usize),
}

/// Report every key that repeats an earlier key of the same object, anywhere in the document.
pub(crate) fn duplicate_keys(root: &Node, sink: &mut Sink) {
    let mut path = Vec::new();
    walk(root, &mut path, sink);
}

fn pointer(path: &[Step<'_>]) -> String {
    let mut out = String::new();
    for step in path {
        match step {
            Step::Key(key) => {
                out.push('/');
                out.push_str(&escape_token(key));
            }
            Step::Index(i) => out.push_str(&format!("/{i}")),
        }
    }
    out
}

fn walk<'a>(node: &'a Node, path: &mut Vec<Step<'a>>, sink: &mut Sink) {
    match &node.value {
        NodeValue::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                path.push(Step::Index(i));
                walk(item, path, sink);
                path.pop();
            }
        }
        NodeValue::Object(members) => {
            report_repeats(members, path, sink);
            for member in members {
                path.push(Step::Key(&member.key));
                walk(&member.value, path, sink);
                path.pop();
            }
        }
        _ => {}
    }
}

fn report_repeats(members: &[Member], path: &[Step<'_>], sink: &mut Sink) {
    // Small objects (all of a manifest's) are compared pairwise; large ones through a set.
    let repeated: Vec<(usize, usize)> = if members.len() <= 16 {
        (1..members.len())
            .filter_map(|i| {
                let key = &members.get(i)?.key;
                (0..i)
                    .find(|&j| members.get(j).is_some_and(|m| &m.key == key))
                    .map(|j| (j, i))
            })
            .collect()
    } else {
        // Key -> index of its first occurrence.
        let mut first: HashMap<&str, usize> = HashMap::with_capacity(members.len());
        let mut repeated = Vec::new();
        for (i, member) in members.iter().enumerate() {
            let at = *first.entry(member.key.as_str()).or_insert(i);
            if at != i {
                repeated.push((at, i));
            }
        }
        repeated
    };
    for (first, second) in repeated {
        let (Some(first), Some(second)) = (members.get(first), members.get(second)) else {
            continue;
        };
        let first_at = sink.place(first.key_span.start);
        sink.add(
            Rule::JsonDupKey,
            &child(&pointer(path), &second.key),
            second.key_span,
            format!("key {} appears more than once in this object", quote(&second.key)),
        )
        .expected("a key no other member of this object uses")
        .found(format!("second occurrence; the first is at {first_at}"))
        .hint("Keep one of the members; most JSON parsers silently use the last one.");
    }
}
