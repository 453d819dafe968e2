//! Upstream failures, as the dispatcher's outcomes.

use imagegate_dispatch::{LimitScope, Outcome, UnixMillis};
use imagegate_upstream::{Failure, FailureKind};

/// What a failure means for the account that produced it.
pub fn outcome_of(failure: &Failure) -> Outcome {
    match &failure.kind {
        FailureKind::RateLimited {
            reset_at_unix_ms,
            images_only,
        } => Outcome::RateLimited {
            reset_at: reset_at_unix_ms.map(UnixMillis),
            scope: if *images_only {
                LimitScope::ImagesOnly
            } else {
                LimitScope::All
            },
        },
        FailureKind::Unauthorized => Outcome::AuthFailed {
            reason: short(&failure.message),
        },
        FailureKind::Forbidden { json_body } => Outcome::Forbidden {
            json_body: *json_body,
            detail: short(&failure.message),
        },
        FailureKind::Transient | FailureKind::Timeout | FailureKind::Protocol => Outcome::Transient {
            detail: short(&failure.message),
        },
        // An answer without an image depends on the prompt (the model answered in words), not on
        // the account: like a refusal, it is not held against the account. Nor is a client that
        // read the answer too slowly.
        FailureKind::ClientTooSlow
        | FailureKind::NoImage
        | FailureKind::Refused
        | FailureKind::Invalid
        | FailureKind::ModelUnsupported => Outcome::Invalid,
    }
}

/// At most 200 characters of a message, for the operator's view.
fn short(message: &str) -> String {
    message.chars().take(200).collect()
}

#[cfg(test)]
mod tests {
    use std::time::Duration;

    use super::*;

    #[test]
    fn a_slow_client_is_not_held_against_the_account_but_a_slow_upstream_is() {
        let budget = Duration::from_secs(300);
        assert_eq!(outcome_of(&Failure::client_too_slow(budget)), Outcome::Invalid);
        assert!(matches!(
            outcome_of(&Failure::timeout(budget)),
            Outcome::Transient { .. }
        ));
    }
}
