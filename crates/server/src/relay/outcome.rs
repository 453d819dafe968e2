//! Upstream failures, as the dispatcher's outcomes.

use imagegate_dispatch::{LimitScope, Outcome, UnixMillis};
use imagegate_upstream::{Failure, FailureKind, UpstreamCall};

/// What a failed try of `call` means for its account, where the request says more than the
/// failure alone: a later try's timeout came from the time earlier tries used up (not held
/// against the account: three would open its circuit breaker); an image model the gateway chose
/// (the Images endpoints) that the account does not serve is the account's failing, so that an
/// account without it stops being picked first, while a Responses call's main model is the
/// client's choice and never held against an account.
pub fn outcome_of_try(failure: &Failure, call: UpstreamCall<'_>, later_try: bool) -> Outcome {
    match failure.kind {
        FailureKind::ModelUnsupported if !matches!(call, UpstreamCall::Respond { .. }) => {
            Outcome::Transient {
                detail: short(&failure.message),
            }
        }
        _ => outcome_of_late(failure, later_try),
    }
}

/// What a failure means for the account that produced it, on a try made after others
/// (`later_try`) or not: such a try's timeout came from the time the others used up, before its
/// answer started or after (a stream that timed out between events).
pub fn outcome_of_late(failure: &Failure, later_try: bool) -> Outcome {
    match failure.kind {
        FailureKind::Timeout if later_try => Outcome::Invalid,
        _ => outcome_of(failure),
    }
}

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
    fn an_unserved_image_model_is_the_account_s_failing_but_a_client_s_main_model_is_not() {
        let params = imagegate_domain::validate_generation(
            imagegate_domain::ImageParamsDraft {
                model: Some("gpt-image-2".into()),
                prompt: Some("a fox".into()),
                ..Default::default()
            },
            &imagegate_domain::ModelCatalog::default(),
        )
        .expect("valid");
        let body = serde_json::Map::new();
        let unsupported = Failure::new(FailureKind::ModelUnsupported, "no such model");
        let images = UpstreamCall::Generate { params: &params };
        let respond = UpstreamCall::Respond {
            body: &body,
            stream: false,
        };
        assert!(matches!(
            outcome_of_try(&unsupported, images, false),
            Outcome::Transient { .. }
        ));
        assert_eq!(outcome_of_try(&unsupported, respond, false), Outcome::Invalid);
        let timeout = Failure::timeout(Duration::from_secs(120));
        assert_eq!(outcome_of_try(&timeout, images, true), Outcome::Invalid);
        assert!(matches!(
            outcome_of_try(&timeout, images, false),
            Outcome::Transient { .. }
        ));
    }

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
