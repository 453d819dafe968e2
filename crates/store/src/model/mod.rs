//! The records the store keeps: users, groups, keys, accounts, usage.

mod account;
mod key;
mod time;
mod usage;

use std::fmt;

use serde::{Deserialize, Serialize};

pub use account::{
    Account, AccountKind, AccountStatus, AccountTier, AccountUpdate, NewAccount, StoredCredential,
};
pub use key::{
    ApiKeyRecord, AuthContext, KeyCheck, KeyLimits, KeyRefusal, KeyStatus, KeyUpdate, KeyUse, NewApiKey,
    NewKey,
};
pub use time::Timestamp;
pub use usage::{DailyUsage, StatusFilter, TokenCounts, UsageCursor, UsageEntry, UsageFilter, UsageRecord};

/// Defines an `i64` id newtype with serde, `Display` and `FromStr`.
macro_rules! id_type {
    ($(#[$doc:meta])* $name:ident) => {
        $(#[$doc])*
        #[derive(Debug, Clone, Copy, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
        #[serde(transparent)]
        pub struct $name(pub i64);

        impl fmt::Display for $name {
            fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
                self.0.fmt(f)
            }
        }

        impl std::str::FromStr for $name {
            type Err = std::num::ParseIntError;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                s.parse().map(Self)
            }
        }
    };
}

id_type!(
    /// Identifies a [`User`].
    UserId
);
id_type!(
    /// Identifies a [`Group`].
    GroupId
);
id_type!(
    /// Identifies an [`ApiKeyRecord`].
    KeyId
);
id_type!(
    /// Identifies an upstream [`Account`].
    AccountId
);
id_type!(
    /// Identifies a stored [`UsageEntry`].
    UsageId
);

/// Defines `as_str`, `Display` and `FromStr` for a fieldless enum stored as text.
macro_rules! text_enum {
    ($name:ident { $($variant:ident => $text:literal),+ $(,)? }) => {
        impl $name {
            /// Every value, in declaration order.
            pub const ALL: &'static [Self] = &[$(Self::$variant),+];

            /// The stored and serialized text.
            pub const fn as_str(self) -> &'static str {
                match self { $(Self::$variant => $text),+ }
            }
        }

        impl std::fmt::Display for $name {
            fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
                f.write_str(self.as_str())
            }
        }

        impl std::str::FromStr for $name {
            type Err = $crate::model::UnknownVariant;
            fn from_str(s: &str) -> Result<Self, Self::Err> {
                match s {
                    $($text => Ok(Self::$variant),)+
                    other => Err($crate::model::UnknownVariant {
                        what: stringify!($name),
                        value: other.to_owned(),
                    }),
                }
            }
        }
    };
}
pub(crate) use text_enum;

/// A text value that names no variant of an enum (`"gold"` as an [`AccountTier`]).
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("unknown {what}: {value:?}")]
pub struct UnknownVariant {
    /// The enum's name.
    pub what: &'static str,
    /// The text that did not match.
    pub value: String,
}

/// A person or service that owns keys. Its `Debug` shows whether it has a password, not the hash.
#[derive(Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct User {
    /// Its id.
    pub id: UserId,
    /// Unique login name.
    pub name: String,
    /// May use the admin console and commands.
    pub is_admin: bool,
    /// An argon2 PHC string, or `None` when the user cannot log in to the console.
    /// Skipped by serde so it never reaches a page or a log.
    #[serde(skip)]
    pub password_hash: Option<String>,
    /// When it was created.
    pub created_at: Timestamp,
}

impl fmt::Debug for User {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("User")
            .field("id", &self.id)
            .field("name", &self.name)
            .field("is_admin", &self.is_admin)
            .field(
                "password_hash",
                &self.password_hash.as_ref().map(|_| "<redacted>"),
            )
            .field("created_at", &self.created_at)
            .finish()
    }
}

/// Input of [`Store::create_user`](crate::Store::create_user). Its `Debug` hides the hash too.
#[derive(Clone, PartialEq, Eq, Default)]
pub struct NewUser {
    /// Unique login name (not empty).
    pub name: String,
    /// Admin rights.
    pub is_admin: bool,
    /// An argon2 PHC string computed by the caller, if the user may log in.
    pub password_hash: Option<String>,
}

impl fmt::Debug for NewUser {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("NewUser")
            .field("name", &self.name)
            .field("is_admin", &self.is_admin)
            .field(
                "password_hash",
                &self.password_hash.as_ref().map(|_| "<redacted>"),
            )
            .finish()
    }
}

/// A routing group: keys belong to one group and may use the accounts of that group.
///
/// Who may hold keys in it: every user when it is open; its members and admins when it is
/// `restricted` ([`crate::Store::may_use_group`]). A key whose user loses the right stops
/// authenticating; it is not deleted, so it works again if the right comes back.
#[derive(Debug, Clone, PartialEq, Eq, Serialize, Deserialize)]
pub struct Group {
    /// Its id.
    pub id: GroupId,
    /// Unique name; the migrations create [`DEFAULT_GROUP`].
    pub name: String,
    /// Open only to its members (and admins) rather than to every user.
    pub restricted: bool,
    /// When it was created.
    pub created_at: Timestamp,
}

/// The name of the group every database starts with.
pub const DEFAULT_GROUP: &str = "default";

/// Which database a store talks to.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// An SQLite file.
    Sqlite,
    /// A PostgreSQL server.
    Postgres,
}

text_enum!(Backend { Sqlite => "sqlite", Postgres => "postgres" });

/// Whether `name` could have passed [`check_name`] as far as its characters go: a lookup of one
/// that could not finds nothing, without asking the database (PostgreSQL refuses a NUL character
/// in a parameter where SQLite just finds no row).
pub(crate) fn could_be_a_name(name: &str) -> bool {
    !name.chars().any(char::is_control)
}

/// Rejects empty or overlong names.
pub(crate) fn check_name(what: &str, name: &str) -> Result<(), crate::StoreError> {
    let trimmed = name.trim();
    if trimmed.is_empty() || trimmed != name {
        return Err(crate::StoreError::Invalid(format!(
            "{what} name must be non-empty without surrounding spaces"
        )));
    }
    if name.chars().count() > 200 || name.chars().any(char::is_control) {
        return Err(crate::StoreError::Invalid(format!(
            "{what} name must be at most 200 printable characters"
        )));
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_user_s_debug_never_shows_its_password_hash() {
        let user = User {
            id: UserId(7),
            name: "alice".to_owned(),
            is_admin: false,
            password_hash: Some("$argon2id$v=19$m=19456,t=2,p=1$c2FsdA$aGFzaA".to_owned()),
            created_at: Timestamp::now(),
        };
        let shown = format!("{user:?}");
        assert!(!shown.contains("argon2"), "{shown}");
        assert!(shown.contains("alice") && shown.contains("<redacted>"), "{shown}");
        let new = NewUser {
            name: user.name.clone(),
            is_admin: false,
            password_hash: user.password_hash.clone(),
        };
        let shown = format!("{new:?}");
        assert!(
            !shown.contains("argon2") && shown.contains("<redacted>"),
            "{shown}"
        );
    }
}
