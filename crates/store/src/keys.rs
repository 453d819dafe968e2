//! API key text: generation, parsing and hashing.
//!
//! A key is `sk-ig-<public id>-<secret>`: the public id is 12 characters of `[a-z0-9]`, the
//! secret 40 characters of `[A-Za-z0-9]` (about 238 bits) from the operating system's CSPRNG.
//! The database keeps the public id and the hex SHA-256 of the secret only.

use sha2::{Digest, Sha256};
use subtle::ConstantTimeEq;

use crate::Secret;
use crate::error::CryptoError;

/// Every key starts with this.
pub const KEY_PREFIX: &str = "sk-ig-";
/// Length of the public id.
pub const PUBLIC_ID_LEN: usize = 12;
/// Length of the generated secret.
pub const SECRET_LEN: usize = 40;
/// The shortest secret accepted when parsing.
pub const MIN_SECRET_LEN: usize = 32;
/// The longest secret accepted when parsing (keeps hashing of hostile input cheap).
pub const MAX_SECRET_LEN: usize = 128;

const PUBLIC_ALPHABET: &[u8] = b"abcdefghijklmnopqrstuvwxyz0123456789";
const SECRET_ALPHABET: &[u8] = b"ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789";

/// A presented key split into its parts.
#[derive(Clone, PartialEq, Eq)]
pub struct ParsedKey<'a> {
    /// The public id.
    pub public_id: &'a str,
    /// The secret part.
    pub secret: &'a str,
}

impl std::fmt::Debug for ParsedKey<'_> {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("ParsedKey")
            .field("public_id", &self.public_id)
            .field("secret", &"[REDACTED]")
            .finish()
    }
}

/// Splits `sk-ig-<public id>-<secret>`; `None` when the text is not of that form.
pub fn parse_key(presented: &str) -> Option<ParsedKey<'_>> {
    let rest = presented.strip_prefix(KEY_PREFIX)?;
    let (public_id, secret) = rest.split_once('-')?;
    let public_ok = public_id.len() == PUBLIC_ID_LEN
        && public_id
            .bytes()
            .all(|b| b.is_ascii_lowercase() || b.is_ascii_digit());
    let secret_ok = (MIN_SECRET_LEN..=MAX_SECRET_LEN).contains(&secret.len())
        && secret.bytes().all(|b| b.is_ascii_alphanumeric());
    (public_ok && secret_ok).then_some(ParsedKey { public_id, secret })
}

/// A new key: the full text and the parts the database keeps.
#[derive(Debug)]
pub struct GeneratedKey {
    /// The full key text.
    pub key: Secret,
    /// The public id.
    pub public_id: String,
    /// Hex SHA-256 of the secret.
    pub secret_sha256: String,
}

/// Generates a key from the operating system's random source.
pub fn generate_key() -> Result<GeneratedKey, CryptoError> {
    let public_id = random_string(PUBLIC_ALPHABET, PUBLIC_ID_LEN)?;
    let secret = Secret::new(random_string(SECRET_ALPHABET, SECRET_LEN)?);
    let key = Secret::new(format!("{KEY_PREFIX}{public_id}-{}", secret.expose()));
    Ok(GeneratedKey {
        key,
        public_id,
        secret_sha256: hash_secret(secret.expose()),
    })
}

/// Hex SHA-256 of a secret, as stored.
pub fn hash_secret(secret: &str) -> String {
    hex::encode(Sha256::digest(secret.as_bytes()))
}

/// Whether `secret` hashes to `stored_hex`, compared in constant time.
pub fn verify_secret(secret: &str, stored_hex: &str) -> bool {
    let presented = Sha256::digest(secret.as_bytes());
    match hex::decode(stored_hex) {
        Ok(stored) => bool::from(presented.as_slice().ct_eq(stored.as_slice())),
        Err(_) => false,
    }
}

/// `len` characters drawn uniformly from `alphabet` (rejection sampling, no modulo bias).
pub(crate) fn random_string(alphabet: &[u8], len: usize) -> Result<String, CryptoError> {
    let size = alphabet.len();
    // The largest multiple of the alphabet size that fits in a byte; bytes at or above it are
    // rejected so every character is equally likely.
    let limit = 256 - (256 % size);
    let mut out = String::with_capacity(len);
    let mut buf = [0u8; 64];
    while out.len() < len {
        getrandom::fill(&mut buf).map_err(|e| CryptoError::Random(e.to_string()))?;
        for &byte in &buf {
            if usize::from(byte) < limit
                && out.len() < len
                && let Some(&c) = alphabet.get(usize::from(byte) % size)
            {
                out.push(char::from(c));
            }
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn generated_keys_parse_and_verify() {
        let generated = generate_key().unwrap();
        let text = generated.key.expose();
        assert_eq!(text.len(), KEY_PREFIX.len() + PUBLIC_ID_LEN + 1 + SECRET_LEN);
        let parsed = parse_key(text).unwrap();
        assert_eq!(parsed.public_id, generated.public_id);
        assert!(verify_secret(parsed.secret, &generated.secret_sha256));
        assert!(!verify_secret("x".repeat(40).as_str(), &generated.secret_sha256));
        assert!(!text.contains(&generated.secret_sha256));
    }

    #[test]
    fn keys_differ() {
        let a = generate_key().unwrap();
        let b = generate_key().unwrap();
        assert_ne!(a.public_id, b.public_id);
        assert_ne!(a.secret_sha256, b.secret_sha256);
    }

    #[test]
    fn rejects_malformed_keys() {
        let secret = "A".repeat(40);
        assert!(parse_key(&format!("sk-ig-abcdefghij12-{secret}")).is_some());
        for bad in [
            String::new(),
            "sk-ig-".to_owned(),
            format!("sk-xx-abcdefghij12-{secret}"),
            format!("sk-ig-abcdefghij1-{secret}"),
            format!("sk-ig-ABCDEFGHIJ12-{secret}"),
            format!("sk-ig-abcdefghij12{secret}"),
            format!("sk-ig-abcdefghij12-{}", "A".repeat(31)),
            format!("sk-ig-abcdefghij12-{}", "A".repeat(129)),
            format!("sk-ig-abcdefghij12-{}-x", "A".repeat(40)),
            format!("sk-ig-abcdefghij12-{}é", "A".repeat(40)),
        ] {
            assert!(parse_key(&bad).is_none(), "accepted {bad:?}");
        }
    }

    #[test]
    fn known_hash() {
        assert_eq!(
            hash_secret("abc"),
            "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad"
        );
        assert!(!verify_secret("abc", "not hex"));
    }

    #[test]
    fn random_strings_use_the_whole_alphabet() {
        let text = random_string(b"ab", 2000).unwrap();
        let a = text.bytes().filter(|&c| c == b'a').count();
        assert_eq!(text.len(), 2000);
        assert!((800..1200).contains(&a), "{a} of 2000 were 'a'");
    }
}
