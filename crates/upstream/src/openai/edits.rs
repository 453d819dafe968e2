//! `POST /images/edits`: the multipart form. Text fields first (the fields of
//! [`super::images::fields`]; `moderation` only when it is not `auto`, since the SDKs' multipart
//! edit form does not list it), then one `image[]` part per input image in order, then `mask`.
//! Each file part carries a file name and the MIME type sniffed from its bytes; the bytes are
//! shared with the caller, not copied, and a file the codec spilled to disk is streamed from it.

use imagegate_domain::ImageParams;
use reqwest::multipart::{Form, Part};

use super::images::{self, FieldValue};
use crate::call::UploadedImage;
use crate::failure::Failure;

/// The multipart form of an edit.
pub(crate) fn edit_form(
    params: &ImageParams,
    images: &[UploadedImage],
    mask: Option<&UploadedImage>,
) -> Result<Form, Failure> {
    if images.is_empty() {
        return Err(Failure::protocol("an edit needs at least one image"));
    }
    let mut form = Form::new();
    for (name, value) in images::fields(params, images::Form::Edit) {
        form = form.text(name, FieldValue::into_form_text(value));
    }
    for (index, image) in images.iter().enumerate() {
        form = form.part("image[]", file_part(image, &format!("image-{}", index + 1))?);
    }
    if let Some(mask) = mask {
        form = form.part("mask", file_part(mask, "mask")?);
    }
    Ok(form)
}

fn file_part(image: &UploadedImage, fallback_stem: &str) -> Result<Part, Failure> {
    let format = image.info.format;
    let length = image.data.len();
    let stream = image
        .data
        .stream()
        .map_err(|err| Failure::protocol(format!("reading an uploaded file failed: {err}")))?;
    let filename = image
        .filename
        .as_deref()
        .map(clean_filename)
        .filter(|name| !name.is_empty())
        .unwrap_or_else(|| format!("{fallback_stem}.{}", format.as_str()));
    Part::stream_with_length(reqwest::Body::wrap_stream(stream), length)
        .file_name(filename)
        .mime_str(format.mime())
        .map_err(|err| Failure::protocol(format!("building the edit form failed: {err}")))
}

/// The file name without a path, quotes or control characters.
fn clean_filename(name: &str) -> String {
    let base = name.rsplit(['/', '\\']).next().unwrap_or(name);
    base.chars()
        .filter(|c| !c.is_control() && *c != '"')
        .collect::<String>()
        .trim()
        .to_owned()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn filenames_lose_paths_quotes_and_controls() {
        assert_eq!(clean_filename("C:\\pics\\cat.png"), "cat.png");
        assert_eq!(clean_filename("../../etc/\"a\r\nb\".png"), "ab.png");
        assert_eq!(clean_filename("  "), "");
    }
}
