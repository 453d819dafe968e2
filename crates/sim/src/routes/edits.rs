//! `POST /v1/images/edits`: a multipart form with `image`, `image[]` or `image[N]` files and an optional
//! `mask`, decoded and checked by the codec and the domain rules.

use axum::Extension;
use axum::body::Body;
use axum::extract::State;
use axum::http::{HeaderMap, header};
use axum::response::{IntoResponse, Response};
use imagegate_codec::ApiError;
use imagegate_codec::multipart::{UploadedImage, boundary, decode_edit};
use imagegate_domain::validate_edit;

use super::RequestContext;
use super::images::answer_images;
use crate::errors::ApiFailure;
use crate::simulator::{ImageJob, JobKind};
use crate::state::SimState;
use crate::stats::EditInput;

/// Handler of `POST /v1/images/edits`.
pub async fn edits(
    State(state): State<SimState>,
    Extension(context): Extension<RequestContext>,
    headers: HeaderMap,
    body: Body,
) -> Response {
    match decode(&state, &headers, body).await {
        Ok((job, stream)) => answer_images(&state, &context, &job, stream).await,
        Err(failure) => failure.into_response(),
    }
}

async fn decode(state: &SimState, headers: &HeaderMap, body: Body) -> Result<(ImageJob, bool), ApiFailure> {
    let content_type = headers
        .get(header::CONTENT_TYPE)
        .and_then(|v| v.to_str().ok())
        .unwrap_or("");
    let boundary = boundary(content_type)?;
    let form = decode_edit(body.into_data_stream(), &boundary).await?;
    let mut inputs = Vec::with_capacity(form.images.len() + 1);
    for image in form.images.iter().chain(form.mask.as_ref()) {
        inputs.push(edit_input(image).await?);
    }
    state.stats().record_edit_inputs(inputs);
    let params = validate_edit(form.draft, &state.config().catalog).map_err(ApiError::from)?;
    let inputs = form.images.iter().map(|image| image.info.dimensions).collect();
    Ok((
        ImageJob::from_params(&params, JobKind::Edit, inputs),
        params.stream,
    ))
}

/// The size and SHA-256 of one received file (read back from disk when the codec spilled it).
async fn edit_input(image: &UploadedImage) -> Result<EditInput, ApiFailure> {
    use futures::StreamExt;
    use sha2::Digest;
    let unreadable = |_| ApiFailure::from(ApiError::internal());
    let mut hasher = sha2::Sha256::new();
    let mut chunks = std::pin::pin!(image.data.stream().map_err(unreadable)?);
    while let Some(chunk) = chunks.next().await {
        hasher.update(chunk.map_err(unreadable)?);
    }
    Ok(EditInput {
        field: image.field.clone(),
        bytes: image.data.len(),
        sha256: hex::encode(hasher.finalize()),
    })
}
