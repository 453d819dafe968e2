//! Duplicate object keys (`R-JSON-DUP-KEY`), found on the span tree because `serde_json` drops them.

use std::collections::HashMap;

use super::{Rule, child};
use crate::finding::{Sink, quote};
use crate::parse::{Node, NodeValue};

/// Report every key that repeats an earlier key of the same object, anywhere in the document.
pub(crate) fn duplicate_keys(node: &Node, ptr: &str, sink: &mut Sink) {
    match &node.value {
        NodeValue::Array(items) => {
            for (i, item) in items.iter().enumerate() {
                duplicate_keys(item, &format!("{ptr}/{i}"), sink);
            }
        }
        NodeValue::Object(members) => {
            let mut first_seen: HashMap<&str, usize> = HashMap::with_capacity(members.len());
            for (index, member) in members.iter().enumerate() {
                let member_ptr = child(ptr, &member.key);
                if let Some(&first) = first_seen.get(member.key.as_str()) {
                    let first_at = members.get(first).map(|m| sink.place(m.key_span.start)).unwrap_or_default();
                    sink.add(
                        Rule::JsonDupKey,
                        &member_ptr,
                        member.key_span,
                        format!("key {} appears more than once in this object", quote(&member.key)),
                    )
                    .found(format!("second occurrence; the first is at {first_at}"))
                    .hint("Keep one of the members; most JSON parsers silently use the last one.");
                } else {
                    first_seen.insert(&member.key, index);
                }
                duplicate_keys(&member.value, &member_ptr, sink);
            }
        }
        _ => {}
    }
}
