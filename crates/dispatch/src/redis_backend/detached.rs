//! Script calls that take something in Redis (an account slot, a key permit) run to their end in a
//! task of their own.
//!
//! A caller can stop waiting at any await: a client hangs up, a timeout fires. If it stopped while
//! Redis was answering, the reply, the only record of the slot or permit the script took, would go
//! with it, and the slot would stay taken until its TTL (minutes for a key permit). Run through
//! [`run_to_the_end`], the call finishes anyway and what nobody received is given back.

use std::future::Future;

use tokio::sync::oneshot;

/// Runs `call` in a spawned task and returns its result; if the caller stopped waiting, a
/// successful result is passed to `give_back` instead. `lost` makes the error returned when the task
/// ended without a result (it panicked).
pub(crate) async fn run_to_the_end<T, E>(
    call: impl Future<Output = Result<T, E>> + Send + 'static,
    give_back: impl FnOnce(T) + Send + 'static,
    lost: impl FnOnce() -> E,
) -> Result<T, E>
where
    T: Send + 'static,
    E: Send + 'static,
{
    let (reply, answer) = oneshot::channel();
    tokio::spawn(async move {
        let result = call.await;
        if let Err(Ok(unclaimed)) = reply.send(result) {
            give_back(unclaimed);
        }
    });
    answer.await.unwrap_or_else(|_| Err(lost()))
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
    async fn a_call_that_dies_is_an_error() {
        let result: Result<u32, String> =
            run_to_the_end(async { panic!("the call died") }, |_: u32| {}, || "lost".into()).await;
        assert_eq!(result, Err("lost".into()));
    }
}
