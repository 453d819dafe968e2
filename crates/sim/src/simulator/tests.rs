use super::*;

#[tokio::test]
async fn generates_n_images_with_partials_and_usage() {
    let sim = Simulator::new(&SimConfig::default());
    let mut job = ImageJob::generation(
        "two foxes",
        ImageSize::Exact(Dimensions {
            width: 96,
            height: 64,
        }),
    );
    job.n = 2;
    job.partial_images = 2;
    job.quality = Quality::High;
    let outcome = sim.generate(&job).await.unwrap();
    assert_eq!(outcome.images.len(), 2);
    assert_eq!(
        outcome.partials.iter().map(Vec::len).collect::<Vec<_>>(),
        vec![2, 2]
    );
    assert_ne!(outcome.images[0].b64, outcome.images[1].b64);
    assert_eq!(outcome.quality, Quality::High);
    assert_eq!(outcome.background, Background::Opaque);
    let per_image = usage::image_output_tokens(outcome.size, Quality::High) + 200;
    assert_eq!(outcome.usage.output_tokens, 2 * per_image);
    let decoded = image::load_from_memory(&outcome.images[1].bytes().unwrap()).unwrap();
    assert_eq!((decoded.width(), decoded.height()), (96, 64));
}

#[tokio::test]
async fn concurrent_renders_of_one_spec_render_once() {
    let sim = Simulator::new(&SimConfig::default());
    let job = ImageJob::generation(
        "same",
        ImageSize::Exact(Dimensions {
            width: 128,
            height: 96,
        }),
    );
    let outcomes = futures::future::join_all((0..4).map(|_| sim.generate(&job))).await;
    let first = outcomes[0].as_ref().unwrap();
    assert!(
        outcomes
            .iter()
            .all(|o| o.as_ref().unwrap().images == first.images)
    );
    let counters = sim.cache_counters();
    assert_eq!((counters.misses, counters.hits), (1, 3));
    assert!(
        sim.rendering.lock().unwrap().is_empty(),
        "render gates are cleaned up"
    );
}

#[test]
fn auto_size_resolves_per_kind() {
    let mut job = ImageJob::generation("x", ImageSize::Auto);
    assert_eq!(job.resolved_size(), AUTO_SIZE);
    job.kind = JobKind::Edit;
    job.input_images = vec![
        Dimensions {
            width: 640,
            height: 480,
        },
        AUTO_SIZE,
    ];
    assert_eq!(
        job.resolved_size(),
        Dimensions {
            width: 640,
            height: 480
        }
    );
    job.size = ImageSize::Exact(Dimensions {
        width: 32,
        height: 32,
    });
    assert_eq!(
        job.resolved_size(),
        Dimensions {
            width: 32,
            height: 32
        }
    );
    let params = imagegate_domain::validate_generation(
        imagegate_domain::ImageParamsDraft {
            model: Some("gpt-image-2".into()),
            prompt: Some("p".into()),
            n: Some(3),
            ..Default::default()
        },
        &imagegate_domain::ModelCatalog::default(),
    )
    .unwrap();
    let from = ImageJob::from_params(&params, JobKind::Generate, Vec::new());
    assert_eq!(
        (from.n, from.prompt.as_str(), from.size),
        (3, "p", ImageSize::Auto)
    );
}

#[test]
fn ids_are_unique_and_prefixed() {
    let sim = Simulator::new(&SimConfig::default());
    let (a, b) = (sim.next_id("ig"), sim.next_id("ig"));
    assert!(a.starts_with("ig_") && a.len() == 3 + 24);
    assert_ne!(a, b);
}

#[tokio::test]
async fn tiny_images_are_one_pixel_but_keep_the_requested_size_and_usage() {
    let sim = Simulator::new(&SimConfig {
        tiny_images: true,
        ..SimConfig::default()
    });
    let mut job = ImageJob::generation(
        "tiny",
        ImageSize::Exact(Dimensions {
            width: 1024,
            height: 1024,
        }),
    );
    job.partial_images = 1;
    let outcome = sim.generate(&job).await.unwrap();
    assert_eq!(outcome.size, Dimensions::new(1024, 1024));
    let decoded = image::load_from_memory(&outcome.images[0].bytes().unwrap()).unwrap();
    assert_eq!((decoded.width(), decoded.height()), (1, 1));
    let partial = image::load_from_memory(&outcome.partials[0][0].bytes().unwrap()).unwrap();
    assert_eq!((partial.width(), partial.height()), (1, 1));
    let per_image = usage::image_output_tokens(outcome.size, outcome.quality) + 100;
    assert_eq!(outcome.usage.output_tokens, per_image);
}
