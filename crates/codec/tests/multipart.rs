#![allow(
    clippy::unwrap_used,
    clippy::expect_used,
    clippy::panic,
    clippy::disallowed_methods
)]

mod support;

use bytes::Bytes;
use imagegate_codec::ApiError;
use imagegate_codec::multipart::{EditForm, EditLimits, boundary, decode_edit, decode_edit_with_limits};
use imagegate_domain::{Dimensions, ErrorKind, ImageFileFormat};
use support::Form;

async fn decode(form: Form, chunk: usize) -> Result<EditForm, ApiError> {
    let (boundary, body) = form.finish();
    decode_edit(support::chunked(body, chunk), &boundary).await
}

fn sdk_form() -> Form {
    Form::new()
        .text("prompt", "add a red hat")
        .text("model", "gpt-image-2")
        .text("n", "2")
        .text("stream", "true")
        .text("partial_images", "1")
        .text("size", "1024x1024")
        .text("quality", "high")
        .text("output_format", "png")
        .text("output_compression", " 90 ")
        .text("background", "opaque")
        .text("moderation", "low")
        .text("user", "u-7")
        .file("image[]", "a.png", "image/png", &support::png_rgba(32, 16))
        .file("image[]", "b.jpg", "image/jpeg", &support::jpeg(8, 8))
        .file("mask", "mask.png", "image/png", &support::png_rgba(32, 16))
}

#[tokio::test]
async fn an_sdk_form_decodes_with_any_chunk_size() {
    for chunk in [1, 7, 64, 1 << 20] {
        let form = decode(sdk_form(), chunk).await.unwrap();
        let draft = &form.draft;
        assert_eq!(draft.prompt.as_deref(), Some("add a red hat"));
        assert_eq!(draft.model.as_deref(), Some("gpt-image-2"));
        assert_eq!(draft.n, Some(2));
        assert_eq!(draft.stream, Some(true));
        assert_eq!(draft.partial_images, Some(1));
        assert_eq!(draft.output_compression, Some(90));
        assert_eq!(draft.moderation.as_deref(), Some("low"));
        assert_eq!(draft.user.as_deref(), Some("u-7"));
        assert_eq!(form.images.len(), 2);
        let first = &form.images[0];
        assert_eq!(first.field, "image[]");
        assert_eq!(first.filename.as_deref(), Some("a.png"));
        assert_eq!(first.info.format, ImageFileFormat::Png);
        assert_eq!(
            first.info.dimensions,
            Dimensions {
                width: 32,
                height: 16
            }
        );
        assert!(first.info.has_alpha);
        assert_eq!(
            first.data.to_bytes().await.unwrap(),
            Bytes::from(support::png_rgba(32, 16))
        );
        assert_eq!(form.images[1].info.format, ImageFileFormat::Jpeg);
        assert_eq!(form.images[1].info.byte_len, support::jpeg(8, 8).len() as u64);
        let mask = form.mask.unwrap();
        assert_eq!(mask.field, "mask");
        assert!(mask.info.has_alpha);
    }
}

#[tokio::test]
async fn parts_in_any_order_and_a_single_image_part() {
    let form = Form::new()
        .file(
            "mask",
            "m.webp",
            "application/octet-stream",
            &support::webp_extended(20, 10, true),
        )
        .file(
            "image",
            "in.webp",
            "application/octet-stream",
            &support::webp_lossless(20, 10, false),
        )
        .text("prompt", "p")
        .text("stream", "FALSE");
    let form = decode(form, 5).await.unwrap();
    assert_eq!(form.images.len(), 1);
    assert_eq!(form.images[0].field, "image");
    assert_eq!(form.images[0].info.format, ImageFileFormat::Webp);
    assert_eq!(form.draft.stream, Some(false));
    assert!(form.mask.is_some());
}

#[tokio::test]
async fn indexed_images_are_ordered_by_index() {
    let form = Form::new()
        .file("image[1]", "second.png", "image/png", &support::png_rgb(16, 16))
        .file("image[0]", "first.png", "image/png", &support::png_rgba(24, 24))
        .file("mask", "m.png", "image/png", &support::png_rgba(24, 24))
        .text("prompt", "p");
    let form = decode(form, 1024).await.unwrap();
    let names: Vec<_> = form.images.iter().map(|image| image.field.as_str()).collect();
    assert_eq!(names, ["image[0]", "image[1]"]);
    assert_eq!(
        form.images[0].info.dimensions,
        Dimensions {
            width: 24,
            height: 24
        }
    );
}

#[tokio::test]
async fn more_than_sixteen_images_are_refused() {
    let png = support::png_rgb(4, 4);
    let mut form = Form::new().text("prompt", "p");
    for _ in 0..16 {
        form = form.file("image[]", "x.png", "image/png", &png);
    }
    let sixteen = decode(form, 4096).await.unwrap();
    assert_eq!(sixteen.images.len(), 16);

    let mut form = Form::new().text("prompt", "p");
    for _ in 0..17 {
        form = form.file("image[]", "x.png", "image/png", &png);
    }
    let err = decode(form, 4096).await.unwrap_err();
    assert_eq!(err.status(), 400);
    assert_eq!(err.param.as_deref(), Some("image"));
    assert!(err.message.contains("at most 16"), "{}", err.message);
}

/// A body stream that fails if it is read past `readable` bytes.
fn poisoned_after(
    body: Vec<u8>,
    readable: usize,
) -> impl futures::Stream<Item = Result<Bytes, std::io::Error>> + Send {
    let head = Bytes::from(body).slice(..readable);
    let chunks: Vec<Result<Bytes, std::io::Error>> = head
        .chunks(100)
        .map(|c| Ok(Bytes::copy_from_slice(c)))
        .chain(std::iter::once(Err(std::io::Error::other("read past the limit"))))
        .collect();
    futures::stream::iter(chunks)
}

#[tokio::test]
async fn a_file_is_refused_as_soon_as_it_reaches_the_limit() {
    let limits = EditLimits {
        max_file_bytes: 1000,
        ..EditLimits::default()
    };
    let mut big = support::png_rgb(4, 4);
    big.resize(5000, 0);
    let (boundary, body) = Form::new()
        .file("image[]", "big.png", "image/png", &big)
        .text("prompt", "p")
        .finish();
    // Only ~1.5 KB of the 5 KB file can be read; reading further would hit the stream error.
    let err = decode_edit_with_limits(poisoned_after(body, 1500), &boundary, limits)
        .await
        .unwrap_err();
    assert_eq!(err.kind, ErrorKind::PayloadTooLarge);
    assert_eq!(err.status(), 413);
    assert_eq!(err.param.as_deref(), Some("image[]"));
    assert_eq!(err.code(), Some("file_too_large"));
}

#[tokio::test]
async fn the_limit_is_strict() {
    let png = support::png_rgb(4, 4);
    for (limit, accepted) in [(png.len() as u64 + 1, true), (png.len() as u64, false)] {
        let limits = EditLimits {
            max_file_bytes: limit,
            ..EditLimits::default()
        };
        let (boundary, body) = Form::new().file("image", "a.png", "image/png", &png).finish();
        let result = decode_edit_with_limits(support::chunked(body, 3), &boundary, limits).await;
        assert_eq!(result.is_ok(), accepted, "limit {limit}");
    }
}

#[tokio::test]
async fn files_are_sniffed_not_trusted() {
    let form =
        Form::new()
            .text("prompt", "p")
            .file("image[]", "x.png", "image/png", b"GIF89a not a png at all");
    let err = decode(form, 8).await.unwrap_err();
    assert_eq!(err.param.as_deref(), Some("image[]"));
    assert_eq!(err.code(), Some("unsupported_file_mimetype"));
    assert_eq!(err.status(), 400);

    // Refused from the first bytes: the rest of the body is never read.
    let mut gif = b"GIF89a".to_vec();
    gif.resize(4000, 7);
    let (boundary, body) = Form::new().file("image", "x.png", "image/png", &gif).finish();
    let err = decode_edit(poisoned_after(body, 400), &boundary)
        .await
        .unwrap_err();
    assert_eq!(err.code(), Some("unsupported_file_mimetype"));

    let mut truncated = support::png_rgba(8, 8);
    truncated.truncate(20);
    let err = decode(Form::new().file("image", "t.png", "image/png", &truncated), 64)
        .await
        .unwrap_err();
    assert_eq!(err.code(), Some("invalid_image"));
    assert!(err.message.contains("truncated"), "{}", err.message);
}

#[tokio::test]
async fn each_mask_problem_has_its_own_message() {
    let image = support::png_rgba(32, 32);
    let cases = [
        (support::png_rgb(32, 32), "no alpha channel"),
        (
            support::webp_lossless(32, 32, true),
            "the mask is webp but the image is png",
        ),
        (
            support::png_rgba(16, 32),
            "the mask is 16x32 pixels but the image is 32x32",
        ),
    ];
    let mut messages = Vec::new();
    for (mask, fragment) in cases {
        let form = Form::new()
            .text("prompt", "p")
            .file("image[]", "a.png", "image/png", &image)
            .file("mask", "m.png", "image/png", &mask);
        let err = decode(form, 256).await.unwrap_err();
        assert_eq!(err.param.as_deref(), Some("mask"));
        assert_eq!(err.status(), 400);
        assert!(err.message.to_lowercase().contains(fragment), "{}", err.message);
        messages.push(err.message);
    }
    messages.dedup();
    assert_eq!(messages.len(), 3);
}

#[tokio::test]
async fn text_field_problems() {
    let err = decode(Form::new().text("prompt", "p"), 64).await.unwrap_err();
    assert_eq!(err.param.as_deref(), Some("image"));
    assert_eq!(err.code(), Some("missing_required_parameter"));

    let png = support::png_rgb(4, 4);
    let with_image = || Form::new().file("image", "a.png", "image/png", &png);
    let err = decode(with_image().text("n", "two"), 64).await.unwrap_err();
    assert_eq!(err.param.as_deref(), Some("n"));
    assert_eq!(err.code(), Some("invalid_type"));
    assert!(
        err.message.contains("expected an integer, but got 'two' instead"),
        "{}",
        err.message
    );

    let err = decode(with_image().text("stream", "yes"), 64).await.unwrap_err();
    assert_eq!(err.param.as_deref(), Some("stream"));

    let err = decode(with_image().text("colour", "red"), 64).await.unwrap_err();
    assert_eq!(err.code(), Some("unknown_parameter"));
    assert_eq!(err.param.as_deref(), Some("colour"));

    // A file under a name the form does not have is an unknown parameter too, not text that
    // fails to be UTF-8.
    let jpeg = support::jpeg(8, 8);
    for name in ["images[]", "image[x]", "file"] {
        let form = with_image().file(name, "b.jpg", "image/jpeg", &jpeg);
        let err = decode(form, 64).await.unwrap_err();
        assert_eq!(
            (err.code(), err.param.as_deref()),
            (Some("unknown_parameter"), Some(name)),
            "{}",
            err.message
        );
    }

    let err = decode(with_image().text("n", "1").text("n", "2"), 64)
        .await
        .unwrap_err();
    assert_eq!(err.code(), Some("duplicate_parameter"));

    let form = decode(with_image().text("n", "99999999999999999999999"), 64)
        .await
        .unwrap();
    assert_eq!(form.draft.n, Some(i64::MAX));
}

#[tokio::test]
async fn malformed_bodies_and_content_types() {
    let (boundary_text, mut body) = Form::new().text("prompt", "p").finish();
    body.truncate(body.len() - 10);
    let err = decode_edit(support::chunked(body, 16), &boundary_text)
        .await
        .unwrap_err();
    assert_eq!(err.status(), 400);
    assert_eq!(err.code(), Some("invalid_multipart"));

    assert_eq!(
        boundary("multipart/form-data; boundary=abc123").unwrap(),
        "abc123"
    );
    let err = boundary("application/json").unwrap_err();
    assert_eq!(err.status(), 400);
    assert_eq!(err.code(), Some("invalid_content_type"));
}

/// A body that goes on long after any bound: `head` once, then 64 MiB of `filler` (bounded only
/// so that a regression fails instead of eating memory for ever).
fn endless(
    head: &str,
    filler: &'static [u8],
) -> impl futures::Stream<Item = Result<Bytes, std::io::Error>> + Send {
    let head = futures::stream::iter([Ok(Bytes::copy_from_slice(head.as_bytes()))]);
    futures::StreamExt::chain(
        head,
        futures::StreamExt::take(
            futures::stream::repeat_with(move || Ok(Bytes::from_static(filler))),
            64 * 1024 * 1024 / filler.len(),
        ),
    )
}

#[tokio::test]
async fn part_headers_or_a_preamble_that_never_end_are_refused() {
    let filler: &'static [u8] = &[b'a'; 8192];
    let cases = [
        // A header line that never ends.
        "--b\r\nContent-Disposition: form-data; name=\"prompt\"\r\nX-Pad: ",
        // Headers after a complete first part.
        "--b\r\nContent-Disposition: form-data; name=\"prompt\"\r\n\r\np\r\n--b\r\nX-Pad: ",
        // No boundary at all.
        "",
    ];
    for head in cases {
        let err = decode_edit(endless(head, filler), "b").await.unwrap_err();
        assert_eq!(err.status(), 400, "{head:?}");
        assert_eq!(err.code(), Some("invalid_multipart"));
        // Refused for the bound, not for the body's end.
        let bound = format!(
            "longer than {} bytes",
            imagegate_codec::multipart::MAX_PART_HEAD_BYTES
        );
        assert!(err.message.contains(&bound), "{}", err.message);
    }
}

#[tokio::test]
async fn part_headers_sent_a_byte_per_chunk_are_refused_after_a_bounded_number_of_chunks() {
    // multer searches all it holds again for each chunk: a head a byte per chunk is refused by
    // its count of chunks, long before its bytes reach the byte bound.
    let pulled = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = std::sync::Arc::clone(&pulled);
    let body = futures::StreamExt::inspect(
        endless(
            "--b\r\nContent-Disposition: form-data; name=\"prompt\"\r\nX-Pad: ",
            b"a",
        ),
        move |_| {
            counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
        },
    );
    let err = decode_edit(body, "b").await.unwrap_err();
    assert_eq!(err.status(), 400);
    assert_eq!(err.code(), Some("invalid_multipart"));
    let bound = format!(
        "more than {} chunks",
        imagegate_codec::multipart::MAX_PART_HEAD_CHUNKS
    );
    assert!(err.message.contains(&bound), "{}", err.message);
    let pulled = pulled.load(std::sync::atomic::Ordering::SeqCst);
    let most = usize::try_from(imagegate_codec::multipart::MAX_PART_HEAD_CHUNKS).unwrap() + 2;
    assert!(pulled <= most, "{pulled} chunks read");
}

#[tokio::test]
async fn a_text_part_longer_than_the_head_budget_is_fine() {
    // The head budget covers only the search for a part's start; content has its own limits.
    let long = "p".repeat(3 * 1024 * 1024);
    let limits = EditLimits {
        max_text_bytes: 4 * 1024 * 1024,
        ..EditLimits::default()
    };
    let (boundary, body) = Form::new()
        .text("prompt", &long)
        .file("image", "a.png", "image/png", &support::png_rgb(4, 4))
        .finish();
    let form = decode_edit_with_limits(support::chunked(body, 64 * 1024), &boundary, limits)
        .await
        .unwrap();
    assert_eq!(form.draft.prompt.map(|p| p.len()), Some(long.len()));
}

#[tokio::test]
async fn fields_that_break_a_rule_fail_before_the_files_after_them_are_read() {
    // The SDKs send the text fields first: a wrong size is refused before a byte of the 64 MiB
    // file after it is read (the body counts what was pulled).
    let catalog = imagegate_domain::ModelCatalog::default();
    let check = |draft: &imagegate_domain::ImageParamsDraft| {
        imagegate_domain::check_edit_so_far(draft, &catalog).map_err(ApiError::from)
    };
    let head = "--b\r\nContent-Disposition: form-data; name=\"model\"\r\n\r\ngpt-image-2\r\n\
                --b\r\nContent-Disposition: form-data; name=\"size\"\r\n\r\n4096x4096\r\n\
                --b\r\nContent-Disposition: form-data; name=\"image\"; filename=\"a.png\"\r\n\
                Content-Type: image/png\r\n\r\n\u{89}PNG";
    let pulled = std::sync::Arc::new(std::sync::atomic::AtomicUsize::new(0));
    let counter = std::sync::Arc::clone(&pulled);
    let body = futures::StreamExt::inspect(endless(head, &[0u8; 8192]), move |_| {
        counter.fetch_add(1, std::sync::atomic::Ordering::SeqCst);
    });
    let err = imagegate_codec::multipart::decode_edit_checked(body, "b", EditLimits::default(), check)
        .await
        .unwrap_err();
    assert_eq!(
        (err.status(), err.param.as_deref()),
        (400, Some("size")),
        "{err:?}"
    );
    assert!(
        pulled.load(std::sync::atomic::Ordering::SeqCst) < 16,
        "refused before the file was read: {} chunks",
        pulled.load(std::sync::atomic::Ordering::SeqCst)
    );
    // A form whose fields are fine so far is read on; what is missing waits for the whole form.
    let form = Form::new()
        .text("size", "1024x1024")
        .text("stream", "true")
        .file("image", "a.png", "image/png", &support::png_rgba(32, 16))
        .text("partial_images", "2");
    let (boundary, body) = form.finish();
    let read = imagegate_codec::multipart::decode_edit_checked(
        support::chunked(body, 1024),
        &boundary,
        EditLimits::default(),
        check,
    )
    .await
    .unwrap();
    assert_eq!(read.images.len(), 1);
    assert_eq!(read.draft.partial_images, Some(2));
}

#[tokio::test]
async fn a_spilled_upload_has_no_name_and_reads_the_same_from_any_number_of_readers() {
    // Past the spill threshold (bytes after IEND are the file's own, the header says what it is).
    let mut file = support::png_rgb(64, 64);
    file.extend((0..600_000u32).map(|i| (i % 251) as u8));
    let dir = tempfile::tempdir().unwrap();
    let limits = EditLimits {
        spill_dir: Some(dir.path().to_owned()),
        ..EditLimits::default()
    };
    let (boundary, body) = Form::new()
        .text("prompt", "p")
        .file("image", "a.png", "image/png", &file)
        .finish();
    let form = decode_edit_with_limits(support::chunked(body, 7 * 1024), &boundary, limits)
        .await
        .unwrap();
    let data = &form.images[0].data;
    assert!(data.is_spilled());
    assert_eq!(form.images[0].info.byte_len, file.len() as u64);
    // Nothing to leave behind if the process is killed: the file has no name in its directory.
    assert_eq!(std::fs::read_dir(dir.path()).unwrap().count(), 0);
    // Two readers at once (a try and the next) each read the whole file from its start.
    async fn read(data: &imagegate_codec::multipart::UploadData) -> Vec<u8> {
        let stream = data.stream().unwrap();
        let chunks: Vec<Bytes> = futures::StreamExt::collect::<Vec<_>>(stream)
            .await
            .into_iter()
            .map(Result::unwrap)
            .collect();
        chunks.concat()
    }
    let (a, b) = tokio::join!(read(data), read(data));
    assert_eq!(a, file);
    assert_eq!(b, file);
    assert_eq!(data.to_bytes().await.unwrap(), Bytes::from(file));
}

/// A body error that carries its cause as its source, as the server's body errors do (axum wraps
/// each in its own error type).
#[derive(Debug, thiserror::Error)]
#[error("the body failed")]
struct Wrapped(#[source] imagegate_codec::BodyCut);

#[tokio::test]
async fn a_body_its_client_stopped_sending_or_left_is_a_timeout_or_a_closed_request_not_malformed() {
    use imagegate_codec::BodyCut;
    let (boundary, body) = sdk_form().finish();
    let cases = [
        (BodyCut::Stalled, ErrorKind::RequestTimeout, 408),
        (BodyCut::ClientGone, ErrorKind::ClientClosed, 499),
    ];
    for (cut, kind, status) in cases {
        // Cut in the first text field, and inside a file (read by the upload path).
        for readable in [60, body.len() - 200] {
            let head = Bytes::from(body.clone()).slice(..readable);
            let chunks = vec![Ok(head), Err(Wrapped(cut))];
            let err = decode_edit(futures::stream::iter(chunks), &boundary)
                .await
                .unwrap_err();
            assert_eq!(
                (err.kind, err.status()),
                (kind, status),
                "{cut:?} at {readable}: {err:?}"
            );
        }
    }
    // Any other failure of the body is still a body that could not be read.
    let head = Bytes::from(body).slice(..60);
    let chunks = vec![Ok(head), Err(std::io::Error::other("a bad chunk size"))];
    let err = decode_edit(futures::stream::iter(chunks), &boundary)
        .await
        .unwrap_err();
    assert_eq!((err.status(), err.code()), (400, Some("invalid_multipart")));
}

#[tokio::test]
async fn uploads_keep_no_more_on_disk_at_once_than_their_budget_and_give_it_back() {
    use imagegate_codec::multipart::DiskBudget;
    // A file of about 600 kB, past the spill threshold.
    let mut file = support::png_rgb(64, 64);
    file.extend((0..600_000u32).map(|i| (i % 251) as u8));
    let form = || {
        Form::new()
            .text("prompt", "p")
            .file("image", "a.png", "image/png", &file)
            .finish()
    };
    let budget = DiskBudget::new(1_000_000);
    let limits = EditLimits {
        disk_budget: Some(budget.clone()),
        ..EditLimits::default()
    };
    let (boundary, body) = form();
    let first = decode_edit_with_limits(support::chunked(body, 7 * 1024), &boundary, limits.clone())
        .await
        .unwrap();
    assert_eq!(
        budget.in_use(),
        file.len() as u64,
        "the kept file holds its bytes"
    );
    // A second one does not fit beside it: refused with a 503 the SDKs retry, its part given back.
    let (boundary, body) = form();
    let err = decode_edit_with_limits(support::chunked(body, 7 * 1024), &boundary, limits.clone())
        .await
        .unwrap_err();
    assert_eq!((err.kind, err.status()), (ErrorKind::Overloaded, 503), "{err:?}");
    assert_eq!(budget.in_use(), file.len() as u64);
    // Once the first request is done with its file, the next one fits.
    drop(first);
    assert_eq!(budget.in_use(), 0);
    let (boundary, body) = form();
    let again = decode_edit_with_limits(support::chunked(body, 7 * 1024), &boundary, limits)
        .await
        .unwrap();
    assert!(again.images[0].data.is_spilled());
    drop(again);
    assert_eq!(budget.in_use(), 0);
}
