//! An [`ImagesResponse`] as the pieces of its JSON document, each image's base64 one piece of its
//! own, moved in without a copy.
//!
//! `serde_json::to_vec` of a whole response holds every image twice at its end: once in the value,
//! once in the document. [`ImagesResponse::into_json_pieces`] gives the same bytes as a list of
//! pieces whose image pieces are the images' own buffers, so a response can be sent with its images
//! held once. Base64 needs no escaping; any string that does goes through `serde_json` (a copy).

use bytes::Bytes;

use super::images::ImagesResponse;

/// Where the (empty) image array sits in the document of a response without images. The first
/// match is the key: inside a string value a quote is always escaped.
const EMPTY_DATA: &[u8] = b"\"data\":[]";

impl ImagesResponse {
    /// The bytes of `serde_json::to_vec(&self)`, in pieces: the JSON around the images, and each
    /// image's base64 (its own buffer, not copied) between them. The first piece ends where the
    /// first image's base64 starts (base64 needs no escaping; a string that does is escaped into
    /// the JSON around it).
    pub fn into_json_pieces(mut self) -> serde_json::Result<Vec<Bytes>> {
        let data = std::mem::take(&mut self.data);
        let document = serde_json::to_vec(&self)?;
        let Some(at) = memchr::memmem::find(&document, EMPTY_DATA) else {
            // Not reached: `data` is always written. Stay correct if its key ever changes.
            self.data = data;
            return Ok(vec![Bytes::from(serde_json::to_vec(&self)?)]);
        };
        let document = Bytes::from(document);
        let close = at + EMPTY_DATA.len() - 1;
        let mut pieces = Vec::with_capacity(2 * data.len() + 1);
        let mut glue = document.slice(..close).to_vec();
        for (index, image) in data.into_iter().enumerate() {
            if index > 0 {
                glue.push(b',');
            }
            glue.extend_from_slice(b"{\"b64_json\":");
            match as_is(image.b64_json) {
                Ok(b64) => {
                    glue.push(b'"');
                    pieces.push(Bytes::from(std::mem::take(&mut glue)));
                    pieces.push(b64);
                    glue.push(b'"');
                }
                Err(text) => serde_json::to_writer(&mut glue, &text)?,
            }
            if let Some(prompt) = &image.revised_prompt {
                glue.extend_from_slice(b",\"revised_prompt\":");
                serde_json::to_writer(&mut glue, prompt)?;
            }
            glue.push(b'}');
        }
        glue.extend_from_slice(&document[close..]);
        pieces.push(Bytes::from(glue));
        Ok(pieces)
    }
}

/// `text` itself when nothing in it needs escaping in a JSON string (as in base64), else `text`
/// back for `serde_json` to escape.
fn as_is(text: String) -> Result<Bytes, String> {
    if text
        .bytes()
        .any(|byte| byte == b'"' || byte == b'\\' || byte < 0x20)
    {
        return Err(text);
    }
    Ok(Bytes::from(text))
}

#[cfg(test)]
mod tests {
    use imagegate_domain::Usage;

    use super::*;
    use crate::wire::ImageData;

    fn response(data: Vec<ImageData>) -> ImagesResponse {
        ImagesResponse {
            created: 1_780_000_000,
            background: Some("opaque".into()),
            data,
            model: Some("gpt-image-2".into()),
            output_format: Some("png".into()),
            quality: Some("high".into()),
            size: Some("3840x2160".into()),
            usage: Some(Usage::default()),
        }
    }

    fn image(b64: &str, prompt: Option<&str>) -> ImageData {
        ImageData {
            b64_json: b64.into(),
            revised_prompt: prompt.map(Into::into),
        }
    }

    /// The pieces, joined, are serde's document.
    fn same_as_serde(response: ImagesResponse) -> Vec<Bytes> {
        let expected = serde_json::to_vec(&response).expect("serializes");
        let pieces = response.into_json_pieces().expect("writes");
        let joined: Vec<u8> = pieces.iter().flat_map(|piece| piece.iter().copied()).collect();
        assert_eq!(
            String::from_utf8_lossy(&joined),
            String::from_utf8_lossy(&expected)
        );
        pieces
    }

    #[test]
    fn the_pieces_make_the_document_serde_writes() {
        assert_eq!(same_as_serde(response(Vec::new())).len(), 1);
        same_as_serde(response(vec![image("iVBORw0KGgo+/A==", Some("a fox"))]));
        same_as_serde(response(vec![
            image("iVBORw0KGgo+/A==", None),
            image("UklGRg==", Some("a \"quoted\" fox\nover two lines\t\u{1}")),
            image(&"QUJD".repeat(10_000), Some("ünïcode ✓")),
        ]));
        let mut bare = response(vec![image("QUJD", None)]);
        bare.background = None;
        bare.model = None;
        bare.usage = None;
        same_as_serde(bare);
    }

    #[test]
    fn each_image_is_its_own_buffer_and_the_first_piece_ends_where_it_starts() {
        let images = ["iVBORw0KGgo+/A==".repeat(1_000), "UklGRg==".repeat(500)];
        let data: Vec<ImageData> = images.iter().map(|b64| image(b64, Some("p"))).collect();
        let buffers: Vec<*const u8> = data.iter().map(|image| image.b64_json.as_ptr()).collect();
        let pieces = same_as_serde(response(data));
        assert_eq!(pieces.len(), 5, "glue, image, glue, image, glue");
        assert!(
            pieces[0].ends_with(b"\"data\":[{\"b64_json\":\""),
            "{:?}",
            pieces[0]
        );
        for (index, buffer) in buffers.into_iter().enumerate() {
            let piece = &pieces[2 * index + 1];
            assert_eq!(piece.as_ptr(), buffer, "image {index} is moved, not copied");
            assert_eq!(piece.len(), images[index].len());
        }
    }

    #[test]
    fn strings_that_are_not_base64_are_escaped() {
        let pieces = same_as_serde(response(vec![
            image("ab\"cd", None),
            image("back\\slash", None),
            image("new\nline", None),
        ]));
        assert_eq!(
            pieces.len(),
            1,
            "escaped strings are copied into the JSON around them"
        );
        let joined: Vec<u8> = pieces.concat();
        let parsed: ImagesResponse = serde_json::from_slice(&joined).expect("valid JSON");
        assert_eq!(parsed.data[0].b64_json, "ab\"cd");
    }

    #[test]
    fn a_size_or_prompt_that_looks_like_the_data_key_is_not_mistaken_for_it() {
        let mut tricky = response(vec![image("QUJD", Some("\"data\":[]"))]);
        tricky.size = Some("\"data\":[]".into());
        tricky.background = Some("\"data\":[".into());
        same_as_serde(tricky);
    }
}
