//! Script calls that take something in Redis (an account slot, a key permit) run to their end in a
//! task of their own.
//!
//! A caller can stop waiting at any await: a client hangs up, a timeout fires. If it stopped while
//! Redis was answering, the reply, the only record of the slot or permit the script took, would go
//! with it, and the slot would stay taken until its TTL (minutes for a key permit). Run through
//! [`run_to_the_end`], the call finishes anyway and what nobody received is given back.

use std::future::Future;

use tokio::sync::oneshot;

/// Runs `call` in a spawned task and returns its result; a successful result the caller does not
/// take (it stopped waiting before or after the result was sent) is passed to `give_back` instead.
/// `lost` makes the error returned when the task ended without a result (it panicked).
pub(crate) async fn run_to_the_end<T, E, G>(
    call: impl Future<Output = Result<T, E>> + Send + 'static,
    give_back: G,
    lost: impl FnOnce() -> E,
) -> Result<T, E>
where
    T: Send + 'static,
    E: Send + 'static,
    G: FnOnce(T) + Send + 'static,
{
    let (reply, answer) = oneshot::channel();
    #[expect(
        clippy::disallowed_methods,
        reason = "detached on purpose: the call must finish when its caller stops waiting, and it gives back what nobody received"
    )]
    tokio::spawn(async move {
        let result = call.await.map(|value| Unclaimed {
            value: Some(value),
            give_back: Some(give_back),
        });
        // Not sent, or sent and dropped unread with the channel: either way `Unclaimed` gives it back.
        let _ = reply.send(result);
    });
    match answer.await {
        Ok(Ok(unclaimed)) => unclaimed.claim().ok_or_else(lost),
        Ok(Err(err)) => Err(err),
        Err(_) => Err(lost()),
    }
}

/// A result on its way to the caller; dropped without being claimed, it is given back.
struct Unclaimed<T, G: FnOnce(T)> {
    value: Option<T>,
    give_back: Option<G>,
}

impl<T, G: FnOnce(T)> Unclaimed<T, G> {
    fn claim(mut self) -> Option<T> {
        self.give_back = None;
        self.value.take()
    }
}

impl<T, G: FnOnce(T)> Drop for Unclaimed<T, G> {
    fn drop(&mut self) {
        if let (Some(value), Some(give_back)) = (self.value.take(), self.give_back.take()) {
            give_back(value);
        }
    }
}

#[cfg(test)]
mod tests {
    use std::sync::{Arc, Mutex};
    use std::time::Duration;

    use futures::FutureExt;

    use super::*;

    #[tokio::test]
    async fn the_result_goes_to_the_caller() {
        let given_back = Arc::new(Mutex::new(Vec::new()));
        let sink = Arc::clone(&given_back);
        let result: Result<u32, String> = run_to_the_end(
            async { Ok(7) },
            move |v| sink.lock().unwrap().push(v),
            || "lost".into(),
        )
        .await;
        assert_eq!(result, Ok(7));
        tokio::task::yield_now().await;
        assert!(given_back.lock().unwrap().is_empty());
    }

    #[tokio::test]
    async fn a_result_nobody_waits_for_is_given_back() {
        let (release, released) = oneshot::channel::<()>();
        let (given_back, gave_back) = oneshot::channel();
        let call = async move {
            let _ = released.await;
            Ok::<u32, String>(7)
        };
        // The caller polls once (the call is under way), then goes away.
        let abandoned = run_to_the_end(
            call,
            move |v| {
                let _ = given_back.send(v);
            },
            || "lost".into(),
        )
        .now_or_never();
        assert!(abandoned.is_none());
        release.send(()).unwrap();
        let returned = tokio::time::timeout(Duration::from_secs(5), gave_back).await;
        assert_eq!(returned.unwrap(), Ok(7));
    }

    #[tokio::test]
    async fn a_result_sent_but_never_read_is_given_back() {
        let (given_back, gave_back) = oneshot::channel();
        let mut caller = Box::pin(run_to_the_end(
            async { Ok::<u32, String>(7) },
            move |v| {
                let _ = given_back.send(v);
            },
            || "lost".into(),
        ));
        // The caller is waiting; the call finishes and sends its result...
        assert!((&mut caller).now_or_never().is_none());
        for _ in 0..10 {
            tokio::task::yield_now().await;
        }
        // ...and the caller goes away without reading it (cancelled before its next poll).
        drop(caller);
        let returned = tokio::time::timeout(Duration::from_secs(5), gave_back).await;
        assert_eq!(returned.unwrap(), Ok(7));
    }

    #[tokio::test]
    async fn a_call_that_dies_is_an_error() {
        let result: Result<u32, String> =
            run_to_the_end(async { panic!("the call died") }, |_: u32| {}, || "lost".into()).await;
        assert_eq!(result, Err("lost".into()));
    }
}
