use imagegate_codec::json::decode_responses;
use imagegate_codec::wire::{OutputItem, ResponseEvent};
use imagegate_domain::{ImageSize, ModelCatalog, OutputFormat, Quality};
use serde_json::json;

use super::*;
use crate::config::SimConfig;
use crate::render::{RenderCache, RenderSpec, Variant, render_variants};
use crate::simulator::Simulator;

fn png_b64(width: u32, height: u32) -> String {
    let spec = RenderSpec {
        dimensions: Dimensions { width, height },
        format: OutputFormat::Png,
        quality: Quality::Low,
        compression: None,
        seed: 1,
    };
    render_variants(&RenderCache::new(0), &spec, &[Variant::Final]).unwrap()[0]
        .b64
        .to_string()
}

fn ids() -> PlanIds {
    PlanIds {
        response: "resp_1".into(),
        image_call: "ig_1".into(),
        message: "msg_1".into(),
    }
}

fn plan(body: serde_json::Value, with_image: bool) -> ResponsesPlan {
    let request = decode_responses(body.to_string().as_bytes()).unwrap();
    let tools = request.validate_image_tools(&ModelCatalog::default()).unwrap();
    ResponsesPlan::new(&request, "gpt-5".into(), &tools, ids(), with_image)
}

#[test]
fn reads_text_and_image_sizes_from_the_input_list() {
    let body = json!({
        "instructions": "be brief",
        "input": [
            {"role": "user", "content": [
                {"type": "input_text", "text": "make it blue"},
                {"type": "input_image", "image_url": format!("data:image/png;base64,{}", png_b64(48, 32)), "detail": "auto"}
            ]},
            {"role": "assistant", "content": "ignored"},
            {"type": "image_generation_call", "id": "ig_0", "status": "completed", "result": png_b64(16, 16)},
            {"role": "user", "content": "and bigger"}
        ]
    });
    let input = ResponsesInput::read(body.as_object().unwrap());
    assert_eq!(input.text, "make it blue\nand bigger");
    assert_eq!(input.instructions, "be brief");
    assert_eq!(
        input.images,
        vec![Dimensions::new(48, 32), Dimensions::new(16, 16)]
    );
}

#[test]
fn plans_an_edit_when_images_are_given_and_echoes_the_tool() {
    let plan = plan(
        json!({"model": "gpt-5", "stream": true, "store": false, "tool_choice": {"type": "image_generation"},
               "input": [{"role": "user", "content": [
                   {"type": "input_text", "text": "  add a hat "},
                   {"type": "input_image", "image_url": format!("data:image/png;base64,{}", png_b64(64, 48))}]}],
               "tools": [{"type": "image_generation", "model": "gpt-image-2", "quality": "low", "partial_images": 2}]}),
        true,
    );
    let job = plan.job.as_ref().unwrap();
    assert_eq!((job.kind, plan.action), (JobKind::Edit, "edit"));
    assert_eq!(job.prompt, "add a hat");
    assert_eq!(job.partial_images, 2);
    assert_eq!(job.resolved_size(), Dimensions::new(64, 48));
    assert!(!plan.envelope.store);
    assert_eq!(plan.envelope.tool_choice, json!({"type": "image_generation"}));
    assert_eq!(plan.envelope.tools[0]["quality"], "low");
    assert_eq!(plan.envelope.tools[0]["n"], 1);
    assert_eq!(plan.envelope.tools[0]["model"], "gpt-image-2");
}

#[test]
fn no_image_without_tool_with_tool_choice_none_or_when_told() {
    let tool = json!([{"type": "image_generation"}]);
    assert!(plan(json!({"model": "gpt-5", "input": "hi"}), true).job.is_none());
    assert!(
        plan(
            json!({"model": "gpt-5", "input": "hi", "tools": tool, "tool_choice": "none"}),
            true
        )
        .job
        .is_none()
    );
    assert!(
        plan(json!({"model": "gpt-5", "input": "hi", "tools": tool}), false)
            .job
            .is_none()
    );
    let generate = plan(json!({"model": "gpt-5", "input": "hi", "tools": tool}), true);
    let job = generate.job.as_ref().unwrap();
    assert_eq!(
        (job.kind, job.size, job.partial_images),
        (JobKind::Generate, ImageSize::Auto, 0)
    );
}

#[tokio::test]
async fn stream_events_follow_the_wire_order() {
    let plan = plan(
        json!({"model": "gpt-5", "stream": true, "input": "a red kite",
               "tools": [{"type": "image_generation", "size": "1024x1024", "partial_images": 2}]}),
        true,
    );
    let outcome = Simulator::new(&SimConfig::default())
        .generate(plan.job.as_ref().unwrap())
        .await
        .unwrap();
    let events = events::all(&plan, Some(&outcome));
    let types: Vec<&str> = events.iter().map(|e| e.event.event_type()).collect();
    assert_eq!(
        types,
        [
            "response.created",
            "response.in_progress",
            "response.output_item.added",
            "response.image_generation_call.in_progress",
            "response.image_generation_call.generating",
            "response.image_generation_call.partial_image",
            "response.image_generation_call.partial_image",
            "response.image_generation_call.completed",
            "response.output_item.done",
            "response.output_item.added",
            "response.content_part.added",
            "response.output_text.delta",
            "response.output_text.done",
            "response.content_part.done",
            "response.output_item.done",
            "response.completed",
        ]
    );
    assert!(events.iter().zip(0u64..).all(|(e, n)| e.sequence_number == n));
    let ResponseEvent::Completed { response } = &events[15].event else {
        panic!("last is not completed")
    };
    assert_eq!(response.status, ResponseStatus::Completed);
    let OutputItem::ImageGenerationCall(call) = &response.output[0] else {
        panic!("first output is not the call")
    };
    assert_eq!(call.result.as_deref(), Some(&*outcome.images[0].b64));
    assert_eq!(call.size.as_deref(), Some("1024x1024"));
    assert_eq!(response.tool_usage.unwrap().image_gen, Some(outcome.usage));
    let usage = response.usage.unwrap();
    assert_eq!(usage.total_tokens, usage.input_tokens + usage.output_tokens);
    assert!(usage.input_tokens > 0);
}

#[tokio::test]
async fn the_no_usage_fault_leaves_out_the_image_usage_but_not_the_image() {
    let mut plan = plan(
        json!({"model": "gpt-5", "input": "a red kite",
               "tools": [{"type": "image_generation", "size": "1024x1024"}]}),
        true,
    );
    let outcome = Simulator::new(&SimConfig::default())
        .generate(plan.job.as_ref().unwrap())
        .await
        .unwrap();
    assert!(plan.completed(Some(&outcome)).tool_usage.is_some());
    plan.image_usage = false;
    let response = plan.completed(Some(&outcome));
    assert!(response.tool_usage.is_none());
    assert!(matches!(response.output[0], OutputItem::ImageGenerationCall(_)));
    assert!(response.usage.is_some(), "the main model's usage stays");
}
