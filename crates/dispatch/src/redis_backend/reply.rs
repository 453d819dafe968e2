//! Reading script replies.

use redis::Value;

/// A reply element as text (bulk or simple string, or an integer).
pub(crate) fn text(value: &Value) -> Option<String> {
    match value {
        Value::BulkString(bytes) => String::from_utf8(bytes.clone()).ok(),
        Value::SimpleString(text) => Some(text.clone()),
        Value::Int(number) => Some(number.to_string()),
        _ => None,
    }
}

/// A reply element as a non-negative integer (an integer reply or its decimal text; a score
/// written as a float with an integral value is accepted too).
pub(crate) fn number(value: &Value) -> Option<u64> {
    match value {
        Value::Int(number) => u64::try_from(*number).ok(),
        other => {
            let text = text(other)?;
            text.parse::<u64>().ok().or_else(|| {
                let float = text.parse::<f64>().ok()?;
                // Integral and in range: the conversion is exact for the values stored here.
                let in_range = (0.0..18_446_744_073_709_551_616.0).contains(&float);
                #[allow(clippy::cast_possible_truncation, clippy::cast_sign_loss)]
                (in_range && float.fract() == 0.0).then_some(float as u64)
            })
        }
    }
}

/// The elements of an array reply.
pub(crate) fn array(value: Value) -> Option<Vec<Value>> {
    match value {
        Value::Array(items) | Value::Set(items) => Some(items),
        _ => None,
    }
}

/// The tag (first element) of a script reply and the elements after it.
pub(crate) fn tagged(value: Value) -> Option<(String, Vec<Value>)> {
    let mut items = array(value)?.into_iter();
    let tag = text(&items.next()?)?;
    Some((tag, items.collect()))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn numbers_come_as_integers_or_text() {
        assert_eq!(number(&Value::Int(42)), Some(42));
        assert_eq!(number(&Value::Int(-1)), None);
        assert_eq!(
            number(&Value::BulkString(b"1700000000000".to_vec())),
            Some(1_700_000_000_000)
        );
        assert_eq!(number(&Value::BulkString(b"1.5e3".to_vec())), Some(1_500));
        assert_eq!(number(&Value::BulkString(b"1.5".to_vec())), None);
        assert_eq!(number(&Value::BulkString(b"inf".to_vec())), None);
        assert_eq!(number(&Value::Nil), None);
    }

    #[test]
    fn tagged_replies_split_the_tag() {
        let reply = Value::Array(vec![
            Value::BulkString(b"granted".to_vec()),
            Value::Int(2),
            Value::Int(9),
        ]);
        let (tag, rest) = tagged(reply).unwrap();
        assert_eq!(tag, "granted");
        assert_eq!(rest, vec![Value::Int(2), Value::Int(9)]);
        assert_eq!(tagged(Value::Nil), None);
        assert_eq!(tagged(Value::Array(Vec::new())), None);
    }
}
