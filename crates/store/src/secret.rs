//! [`Secret`]: a string that never shows up in logs.

use std::fmt;

use zeroize::Zeroizing;

/// A secret string (an API key, an upstream credential).
///
/// `Debug` prints `Secret([REDACTED])`; there is no `Display` and no serde support, so the value
/// only leaves through [`Secret::expose`]. The memory is zeroed when the value is dropped.
#[derive(Clone, PartialEq, Eq)]
pub struct Secret(Zeroizing<String>);

impl Secret {
    /// Wraps a value.
    pub fn new(value: impl Into<String>) -> Self {
        Self(Zeroizing::new(value.into()))
    }

    /// The secret text. Do not log it.
    pub fn expose(&self) -> &str {
        self.0.as_str()
    }
}

impl From<String> for Secret {
    fn from(value: String) -> Self {
        Self::new(value)
    }
}

impl From<&str> for Secret {
    fn from(value: &str) -> Self {
        Self::new(value)
    }
}

impl fmt::Debug for Secret {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Secret([REDACTED])")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debug_never_shows_the_value() {
        let secret = Secret::new("sk-very-secret");
        let shown = format!("{secret:?} {:#?}", Some(&secret));
        assert!(!shown.contains("very-secret"), "{shown}");
        assert!(shown.contains("REDACTED"));
        assert_eq!(secret.expose(), "sk-very-secret");
    }
}
