//! Helpers shared by the HTTP tests: build requests, send them through the router, read SSE bodies.
#![allow(clippy::unwrap_used, clippy::expect_used, clippy::panic, dead_code)]

use axum::Router;
use axum::body::{Body, Bytes};
use axum::http::{HeaderMap, Request, StatusCode};
use http_body_util::BodyExt as _;
use imagegate_codec::sse::SseDecoder;
use imagegate_sim::{SimConfig, SimState, router};
use serde_json::Value;
use tower::ServiceExt as _;

pub const TOKEN: &str = "sk-test-a";

pub fn app() -> (SimState, Router) {
    app_with(SimConfig::default())
}

pub fn app_with(config: SimConfig) -> (SimState, Router) {
    let state = SimState::new(config);
    (state.clone(), router(state))
}

pub struct Answer {
    pub status: StatusCode,
    pub headers: HeaderMap,
    pub body: Bytes,
}

impl Answer {
    pub fn json(&self) -> Value {
        serde_json::from_slice(&self.body)
            .unwrap_or_else(|e| panic!("not JSON ({e}): {}", String::from_utf8_lossy(&self.body)))
    }

    pub fn text(&self) -> String {
        String::from_utf8_lossy(&self.body).into_owned()
    }

    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers.get(name).and_then(|v| v.to_str().ok())
    }

    /// (event name, JSON data) of every SSE event.
    pub fn events(&self) -> Vec<(String, Value)> {
        let mut decoder = SseDecoder::new();
        decoder.push(&self.body).unwrap();
        let mut events = Vec::new();
        while let Some(event) = decoder.pop() {
            let name = event.event.clone().expect("every frame has an event line");
            let data: Value = serde_json::from_str(&event.data).unwrap();
            assert_eq!(data["type"], name.as_str(), "event name equals the JSON type");
            events.push((name, data));
        }
        assert!(decoder.is_idle(), "stream ended mid-event");
        events
    }
}

pub fn post_json(path: &str, token: Option<&str>, body: &Value) -> Request<Body> {
    let mut builder = Request::post(path).header("content-type", "application/json");
    if let Some(token) = token {
        builder = builder.header("authorization", format!("Bearer {token}"));
    }
    builder.body(Body::from(body.to_string())).unwrap()
}

pub fn get(path: &str, token: Option<&str>) -> Request<Body> {
    let mut builder = Request::get(path);
    if let Some(token) = token {
        builder = builder.header("authorization", format!("Bearer {token}"));
    }
    builder.body(Body::empty()).unwrap()
}

pub fn with_header(mut request: Request<Body>, name: &'static str, value: &str) -> Request<Body> {
    request.headers_mut().insert(name, value.parse().unwrap());
    request
}

pub async fn send(app: &Router, request: Request<Body>) -> Answer {
    let response = app.clone().oneshot(request).await.unwrap();
    let (parts, body) = response.into_parts();
    let body = body.collect().await.unwrap().to_bytes();
    Answer {
        status: parts.status,
        headers: parts.headers,
        body,
    }
}

pub fn generation(prompt: &str, extra: Value) -> Value {
    let mut body =
        serde_json::json!({"model": "gpt-image-2", "prompt": prompt, "size": "1024x640", "quality": "low"});
    if let (Some(body), Value::Object(extra)) = (body.as_object_mut(), extra) {
        body.extend(extra);
    }
    body
}

/// Decodes base64 image data and returns (format, width, height).
pub fn decode_image(b64: &Value) -> (image::ImageFormat, u32, u32) {
    use base64::Engine as _;
    let bytes = base64::engine::general_purpose::STANDARD
        .decode(b64.as_str().unwrap())
        .unwrap();
    let format = image::guess_format(&bytes).unwrap();
    let decoded = image::load_from_memory(&bytes).unwrap();
    (format, decoded.width(), decoded.height())
}

/// A PNG (RGBA when `alpha`) of the given size.
pub fn png(width: u32, height: u32, alpha: bool) -> Vec<u8> {
    let mut out = std::io::Cursor::new(Vec::new());
    if alpha {
        image::RgbaImage::from_pixel(width, height, image::Rgba([10, 20, 30, 0]))
            .write_to(&mut out, image::ImageFormat::Png)
            .unwrap();
    } else {
        image::RgbImage::from_pixel(width, height, image::Rgb([10, 20, 30]))
            .write_to(&mut out, image::ImageFormat::Png)
            .unwrap();
    }
    out.into_inner()
}

/// A multipart body: text fields then files (name, filename, bytes).
pub fn multipart(fields: &[(&str, &str)], files: &[(&str, &str, Vec<u8>)]) -> (String, Vec<u8>) {
    let boundary = "simboundary7MA4YWxkTrZu0gW";
    let mut body = Vec::new();
    for (name, value) in fields {
        body.extend_from_slice(
            format!("--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"\r\n\r\n{value}\r\n")
                .as_bytes(),
        );
    }
    for (name, filename, bytes) in files {
        body.extend_from_slice(
            format!(
                "--{boundary}\r\nContent-Disposition: form-data; name=\"{name}\"; filename=\"{filename}\"\r\n\
                 Content-Type: image/png\r\n\r\n"
            )
            .as_bytes(),
        );
        body.extend_from_slice(bytes);
        body.extend_from_slice(b"\r\n");
    }
    body.extend_from_slice(format!("--{boundary}--\r\n").as_bytes());
    (format!("multipart/form-data; boundary={boundary}"), body)
}

pub fn post_multipart(path: &str, token: &str, content_type: &str, body: Vec<u8>) -> Request<Body> {
    Request::post(path)
        .header("content-type", content_type)
        .header("authorization", format!("Bearer {token}"))
        .body(Body::from(body))
        .unwrap()
}
