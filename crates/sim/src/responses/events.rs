//! The Responses stream, event by event (wire-format order): `response.created`, `response.in_progress`,
//! the image call (`output_item.added`, `image_generation_call.in_progress`, `.generating`,
//! `.partial_image` x N, `.completed`, `output_item.done`), the message item events, `response.completed`.

use imagegate_codec::wire::responses::{PartialImagePayload, ResponseError, ToolUsage};
use imagegate_codec::wire::{
    ImageGenerationCall, OutputItem, ResponseEvent, ResponseEventSequencer, ResponseStatus,
    ResponseStreamEvent,
};

use super::ResponsesPlan;
use crate::simulator::ImageOutcome;

/// Events sent before the image is ready: created, in progress, and the start of the image call.
pub fn prelude(plan: &ResponsesPlan, sequencer: &mut ResponseEventSequencer) -> Vec<ResponseStreamEvent> {
    let envelope = Box::new(plan.envelope.clone());
    let mut events = vec![
        sequencer.number(ResponseEvent::Created {
            response: envelope.clone(),
        }),
        sequencer.number(ResponseEvent::InProgress { response: envelope }),
    ];
    if plan.job.is_some() {
        let item_id = plan.image_call_id.clone();
        let item = OutputItem::ImageGenerationCall(ImageGenerationCall::in_progress(item_id.clone()));
        events.push(sequencer.number(ResponseEvent::OutputItemAdded {
            output_index: 0,
            item,
        }));
        events.push(sequencer.number(ResponseEvent::ImageGenerationCallInProgress {
            output_index: 0,
            item_id: item_id.clone(),
        }));
        events.push(sequencer.number(ResponseEvent::ImageGenerationCallGenerating {
            output_index: 0,
            item_id,
        }));
    }
    events
}

/// Events after the image is ready: partial images, the finished call, the message, `response.completed`.
pub fn finish(
    plan: &ResponsesPlan,
    outcome: Option<&ImageOutcome>,
    sequencer: &mut ResponseEventSequencer,
) -> Vec<ResponseStreamEvent> {
    let mut events = Vec::new();
    let mut message_index = 0;
    if let Some(outcome) = outcome {
        message_index = 1;
        events = partial_images(plan, outcome, sequencer);
        events.push(sequencer.number(ResponseEvent::ImageGenerationCallCompleted {
            output_index: 0,
            item_id: plan.image_call_id.clone(),
        }));
        let item = OutputItem::ImageGenerationCall(plan.image_call(outcome));
        events.push(sequencer.number(ResponseEvent::OutputItemDone {
            output_index: 0,
            item,
        }));
    }
    let item_id = plan.message_id.clone();
    let text = plan.message_text();
    let output_index = message_index;
    let message = |completed| OutputItem::Message(plan.message(completed));
    events.extend([
        sequencer.number(ResponseEvent::OutputItemAdded {
            output_index,
            item: message(false),
        }),
        sequencer.number(ResponseEvent::ContentPartAdded {
            item_id: item_id.clone(),
            output_index,
            content_index: 0,
            part: plan.text_part(""),
        }),
        sequencer.number(ResponseEvent::OutputTextDelta {
            item_id: item_id.clone(),
            output_index,
            content_index: 0,
            delta: text.to_owned(),
            logprobs: Vec::new(),
        }),
        sequencer.number(ResponseEvent::OutputTextDone {
            item_id: item_id.clone(),
            output_index,
            content_index: 0,
            text: text.to_owned(),
            logprobs: Vec::new(),
        }),
        sequencer.number(ResponseEvent::ContentPartDone {
            item_id,
            output_index,
            content_index: 0,
            part: plan.text_part(text),
        }),
        sequencer.number(ResponseEvent::OutputItemDone {
            output_index,
            item: message(true),
        }),
        sequencer.number(ResponseEvent::Completed {
            response: Box::new(plan.final_response(outcome)),
        }),
    ]);
    events
}

/// The partial images of the image call.
fn partial_images(
    plan: &ResponsesPlan,
    outcome: &ImageOutcome,
    sequencer: &mut ResponseEventSequencer,
) -> Vec<ResponseStreamEvent> {
    let partials = outcome.partials.first().into_iter().flatten();
    (0u32..)
        .zip(partials)
        .map(|(partial_image_index, partial)| {
            let payload = PartialImagePayload {
                output_index: 0,
                item_id: plan.image_call_id.clone(),
                partial_image_index,
                partial_image_b64: partial.b64.to_string(),
                size: Some(outcome.size.to_string()),
                quality: Some(outcome.quality.as_str().to_owned()),
                background: Some(outcome.background.as_str().to_owned()),
                output_format: Some(outcome.output_format.as_str().to_owned()),
            };
            sequencer.number(ResponseEvent::ImageGenerationCallPartialImage(payload))
        })
        .collect()
}

/// The partial images of a finished image, then `response.failed` refusing it
/// (`image_content_policy_violation`): the envelope bills the image's tokens all the same.
pub fn refused_after_image(
    plan: &ResponsesPlan,
    outcome: &ImageOutcome,
    sequencer: &mut ResponseEventSequencer,
) -> Vec<ResponseStreamEvent> {
    let mut events = partial_images(plan, outcome, sequencer);
    let message = "The generated image was rejected by the safety system.";
    let billed = plan.image_usage.then_some(ToolUsage {
        image_gen: Some(outcome.usage),
    });
    events.push(failed(
        plan,
        "image_content_policy_violation",
        message,
        billed,
        sequencer,
    ));
    events
}

/// `response.failed` for a call that broke after the stream started, billing `image_usage` for the
/// image tool when it ran.
pub fn failed(
    plan: &ResponsesPlan,
    code: &str,
    message: &str,
    image_usage: Option<ToolUsage>,
    sequencer: &mut ResponseEventSequencer,
) -> ResponseStreamEvent {
    let mut envelope = plan.envelope.clone();
    envelope.status = ResponseStatus::Failed;
    // The main model read the input and called the tool before the failure: billed, with the
    // image tool's tokens when it ran.
    envelope.usage = Some(plan.main_usage());
    envelope.tool_usage = image_usage;
    envelope.error = Some(ResponseError {
        code: code.to_owned(),
        message: message.to_owned(),
    });
    sequencer.number(ResponseEvent::Failed {
        response: Box::new(envelope),
    })
}

/// Every event of a successful call, numbered from 0.
pub fn all(plan: &ResponsesPlan, outcome: Option<&ImageOutcome>) -> Vec<ResponseStreamEvent> {
    let mut sequencer = ResponseEventSequencer::new();
    let mut events = prelude(plan, &mut sequencer);
    events.extend(finish(plan, outcome, &mut sequencer));
    events
}
