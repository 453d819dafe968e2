//! Why a request body ended before its end, as the HTTP server tells the decoders.
//!
//! The server fails the body's stream with a [`BodyCut`] (anywhere in the error's source chain)
//! when the client stops sending or leaves; the decoders then answer
//! [`ErrorKind::RequestTimeout`] or [`ErrorKind::ClientClosed`] instead of calling the body
//! malformed.
//!
//! ```
//! use imagegate_codec::BodyCut;
//!
//! let boxed: Box<dyn std::error::Error + Send + Sync> = Box::new(BodyCut::Stalled);
//! assert_eq!(BodyCut::find(boxed.as_ref()), Some(BodyCut::Stalled));
//! assert_eq!(BodyCut::Stalled.api_error().status(), 408);
//! assert_eq!(BodyCut::ClientGone.api_error().status(), 499);
//! ```

use imagegate_domain::ErrorKind;

use crate::ApiError;

/// How a request body was cut short by its client.
#[derive(Debug, Clone, Copy, PartialEq, Eq, thiserror::Error)]
pub enum BodyCut {
    /// Nothing of the body came for the server's idle timeout.
    #[error("nothing of the request body came for too long")]
    Stalled,
    /// The client closed (or reset) the connection before the body's end.
    #[error("the client closed the connection before the request body ended")]
    ClientGone,
}

impl BodyCut {
    /// The cut that `error` or one of its sources is, if any.
    pub fn find(error: &(dyn std::error::Error + 'static)) -> Option<Self> {
        let mut next = Some(error);
        while let Some(error) = next {
            if let Some(cut) = error.downcast_ref::<Self>() {
                return Some(*cut);
            }
            next = error.source();
        }
        None
    }

    /// The answer (and the usage record's status) of a request whose body was cut.
    pub fn api_error(self) -> ApiError {
        match self {
            Self::Stalled => ApiError::new(
                ErrorKind::RequestTimeout,
                "The request body stopped arriving: nothing of it came for too long. Send the request again.",
            ),
            Self::ClientGone => ApiError::new(
                ErrorKind::ClientClosed,
                "The client closed the connection before the request body ended.",
            ),
        }
    }
}
