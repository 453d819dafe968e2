use serde_json::json;

use super::*;

#[test]
fn placeholder() {
    assert_eq!(revised_prompt("  a cat  "), "a cat");
    let _ = json!({});
}
