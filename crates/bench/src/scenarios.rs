//! The scenarios of `cargo xtask bench` and the request each target gets for them.

use bytes::Bytes;
use serde::Serialize;

use super::litellm;
use super::loadgen::RequestSpec;

/// The bearer token the simulators are called with (straight, through nginx, and as the
/// gateway's and LiteLLM's upstream key).
pub const SIM_KEY: &str = "sk-bench-sim";

/// Which kind of figure a scenario is for.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Group {
    /// (a) Tiny images: per-request overhead.
    Small,
    /// (b) Image-sized non-streaming responses.
    Image,
    /// (c) Streaming with partial images: time to the first event (and, at 3840x2160, memory).
    Stream,
    /// (d) Edits with two large input images.
    Edit,
}

/// Where the load goes.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Serialize)]
#[serde(rename_all = "snake_case")]
pub enum Target {
    /// Straight to the simulator (the floor).
    Floor,
    /// Straight to a simulator pinned to the gateway's CPU: the floor with the same cross-CPU
    /// hand-offs (and cache-line transfers) a proxied request pays on its last hop. Not a target;
    /// it shows how much of the added latency the two-CPU layout costs by itself.
    FloorAcross,
    /// Through nginx relaying to the simulator (image-sized scenarios, when nginx is installed).
    /// Not a target: it shows what one relaying hop costs on this machine before any gateway logic.
    Nginx,
    /// Through imagegate.
    Imagegate,
    /// Through the LiteLLM proxy.
    Litellm,
}

impl Target {
    /// Display name.
    pub fn label(self) -> &'static str {
        match self {
            Self::Floor => "floor (sim)",
            Self::FloorAcross => "floor, sim on the gateway's CPU",
            Self::Nginx => "nginx relay (reference)",
            Self::Imagegate => "imagegate",
            Self::Litellm => "LiteLLM",
        }
    }
}

/// One scenario.
#[derive(Debug, Clone, Serialize)]
pub struct Scenario {
    /// Stable id, e.g. `image-3840x2160-c64`.
    pub id: String,
    /// Kind of figure.
    pub group: Group,
    /// Requested `size`.
    pub size: &'static str,
    /// Workers.
    pub concurrency: usize,
}

/// Size of each of the two input images of the edit scenario.
pub const EDIT_IMAGE_BYTES: usize = 20 * 1024 * 1024;

/// Every scenario, in run order.
pub fn all() -> Vec<Scenario> {
    let mut list = Vec::new();
    for concurrency in [1, 16, 64] {
        list.push(scenario(Group::Small, "1024x1024", concurrency));
    }
    for size in ["1024x1024", "3840x2160"] {
        for concurrency in [16, 64] {
            list.push(scenario(Group::Image, size, concurrency));
        }
    }
    list.push(scenario(Group::Stream, "1024x1024", 1));
    list.push(scenario(Group::Stream, "3840x2160", 16));
    list.push(scenario(Group::Edit, "1024x1024", 8));
    list
}

fn scenario(group: Group, size: &'static str, concurrency: usize) -> Scenario {
    let kind = match group {
        Group::Small => "small",
        Group::Image => "image",
        Group::Stream => "stream",
        Group::Edit => "edit",
    };
    let id = match group {
        Group::Small => format!("{kind}-c{concurrency}"),
        _ => format!("{kind}-{size}-c{concurrency}"),
    };
    Scenario {
        id,
        group,
        size,
        concurrency,
    }
}

/// Base URLs and keys of the three targets.
#[derive(Debug, Clone)]
pub struct Endpoints {
    /// Simulator rendering tiny images.
    pub tiny_sim: String,
    /// Simulator rendering full-size images.
    pub images_sim: String,
    /// The two simulators again, pinned to the gateway's CPU (when the harness pins).
    pub across_sims: Option<(String, String)>,
    /// Gateway base URL.
    pub gateway: String,
    /// Gateway key of the `tiny` group.
    pub tiny_key: String,
    /// Gateway key of the `images` group.
    pub images_key: String,
    /// LiteLLM base URL, when running.
    pub litellm: Option<String>,
    /// nginx base URL, when running.
    pub nginx: Option<String>,
}

/// The request `target` gets in `scenario` (`edit_body` is the shared multipart body).
pub fn request(
    scenario: &Scenario,
    target: Target,
    endpoints: &Endpoints,
    edit_body: &Bytes,
) -> Option<RequestSpec> {
    let tiny = scenario.group == Group::Small;
    let (base, bearer, model) = match target {
        Target::Floor => {
            let sim = if tiny {
                &endpoints.tiny_sim
            } else {
                &endpoints.images_sim
            };
            (sim.clone(), Some(SIM_KEY.to_owned()), "gpt-image-2")
        }
        Target::FloorAcross => {
            let (tiny_sim, images_sim) = endpoints.across_sims.as_ref()?;
            let sim = if tiny { tiny_sim } else { images_sim };
            (sim.clone(), Some(SIM_KEY.to_owned()), "gpt-image-2")
        }
        Target::Nginx => (endpoints.nginx.clone()?, Some(SIM_KEY.to_owned()), "gpt-image-2"),
        Target::Imagegate => {
            let key = if tiny {
                &endpoints.tiny_key
            } else {
                &endpoints.images_key
            };
            (endpoints.gateway.clone(), Some(key.clone()), "gpt-image-2")
        }
        Target::Litellm => {
            let model = if tiny {
                litellm::TINY_MODEL
            } else {
                litellm::IMAGES_MODEL
            };
            (
                endpoints.litellm.clone()?,
                Some(litellm::MASTER_KEY.to_owned()),
                model,
            )
        }
    };
    let spec = match scenario.group {
        Group::Edit => RequestSpec {
            url: format!("{base}/v1/images/edits"),
            bearer,
            content_type: format!("multipart/form-data; boundary={BOUNDARY}"),
            body: edit_body.clone(),
            first_event: false,
        },
        Group::Small | Group::Image | Group::Stream => {
            let stream = scenario.group == Group::Stream;
            let mut body = serde_json::json!({
                "model": model,
                "prompt": "bench",
                "size": scenario.size,
                "quality": "low",
            });
            if stream {
                body["stream"] = true.into();
                body["partial_images"] = 3.into();
            }
            RequestSpec {
                url: format!("{base}/v1/images/generations"),
                bearer,
                content_type: "application/json".to_owned(),
                body: Bytes::from(body.to_string()),
                first_event: stream,
            }
        }
    };
    Some(spec)
}

/// Multipart boundary of the edit body.
pub const BOUNDARY: &str = "imagegate-bench-boundary-7f3a";

/// The edit form: model (`gpt-image-2`, which is also the LiteLLM model name of the full-size
/// simulator), prompt, size, quality and two `image[]` PNG files of `image_bytes` each.
pub fn edit_body(image_bytes: usize) -> Bytes {
    let model = litellm::IMAGES_MODEL;
    let png = fake_png(2048, 2048, image_bytes);
    let mut body = Vec::with_capacity(2 * png.len() + 1024);
    for (name, value) in [
        ("model", model),
        ("prompt", "bench"),
        ("size", "1024x1024"),
        ("quality", "low"),
    ] {
        body.extend_from_slice(
            format!("--{BOUNDARY}\r\ncontent-disposition: form-data; name=\"{name}\"\r\n\r\n{value}\r\n")
                .as_bytes(),
        );
    }
    for index in 0..2 {
        body.extend_from_slice(
            format!(
                "--{BOUNDARY}\r\ncontent-disposition: form-data; name=\"image[]\"; filename=\"in{index}.png\"\r\ncontent-type: image/png\r\n\r\n"
            )
            .as_bytes(),
        );
        body.extend_from_slice(&png);
        body.extend_from_slice(b"\r\n");
    }
    body.extend_from_slice(format!("--{BOUNDARY}--\r\n").as_bytes());
    Bytes::from(body)
}

/// A PNG file of exactly `total_len` bytes (at least 57): a valid signature, `IHDR` of
/// `width`x`height` RGB and one `IDAT` of pseudo-random bytes. Only its header is ever read.
pub fn fake_png(width: u32, height: u32, total_len: usize) -> Vec<u8> {
    let mut png = b"\x89PNG\r\n\x1a\n".to_vec();
    let mut ihdr = Vec::with_capacity(13);
    ihdr.extend_from_slice(&width.to_be_bytes());
    ihdr.extend_from_slice(&height.to_be_bytes());
    ihdr.extend_from_slice(&[8, 2, 0, 0, 0]);
    chunk(&mut png, b"IHDR", &ihdr);
    // signature 8 + IHDR 25 + IDAT overhead 12 + IEND 12
    let idat_len = total_len.saturating_sub(8 + 25 + 12 + 12);
    let mut state: u64 = 0x9E37_79B9_7F4A_7C15;
    let idat: Vec<u8> = (0..idat_len)
        .map(|_| {
            state ^= state << 13;
            state ^= state >> 7;
            state ^= state << 17;
            (state >> 24) as u8
        })
        .collect();
    chunk(&mut png, b"IDAT", &idat);
    chunk(&mut png, b"IEND", &[]);
    png
}

fn chunk(out: &mut Vec<u8>, kind: &[u8; 4], data: &[u8]) {
    out.extend_from_slice(&u32::try_from(data.len()).unwrap_or(u32::MAX).to_be_bytes());
    let start = out.len();
    out.extend_from_slice(kind);
    out.extend_from_slice(data);
    let crc = crc32(&out[start..]);
    out.extend_from_slice(&crc.to_be_bytes());
}

/// CRC-32 (IEEE), as PNG chunks use.
pub fn crc32(bytes: &[u8]) -> u32 {
    let mut crc = 0xFFFF_FFFFu32;
    for &byte in bytes {
        crc ^= u32::from(byte);
        for _ in 0..8 {
            let mask = (crc & 1).wrapping_neg();
            crc = (crc >> 1) ^ (0xEDB8_8320 & mask);
        }
    }
    !crc
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn crc_matches_the_png_iend_chunk() {
        assert_eq!(crc32(b"IEND"), 0xAE42_6082);
    }

    #[test]
    fn fake_png_has_the_asked_length_and_a_readable_header() {
        let png = fake_png(2048, 1024, 4096);
        assert_eq!(png.len(), 4096);
        let info = imagegate_codec::image_header::sniff(&png).unwrap();
        assert_eq!((info.dimensions.width, info.dimensions.height), (2048, 1024));
    }

    #[test]
    fn scenarios_cover_the_issue() {
        let ids: Vec<String> = all().into_iter().map(|s| s.id).collect();
        for id in [
            "small-c1",
            "small-c16",
            "small-c64",
            "image-1024x1024-c16",
            "image-3840x2160-c64",
            "stream-1024x1024-c1",
            "stream-3840x2160-c16",
            "edit-1024x1024-c8",
        ] {
            assert!(ids.iter().any(|i| i == id), "{id} missing from {ids:?}");
        }
    }

    #[test]
    fn edit_body_holds_two_files_and_the_fields() {
        let body = edit_body(1000);
        let text = String::from_utf8_lossy(&body);
        assert_eq!(text.matches("name=\"image[]\"").count(), 2);
        assert!(text.contains("name=\"model\"\r\n\r\ngpt-image-2\r\n"));
        assert!(text.ends_with(&format!("--{BOUNDARY}--\r\n")));
        assert!(body.len() > 2000);
    }
}
