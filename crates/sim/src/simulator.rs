//! The simulator without HTTP: turns an image job into rendered images, partial frames and usage.

use std::collections::HashMap;
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex, PoisonError};
use std::time::{SystemTime, UNIX_EPOCH};

use crate::config::SimConfig;
use crate::render::{self, CacheCounters, RenderCache, RenderError, RenderSpec, RenderedImage, Variant};
use crate::usage::{self, ImageUsageInput};
use imagegate_domain::{Background, Dimensions, ImageParams, ImageSize, OutputFormat, Quality, Usage};

/// Size used when `auto` is requested for a generation (and for an edit without input images).
pub const AUTO_SIZE: Dimensions = Dimensions {
    width: 1024,
    height: 1024,
};

/// Generation or edit (decides the stream event names and how `auto` size resolves).
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum JobKind {
    /// `/v1/images/generations`, or the Responses tool with action `generate`.
    Generate,
    /// `/v1/images/edits`, or the Responses tool with input images.
    Edit,
}

/// One image request, already validated.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImageJob {
    /// Generation or edit.
    pub kind: JobKind,
    /// The prompt (seeds the picture).
    pub prompt: String,
    /// Number of images (1-10).
    pub n: u8,
    /// Requested size.
    pub size: ImageSize,
    /// Requested quality.
    pub quality: Quality,
    /// Encoding.
    pub output_format: OutputFormat,
    /// JPEG quality.
    pub output_compression: Option<u8>,
    /// Requested background.
    pub background: Background,
    /// Partial images per image (0-3).
    pub partial_images: u8,
    /// Sizes of the input images of an edit, first one first.
    pub input_images: Vec<Dimensions>,
}

impl ImageJob {
    /// A one-image PNG generation of `size` with defaults for everything else.
    pub fn generation(prompt: impl Into<String>, size: ImageSize) -> Self {
        Self {
            kind: JobKind::Generate,
            prompt: prompt.into(),
            n: 1,
            size,
            quality: Quality::Auto,
            output_format: OutputFormat::Png,
            output_compression: None,
            background: Background::Auto,
            partial_images: 0,
            input_images: Vec::new(),
        }
    }

    /// The job of validated request `params` (a generation, or an edit of images of `input_images` sizes).
    pub fn from_params(params: &ImageParams, kind: JobKind, input_images: Vec<Dimensions>) -> Self {
        Self {
            kind,
            prompt: params.prompt.clone(),
            n: params.n,
            size: params.size,
            quality: params.quality,
            output_format: params.output_format,
            output_compression: params.output_compression,
            background: params.background,
            partial_images: params.partial_images,
            input_images,
        }
    }

    /// The size the images will have: the exact size, else the first input image's size for an edit,
    /// else 1024x1024.
    pub fn resolved_size(&self) -> Dimensions {
        match (self.size, self.kind, self.input_images.first()) {
            (ImageSize::Exact(d), _, _) => d,
            (ImageSize::Auto, JobKind::Edit, Some(first)) => *first,
            (ImageSize::Auto, _, _) => AUTO_SIZE,
        }
    }
}

/// What a job produced.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct ImageOutcome {
    /// Generation or edit.
    pub kind: JobKind,
    /// Unix seconds when the job finished.
    pub created: u64,
    /// Actual size of every image.
    pub size: Dimensions,
    /// Resolved quality (never `auto`).
    pub quality: Quality,
    /// Encoding.
    pub output_format: OutputFormat,
    /// Resolved background (`opaque`: the simulator never makes transparent pixels).
    pub background: Background,
    /// Final images, `n` of them.
    pub images: Vec<RenderedImage>,
    /// `partials[i]` are the partial frames of image `i`, coarsest first.
    pub partials: Vec<Vec<RenderedImage>>,
    /// Usage of the whole job.
    pub usage: Usage,
}

/// The simulator core: renders images through a bounded cache.
#[derive(Clone, Debug)]
pub struct Simulator {
    cache: Arc<RenderCache>,
    rendering: RenderGates,
    ids: Arc<AtomicU64>,
    seed: u64,
    tiny_images: bool,
}

impl Simulator {
    /// A simulator with the cache budget and seed of `config`.
    pub fn new(config: &SimConfig) -> Self {
        Self {
            cache: Arc::new(RenderCache::new(config.cache_bytes)),
            rendering: Arc::default(),
            ids: Arc::new(AtomicU64::new(1)),
            seed: config.seed,
            tiny_images: config.tiny_images,
        }
    }

    /// Renders the job's images (on blocking threads, one per image) and computes its usage.
    pub async fn generate(&self, job: &ImageJob) -> Result<ImageOutcome, RenderError> {
        let size = job.resolved_size();
        let quality = usage::resolve_quality(job.quality);
        let mut variants: Vec<Variant> = (0..job.partial_images)
            .map(|index| Variant::Partial {
                index,
                count: job.partial_images,
            })
            .collect();
        variants.push(Variant::Final);
        let variants: Arc<[Variant]> = variants.into();
        let tasks = (0..u32::from(job.n.max(1))).map(|index| {
            let spec = RenderSpec {
                dimensions: size,
                format: job.output_format,
                quality,
                compression: job.output_compression,
                seed: render::image_seed(&job.prompt, index),
            };
            self.render(spec, Arc::clone(&variants))
        });
        let mut images = Vec::new();
        let mut partials = Vec::new();
        for rendered in futures::future::join_all(tasks).await {
            let mut frames = rendered?;
            let Some(final_image) = frames.pop() else {
                return Err(RenderError::Task("no final image rendered".to_owned()));
            };
            images.push(final_image);
            partials.push(frames);
        }
        let usage = usage::image_usage(&ImageUsageInput {
            prompt: &job.prompt,
            input_images: &job.input_images,
            size,
            quality,
            images: images.len() as u64,
            partial_images: u64::from(job.partial_images),
        });
        Ok(ImageOutcome {
            kind: job.kind,
            created: unix_now(),
            size,
            quality,
            output_format: job.output_format,
            background: Background::Opaque,
            images,
            partials,
            usage,
        })
    }

    /// Renders one image on a blocking thread. Concurrent renders of the same spec wait for the first one
    /// and then find its result in the cache.
    async fn render(
        &self,
        mut spec: RenderSpec,
        variants: Arc<[Variant]>,
    ) -> Result<Vec<RenderedImage>, RenderError> {
        if self.tiny_images {
            spec.dimensions = Dimensions::new(1, 1);
        }
        let slot = RenderSlot::take(&self.rendering, spec);
        let _turn = slot.gate.lock().await;
        let cache = Arc::clone(&self.cache);
        match tokio::task::spawn_blocking(move || render::render_variants(&cache, &spec, &variants)).await {
            Ok(rendered) => rendered,
            Err(join) => Err(RenderError::Task(join.to_string())),
        }
    }

    /// A fresh id such as `ig_0123...` (unique within this simulator).
    pub fn next_id(&self, prefix: &str) -> String {
        let n = self.ids.fetch_add(1, Ordering::Relaxed);
        let mut z = self.seed ^ n.wrapping_mul(0x9E37_79B9_7F4A_7C15);
        z = (z ^ (z >> 30)).wrapping_mul(0xbf58_476d_1ce4_e5b9);
        z = (z ^ (z >> 27)).wrapping_mul(0x94d0_49bb_1331_11eb);
        format!("{prefix}_{n:08x}{:016x}", z ^ (z >> 31))
    }

    /// Hit and miss counters of the image cache.
    pub fn cache_counters(&self) -> CacheCounters {
        self.cache.counters()
    }
}

type RenderGates = Arc<Mutex<HashMap<RenderSpec, Arc<tokio::sync::Mutex<()>>>>>;

/// A place in the queue of renders of one spec; the map entry goes when the last holder leaves (also when
/// a request is cancelled while waiting).
struct RenderSlot {
    gates: RenderGates,
    spec: RenderSpec,
    gate: Arc<tokio::sync::Mutex<()>>,
}

impl RenderSlot {
    fn take(gates: &RenderGates, spec: RenderSpec) -> Self {
        let gate = Arc::clone(
            gates
                .lock()
                .unwrap_or_else(PoisonError::into_inner)
                .entry(spec)
                .or_default(),
        );
        Self {
            gates: Arc::clone(gates),
            spec,
            gate,
        }
    }
}

impl Drop for RenderSlot {
    fn drop(&mut self) {
        let mut gates = self.gates.lock().unwrap_or_else(PoisonError::into_inner);
        // Held by the map and by this slot only: nobody else is waiting.
        if Arc::strong_count(&self.gate) <= 2 {
            gates.remove(&self.spec);
        }
    }
}

/// Seconds since the Unix epoch.
pub fn unix_now() -> u64 {
    SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_secs())
}

#[cfg(test)]
mod tests;
