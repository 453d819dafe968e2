//! Passwords: argon2id hashes in PHC format, verification, and generated passwords.

use std::sync::OnceLock;

use argon2::password_hash::SaltString;
use argon2::{Argon2, PasswordHash, PasswordHasher, PasswordVerifier};
use rand::RngCore;
use rand::seq::IndexedRandom;

/// The shortest password accepted.
pub const MIN_PASSWORD_LEN: usize = 8;
/// The longest password accepted, in bytes (keeps hashing of hostile input bounded).
pub const MAX_PASSWORD_LEN: usize = 1024;

/// Characters of generated passwords: letters and digits without look-alikes (0/O, 1/l/I).
const PASSWORD_ALPHABET: &[u8] = b"ABCDEFGHJKLMNPQRSTUVWXYZabcdefghijkmnopqrstuvwxyz23456789";
/// Length of generated passwords (about 116 bits).
const GENERATED_LEN: usize = 20;

/// A password could not be hashed.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
pub enum PasswordError {
    /// Shorter than [`MIN_PASSWORD_LEN`] characters.
    #[error("the password must have at least {MIN_PASSWORD_LEN} characters")]
    TooShort,
    /// Longer than [`MAX_PASSWORD_LEN`] bytes.
    #[error("the password must have at most {MAX_PASSWORD_LEN} bytes")]
    TooLong,
    /// The hasher failed.
    #[error("password hashing failed: {0}")]
    Hash(String),
}

/// Hashes a password with argon2id (19 MiB, 2 passes, 1 lane; a random 128-bit salt) into a PHC
/// string (`$argon2id$v=19$...`) for [`Store::set_user_password_hash`](imagegate_store::Store).
///
/// This takes tens of milliseconds of CPU on purpose: call it off the async executor
/// (`tokio::task::spawn_blocking`) in servers.
pub fn hash_password(password: &str) -> Result<String, PasswordError> {
    if password.chars().count() < MIN_PASSWORD_LEN {
        return Err(PasswordError::TooShort);
    }
    if password.len() > MAX_PASSWORD_LEN {
        return Err(PasswordError::TooLong);
    }
    let mut salt_bytes = [0_u8; 16];
    rand::rng().fill_bytes(&mut salt_bytes);
    let salt = SaltString::encode_b64(&salt_bytes).map_err(|e| PasswordError::Hash(e.to_string()))?;
    Argon2::default()
        .hash_password(password.as_bytes(), &salt)
        .map(|hash| hash.to_string())
        .map_err(|e| PasswordError::Hash(e.to_string()))
}

/// Whether `password` matches the PHC string `phc` (with the parameters stored in it). A
/// malformed hash never matches.
pub fn verify_password(password: &str, phc: &str) -> bool {
    if password.len() > MAX_PASSWORD_LEN {
        return false;
    }
    match PasswordHash::new(phc) {
        Ok(parsed) => Argon2::default()
            .verify_password(password.as_bytes(), &parsed)
            .is_ok(),
        Err(_) => false,
    }
}

/// Spends the same time as a real check when there is no hash to check against (unknown user),
/// so response times do not tell which user names exist.
pub(crate) fn verify_against_dummy(password: &str) {
    static DUMMY: OnceLock<Option<String>> = OnceLock::new();
    let dummy = DUMMY.get_or_init(|| hash_password(&generate_password()).ok());
    if let Some(hash) = dummy {
        let _ = verify_password(password, hash);
    }
}

/// A random password of 20 letters and digits (no look-alike characters), about 116 bits, from
/// the thread-local CSPRNG seeded by the operating system.
pub fn generate_password() -> String {
    let mut rng = rand::rng();
    (0..GENERATED_LEN)
        .filter_map(|_| PASSWORD_ALPHABET.choose(&mut rng).copied().map(char::from))
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn hashes_are_argon2id_and_verify() {
        let hash = hash_password("correct horse battery").unwrap();
        assert!(hash.starts_with("$argon2id$v=19$m=19456,t=2,p=1$"), "{hash}");
        assert!(verify_password("correct horse battery", &hash));
        assert!(!verify_password("correct horse batterY", &hash));
        assert!(!verify_password("correct horse battery", "not a hash"));
        // Same password, different salt.
        assert_ne!(hash, hash_password("correct horse battery").unwrap());
    }

    #[test]
    fn length_limits() {
        assert_eq!(hash_password("short"), Err(PasswordError::TooShort));
        assert_eq!(
            hash_password(&"x".repeat(MAX_PASSWORD_LEN + 1)),
            Err(PasswordError::TooLong)
        );
    }

    #[test]
    fn generated_passwords_use_the_alphabet_and_differ() {
        let a = generate_password();
        let b = generate_password();
        assert_eq!(a.len(), GENERATED_LEN);
        assert_ne!(a, b);
        assert!(a.bytes().all(|c| PASSWORD_ALPHABET.contains(&c)), "{a}");
        assert!(hash_password(&a).is_ok());
    }
}
