//! Encryption at rest of upstream account credentials (and of the console's sessions kept in Redis).
//!
//! Values are sealed with AES-256-GCM under a 32-byte [`MasterKey`]; each encryption uses a
//! fresh random 96-bit nonce and the stored value is `nonce || ciphertext || tag`. Every value is
//! sealed for a [`SealContext`] (what it is and whose it is, authenticated as associated data), and
//! opens only for that same context: a credential copied into another account's row, or into a
//! console session, does not open.
//!
//! ```
//! use imagegate_store::{AccountId, Crypto, MasterKey, SealContext};
//!
//! let crypto = Crypto::new(&MasterKey::generate()?);
//! let sealed = crypto.encrypt(b"sk-upstream", &SealContext::account_credential(AccountId(7)))?;
//! let opened = crypto.decrypt(&sealed, &SealContext::account_credential(AccountId(7)))?;
//! assert_eq!(opened.as_slice(), b"sk-upstream");
//! assert!(crypto.decrypt(&sealed, &SealContext::account_credential(AccountId(8))).is_err());
//! # Ok::<(), imagegate_store::CryptoError>(())
//! ```

use std::fmt;
use std::io::Write;
use std::path::Path;

use aes_gcm::aead::{Aead, KeyInit, Payload};
use aes_gcm::{Aes256Gcm, Nonce};
use base64::Engine;
use base64::engine::general_purpose::{STANDARD, STANDARD_NO_PAD};
use zeroize::Zeroizing;

use crate::error::CryptoError;
use crate::model::AccountId;

/// The environment variable holding the master key (64 hex digits or base64 of 32 bytes).
pub const MASTER_KEY_ENV: &str = "IMAGEGATE_MASTER_KEY";
/// The environment variable holding the key being replaced during a rotation: credentials it
/// sealed stay readable until they are sealed again under the master key.
pub const PREVIOUS_MASTER_KEY_ENV: &str = "IMAGEGATE_PREVIOUS_MASTER_KEY";
/// The key file created in the data directory when the environment variable is not set.
pub const MASTER_KEY_FILE: &str = "master.key";

const NONCE_LEN: usize = 12;
/// The associated data of every value sealed before values were bound to their record (credentials
/// and console sessions alike): still opened, never written. `accounts rekey` seals such
/// credentials again for their account.
const UNBOUND_AAD: &[u8] = b"imagegate/account-credential/v1";

/// What a sealed value is and whose it is, authenticated with it as AES-GCM associated data: the
/// value opens only for the context it was sealed for.
#[derive(Clone, PartialEq, Eq)]
pub struct SealContext(Vec<u8>);

impl fmt::Debug for SealContext {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_tuple("SealContext")
            .field(&String::from_utf8_lossy(&self.0))
            .finish()
    }
}

impl SealContext {
    /// The credential of account `account`.
    pub fn account_credential(account: AccountId) -> Self {
        Self(format!("imagegate/account-credential/v2/{}", account.0).into_bytes())
    }

    /// A console session stored under `key`.
    pub fn console_session(key: &str) -> Self {
        Self(format!("imagegate/console-session/v2/{key}").into_bytes())
    }

    fn as_bytes(&self) -> &[u8] {
        &self.0
    }
}

/// The 32-byte key that encrypts account credentials. `Debug` does not show it; it is zeroed
/// on drop.
#[derive(Clone)]
pub struct MasterKey(Zeroizing<[u8; 32]>);

impl MasterKey {
    /// Wraps raw key bytes.
    pub fn from_bytes(bytes: [u8; 32]) -> Self {
        Self(Zeroizing::new(bytes))
    }

    /// A new random key from the operating system's CSPRNG.
    pub fn generate() -> Result<Self, CryptoError> {
        let mut bytes = Zeroizing::new([0u8; 32]);
        getrandom::fill(bytes.as_mut()).map_err(|e| CryptoError::Random(e.to_string()))?;
        Ok(Self(bytes))
    }

    /// Parses 64 hex digits or base64 (standard alphabet, padding optional) of 32 bytes.
    /// Surrounding whitespace is ignored.
    pub fn parse(text: &str) -> Result<Self, CryptoError> {
        let text = text.trim();
        let decoded = if text.len() == 64 && text.bytes().all(|b| b.is_ascii_hexdigit()) {
            hex::decode(text).ok()
        } else {
            STANDARD
                .decode(text)
                .or_else(|_| STANDARD_NO_PAD.decode(text))
                .ok()
        };
        let bytes =
            Zeroizing::new(decoded.ok_or_else(|| {
                CryptoError::InvalidMasterKey("expected 64 hex digits or base64".to_owned())
            })?);
        let array: [u8; 32] = bytes
            .as_slice()
            .try_into()
            .map_err(|_| CryptoError::InvalidMasterKey(format!("expected 32 bytes, got {}", bytes.len())))?;
        Ok(Self::from_bytes(array))
    }

    /// The key as base64, e.g. to copy it into [`MASTER_KEY_ENV`] on another replica.
    pub fn to_base64(&self) -> crate::Secret {
        crate::Secret::new(STANDARD.encode(self.0.as_ref()))
    }

    /// Loads the master key: from `env_value` (the value of [`MASTER_KEY_ENV`]) when it is set
    /// and not empty, else from `<data_dir>/master.key`, which is created (mode 0600, the
    /// directory 0700 if it is created too) with a new random key when missing.
    pub fn load_or_create(data_dir: &Path, env_value: Option<&str>) -> Result<Self, CryptoError> {
        Self::load_or_create_reporting(data_dir, env_value).map(|(key, _)| key)
    }

    /// [`MasterKey::load_or_create`], saying where the key came from.
    pub fn load_or_create_reporting(
        data_dir: &Path,
        env_value: Option<&str>,
    ) -> Result<(Self, KeySource), CryptoError> {
        if let Some(value) = env_value.filter(|v| !v.trim().is_empty()) {
            return Self::parse(value).map(|key| (key, KeySource::Environment));
        }
        let path = data_dir.join(MASTER_KEY_FILE);
        let io_err = |source| CryptoError::KeyFile {
            path: path.clone(),
            source,
        };
        create_private_dir(data_dir).map_err(io_err)?;
        if path.exists() {
            return Self::read_existing(&path).map(|key| (key, KeySource::File));
        }
        let key = Self::generate()?;
        match publish_key_file(data_dir, &path, &key) {
            Ok(()) => {
                tracing::info!(path = %path.display(), "created a new master key file");
                Ok((key, KeySource::Created(path)))
            }
            // Another process created it first: its key is the one.
            Err(e) if e.kind() == std::io::ErrorKind::AlreadyExists => {
                Self::read_existing(&path).map(|key| (key, KeySource::File))
            }
            Err(e) => Err(io_err(e)),
        }
    }

    fn read_existing(path: &Path) -> Result<Self, CryptoError> {
        warn_if_readable_by_others(path);
        Self::read_file(path)
    }

    /// The key of [`PREVIOUS_MASTER_KEY_ENV`] in the process environment, if it is set and not
    /// empty.
    pub fn previous_from_env() -> Result<Option<Self>, CryptoError> {
        let value = Zeroizing::new(std::env::var(PREVIOUS_MASTER_KEY_ENV).unwrap_or_default());
        if value.trim().is_empty() {
            return Ok(None);
        }
        Self::parse(&value).map(Some)
    }

    /// Reads a key file (64 hex digits or base64, as [`MasterKey::load_or_create`] writes it).
    pub fn read_file(path: &Path) -> Result<Self, CryptoError> {
        let text = Zeroizing::new(
            std::fs::read_to_string(path).map_err(|source| CryptoError::KeyFile {
                path: path.to_owned(),
                source,
            })?,
        );
        Self::parse(&text)
    }

    /// [`MasterKey::load_or_create`] with the value of [`MASTER_KEY_ENV`] from the process
    /// environment.
    pub fn load_or_create_from_env(data_dir: &Path) -> Result<Self, CryptoError> {
        Self::load_or_create_from_env_reporting(data_dir).map(|(key, _)| key)
    }

    /// [`MasterKey::load_or_create_from_env`], saying where the key came from.
    pub fn load_or_create_from_env_reporting(data_dir: &Path) -> Result<(Self, KeySource), CryptoError> {
        let env_value = Zeroizing::new(std::env::var(MASTER_KEY_ENV).unwrap_or_default());
        Self::load_or_create_reporting(data_dir, Some(env_value.as_str()))
    }
}

/// Where [`MasterKey::load_or_create_reporting`] found the key.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum KeySource {
    /// The environment variable [`MASTER_KEY_ENV`].
    Environment,
    /// The data directory's key file.
    File,
    /// A new random key, just written to this file.
    Created(std::path::PathBuf),
}

impl fmt::Debug for MasterKey {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("MasterKey([REDACTED])")
    }
}

#[cfg(unix)]
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    use std::os::unix::fs::DirBuilderExt;
    std::fs::DirBuilder::new().recursive(true).mode(0o700).create(dir)
}

#[cfg(not(unix))]
fn create_private_dir(dir: &Path) -> std::io::Result<()> {
    std::fs::create_dir_all(dir)
}

/// Writes `key` to `path` whole or not at all: into a private temporary file of `dir` first
/// (randomly named, created exclusively: processes of other PID namespaces may share the
/// directory), synced, then linked to `path`, which fails with `AlreadyExists` when another
/// process got there first. No process ever reads the file half written, and a crash leaves no
/// empty key file. On a file system without hard links the key is written in place, as a last
/// resort.
fn publish_key_file(dir: &Path, path: &Path, key: &MasterKey) -> std::io::Result<()> {
    let mut suffix = [0u8; 8];
    getrandom::fill(&mut suffix).map_err(|e| std::io::Error::other(e.to_string()))?;
    let temporary = dir.join(format!(
        ".{MASTER_KEY_FILE}.{:016x}.tmp",
        u64::from_le_bytes(suffix)
    ));
    let text = Zeroizing::new(format!("{}\n", key.to_base64().expose()));
    let written = (|| {
        let mut file = create_private_file(&temporary)?;
        file.write_all(text.as_bytes())?;
        file.sync_all()
    })();
    let linked = written.and_then(|()| std::fs::hard_link(&temporary, path));
    // Created exclusively above, so the file is this call's own (or was never created).
    let _removed = std::fs::remove_file(&temporary);
    match linked {
        Err(e) if links_unsupported(&e) => {
            let mut file = create_private_file(path)?;
            file.write_all(text.as_bytes())?;
            file.sync_all()?;
        }
        other => other?,
    }
    crate::spool::sync_dir(dir)
}

/// Whether linking failed because the file system has no hard links (vfat and exFAT answer
/// `EPERM`, some network and FUSE file systems `ENOSYS` or `EOPNOTSUPP`).
fn links_unsupported(error: &std::io::Error) -> bool {
    matches!(
        error.kind(),
        std::io::ErrorKind::PermissionDenied | std::io::ErrorKind::Unsupported
    ) || error.raw_os_error() == Some(EOPNOTSUPP)
}

/// `EOPNOTSUPP` on Linux.
const EOPNOTSUPP: i32 = 95;

#[cfg(unix)]
fn create_private_file(path: &Path) -> std::io::Result<std::fs::File> {
    use std::os::unix::fs::OpenOptionsExt;
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .mode(0o600)
        .open(path)
}

#[cfg(not(unix))]
fn create_private_file(path: &Path) -> std::io::Result<std::fs::File> {
    std::fs::OpenOptions::new()
        .write(true)
        .create_new(true)
        .open(path)
}

#[cfg(unix)]
fn warn_if_readable_by_others(path: &Path) {
    use std::os::unix::fs::PermissionsExt;
    if let Ok(meta) = std::fs::metadata(path)
        && meta.permissions().mode() & 0o077 != 0
    {
        tracing::warn!(path = %path.display(), "master key file is accessible to other users; chmod 600 it");
    }
}

#[cfg(not(unix))]
fn warn_if_readable_by_others(_path: &Path) {}

/// Seals and opens credentials with a [`MasterKey`] (and, during a key rotation, opens what the
/// previous key sealed).
#[derive(Clone)]
pub struct Crypto {
    cipher: Aes256Gcm,
    previous: Option<Aes256Gcm>,
}

impl Crypto {
    /// A cipher for `key`.
    pub fn new(key: &MasterKey) -> Self {
        Self {
            cipher: cipher(key),
            previous: None,
        }
    }

    /// The same cipher, also opening values sealed under `previous` (it never seals with it).
    #[must_use]
    pub fn with_previous(mut self, previous: Option<&MasterKey>) -> Self {
        self.previous = previous.map(cipher);
        self
    }

    /// Encrypts `plaintext` for `context`; returns `nonce || ciphertext || tag`.
    pub fn encrypt(&self, plaintext: &[u8], context: &SealContext) -> Result<Vec<u8>, CryptoError> {
        let mut nonce_bytes = [0u8; NONCE_LEN];
        getrandom::fill(&mut nonce_bytes).map_err(|e| CryptoError::Random(e.to_string()))?;
        let nonce = Nonce::from(nonce_bytes);
        let payload = Payload {
            msg: plaintext,
            aad: context.as_bytes(),
        };
        let sealed = self
            .cipher
            .encrypt(&nonce, payload)
            .map_err(|_| CryptoError::Encrypt)?;
        let mut out = Vec::with_capacity(NONCE_LEN + sealed.len());
        out.extend_from_slice(&nonce_bytes);
        out.extend_from_slice(&sealed);
        Ok(out)
    }

    /// Decrypts a value made by [`Crypto::encrypt`] for `context` under the master key or the
    /// previous one (or one sealed before values were bound to a context). Fails with
    /// [`CryptoError::Decrypt`] on a wrong key, another context or altered data.
    pub fn decrypt(&self, stored: &[u8], context: &SealContext) -> Result<Zeroizing<Vec<u8>>, CryptoError> {
        let (nonce_bytes, sealed) = stored.split_at_checked(NONCE_LEN).ok_or(CryptoError::Decrypt)?;
        let nonce_array: [u8; NONCE_LEN] = nonce_bytes.try_into().map_err(|_| CryptoError::Decrypt)?;
        let nonce = Nonce::from(nonce_array);
        for aad in [context.as_bytes(), UNBOUND_AAD] {
            for cipher in std::iter::once(&self.cipher).chain(&self.previous) {
                if let Ok(plaintext) = cipher.decrypt(&nonce, Payload { msg: sealed, aad }) {
                    return Ok(Zeroizing::new(plaintext));
                }
            }
        }
        Err(CryptoError::Decrypt)
    }

    /// Encrypts a secret string for `context`.
    pub fn seal(&self, secret: &crate::Secret, context: &SealContext) -> Result<Vec<u8>, CryptoError> {
        self.encrypt(secret.expose().as_bytes(), context)
    }

    /// Decrypts a value made by [`Crypto::seal`] for `context` back into a secret string.
    pub fn open(&self, stored: &[u8], context: &SealContext) -> Result<crate::Secret, CryptoError> {
        let bytes = self.decrypt(stored, context)?;
        let text = std::str::from_utf8(&bytes).map_err(|_| CryptoError::Decrypt)?;
        Ok(crate::Secret::new(text))
    }
}

fn cipher(key: &MasterKey) -> Aes256Gcm {
    let bytes: &[u8; 32] = &key.0;
    Aes256Gcm::new(bytes.into())
}

impl fmt::Debug for Crypto {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str("Crypto(AES-256-GCM)")
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn own() -> SealContext {
        SealContext::account_credential(AccountId(1))
    }

    #[test]
    fn round_trip_and_fresh_nonces() {
        let crypto = Crypto::new(&MasterKey::generate().unwrap());
        let a = crypto.encrypt(b"token-123", &own()).unwrap();
        let b = crypto.encrypt(b"token-123", &own()).unwrap();
        assert_ne!(a, b, "same plaintext must not give the same ciphertext");
        assert_eq!(a.len(), NONCE_LEN + 9 + 16);
        assert!(!a.windows(9).any(|w| w == b"token-123"));
        assert_eq!(crypto.decrypt(&a, &own()).unwrap().as_slice(), b"token-123");
    }

    #[test]
    fn wrong_key_and_tampering_fail() {
        let crypto = Crypto::new(&MasterKey::generate().unwrap());
        let other = Crypto::new(&MasterKey::generate().unwrap());
        let mut sealed = crypto.encrypt(b"secret", &own()).unwrap();
        assert!(matches!(
            other.decrypt(&sealed, &own()),
            Err(CryptoError::Decrypt)
        ));
        if let Some(byte) = sealed.last_mut() {
            *byte ^= 1;
        }
        assert!(matches!(
            crypto.decrypt(&sealed, &own()),
            Err(CryptoError::Decrypt)
        ));
        assert!(matches!(
            crypto.decrypt(&[1, 2, 3], &own()),
            Err(CryptoError::Decrypt)
        ));
    }

    #[test]
    fn during_a_rotation_the_previous_key_opens_and_the_new_one_seals() {
        let old_key = MasterKey::generate().unwrap();
        let new_key = MasterKey::generate().unwrap();
        let old = Crypto::new(&old_key);
        let sealed_before = old.encrypt(b"secret", &own()).unwrap();
        let rotating = Crypto::new(&new_key).with_previous(Some(&old_key));
        assert_eq!(
            rotating.decrypt(&sealed_before, &own()).unwrap().as_slice(),
            b"secret"
        );
        let sealed_again = rotating.encrypt(b"secret", &own()).unwrap();
        let after = Crypto::new(&new_key);
        assert_eq!(
            after.decrypt(&sealed_again, &own()).unwrap().as_slice(),
            b"secret"
        );
        assert!(matches!(
            after.decrypt(&sealed_before, &own()),
            Err(CryptoError::Decrypt)
        ));
        assert!(matches!(
            old.decrypt(&sealed_again, &own()),
            Err(CryptoError::Decrypt)
        ));
        let unrelated = Crypto::new(&MasterKey::generate().unwrap()).with_previous(Some(&new_key));
        assert!(matches!(
            unrelated.decrypt(&sealed_before, &own()),
            Err(CryptoError::Decrypt)
        ));
    }

    #[test]
    fn a_value_opens_only_for_the_context_it_was_sealed_for() {
        let crypto = Crypto::new(&MasterKey::generate().unwrap());
        let first = SealContext::account_credential(AccountId(1));
        let sealed = crypto.encrypt(b"sk-first", &first).unwrap();
        assert_eq!(crypto.decrypt(&sealed, &first).unwrap().as_slice(), b"sk-first");
        for elsewhere in [
            SealContext::account_credential(AccountId(2)),
            SealContext::account_credential(AccountId(11)),
            SealContext::console_session("1"),
        ] {
            assert!(
                matches!(crypto.decrypt(&sealed, &elsewhere), Err(CryptoError::Decrypt)),
                "{elsewhere:?}"
            );
        }
    }

    #[test]
    fn values_sealed_before_contexts_still_open_under_either_key() {
        let old_key = MasterKey::generate().unwrap();
        let new_key = MasterKey::generate().unwrap();
        // What earlier versions wrote: the same layout, one fixed associated data for every value.
        let unbound = |key: &MasterKey| {
            let nonce = [7u8; NONCE_LEN];
            let payload = Payload {
                msg: b"sk-old".as_slice(),
                aad: b"imagegate/account-credential/v1".as_slice(),
            };
            let mut out = nonce.to_vec();
            out.extend(cipher(key).encrypt(&Nonce::from(nonce), payload).unwrap());
            out
        };
        let rotating = Crypto::new(&new_key).with_previous(Some(&old_key));
        for sealed in [unbound(&new_key), unbound(&old_key)] {
            assert_eq!(rotating.decrypt(&sealed, &own()).unwrap().as_slice(), b"sk-old");
        }
        let stranger = Crypto::new(&MasterKey::generate().unwrap());
        assert!(matches!(
            stranger.decrypt(&unbound(&new_key), &own()),
            Err(CryptoError::Decrypt)
        ));
    }

    #[test]
    fn parses_hex_and_base64() {
        let hex_text = "00".repeat(31) + "ff";
        let from_hex = MasterKey::parse(&hex_text).unwrap();
        assert_eq!(from_hex.0[31], 0xff);
        let b64 = from_hex.to_base64();
        let from_b64 = MasterKey::parse(b64.expose()).unwrap();
        assert_eq!(*from_b64.0, *from_hex.0);
        let unpadded = b64.expose().trim_end_matches('=').to_owned();
        assert_eq!(*MasterKey::parse(&unpadded).unwrap().0, *from_hex.0);
        assert!(MasterKey::parse("abcd").is_err());
        assert!(MasterKey::parse(&"0".repeat(62)).is_err());
        assert!(!format!("{from_hex:?}").contains("ff"));
    }

    #[test]
    fn key_file_is_created_once_with_private_mode() {
        let dir = tempfile::tempdir().unwrap();
        let data_dir = dir.path().join("data");
        let first = MasterKey::load_or_create(&data_dir, None).unwrap();
        let second = MasterKey::load_or_create(&data_dir, Some("")).unwrap();
        assert_eq!(*first.0, *second.0);
        #[cfg(unix)]
        {
            use std::os::unix::fs::PermissionsExt;
            let mode = std::fs::metadata(data_dir.join(MASTER_KEY_FILE))
                .unwrap()
                .permissions()
                .mode();
            assert_eq!(mode & 0o777, 0o600);
        }
        let from_env = MasterKey::load_or_create(&data_dir, Some(&"11".repeat(32))).unwrap();
        assert_eq!(*from_env.0, [0x11; 32]);
    }

    #[test]
    fn processes_starting_together_all_read_the_one_key_created() {
        // A gateway and an admin command started at the same moment, on a new data directory:
        // none may read the file before its key is in it.
        for _ in 0..50 {
            let dir = tempfile::tempdir().unwrap();
            let data_dir = dir.path().join("data");
            let keys: Vec<[u8; 32]> = std::thread::scope(|scope| {
                let loading: Vec<_> = (0..8)
                    .map(|_| scope.spawn(|| MasterKey::load_or_create(&data_dir, None).map(|k| *k.0)))
                    .collect();
                loading.into_iter().map(|t| t.join().unwrap().unwrap()).collect()
            });
            assert!(
                keys.windows(2).all(|w| w[0] == w[1]),
                "every process has the same key"
            );
            let names: Vec<_> = std::fs::read_dir(&data_dir)
                .unwrap()
                .map(|e| e.unwrap().file_name())
                .collect();
            assert_eq!(names, [MASTER_KEY_FILE], "no temporary file is left behind");
        }
    }
}
