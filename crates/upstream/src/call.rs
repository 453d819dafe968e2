//! What to ask the upstream: a generation, an edit or a Responses call.

use imagegate_domain::ImageParams;
use serde_json::{Map, Value};

/// One uploaded edit input (an image or the mask), held once: the codec's multipart type.
pub use imagegate_codec::multipart::UploadedImage;

/// One upstream request, borrowed from the validated client request.
#[derive(Clone, Copy, Debug)]
pub enum UpstreamCall<'a> {
    /// `POST /v1/images/generations`.
    Generate {
        /// The validated parameters.
        params: &'a ImageParams,
    },
    /// `POST /v1/images/edits`.
    Edit {
        /// The validated parameters.
        params: &'a ImageParams,
        /// The input images, in order (at least one).
        images: &'a [UploadedImage],
        /// The mask for the first image.
        mask: Option<&'a UploadedImage>,
    },
    /// `POST /v1/responses`: the client's body is forwarded as it is (its `model` included) to an
    /// API-key account, and adapted to what the ChatGPT backend takes for a subscription account.
    Respond {
        /// The client's JSON body.
        body: &'a Map<String, Value>,
        /// Whether the body asks for a stream.
        stream: bool,
    },
}

impl UpstreamCall<'_> {
    /// Whether the answer is an event stream.
    pub fn is_stream(&self) -> bool {
        match self {
            Self::Generate { params } | Self::Edit { params, .. } => params.stream,
            Self::Respond { stream, .. } => *stream,
        }
    }

    /// Which endpoint this call is for.
    pub fn endpoint(&self) -> Endpoint {
        match self {
            Self::Generate { .. } => Endpoint::Generations,
            Self::Edit { .. } => Endpoint::Edits,
            Self::Respond { .. } => Endpoint::Responses,
        }
    }
}

/// The upstream endpoints.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Endpoint {
    /// `/images/generations`.
    Generations,
    /// `/images/edits`.
    Edits,
    /// `/responses`.
    Responses,
}

impl Endpoint {
    /// The path below the base URL.
    pub const fn path(self) -> &'static str {
        match self {
            Self::Generations => "images/generations",
            Self::Edits => "images/edits",
            Self::Responses => "responses",
        }
    }

    /// Whether a successful answer must carry an image (the Images API).
    pub const fn is_images(self) -> bool {
        matches!(self, Self::Generations | Self::Edits)
    }
}
