//! ChatGPT-subscription accounts: an Images request becomes Responses calls with a forced
//! `image_generation` tool, one call per image (`n` sequential calls, never silently fewer).
//!
//! Each call goes to `POST {base_url}/responses` with the account's access token, a main model from
//! [`AccountTarget::main_models`] (on [`FailureKind::ModelUnsupported`] before any event of the
//! image was relayed, the next main model is tried, and kept for the following images), and
//! `stream: true`. The upstream stream is consumed: `response.image_generation_call.partial_image`
//! becomes `image_generation.partial_image` / `image_edit.partial_image`, and the
//! `image_generation_call` result with the usage of `tool_usage.image_gen` becomes
//! `*.completed` (streaming, with the usage of the images so far) or one element of the Images
//! response (non-streaming, usage summed).
//!
//! Responses calls from clients are forwarded on the OpenAI wire, adapted to what the ChatGPT
//! backend takes ([`client_call`]): always streamed and not stored, `input` as a list, some
//! `instructions`. A client that asked for no stream gets the final response the stream ends with.
//! Every request carries the account's OAuth access token and the subscription headers, and the
//! token is refreshed when needed ([`auth`]).

pub(crate) mod auth;
mod client_call;
mod request;
mod translate;

use std::sync::Arc;
use std::time::Duration;

use bytes::Bytes;
use futures::StreamExt;
use imagegate_codec::sse::SseEvent;
use imagegate_codec::usage_scan::ResponseSummary;
use imagegate_codec::wire::images::{
    CompletedImageEvent, ImageData, ImageEndpoint, ImageStreamEvent, ImagesResponse, PartialImageEvent,
};
use imagegate_domain::{Background, ImageParams, Quality, Usage};

use self::auth::{CodexAuth, Session};
use self::request::CodexRequest;
use self::translate::{FinalImage, PartialImage, Resolved, Step, step};
use crate::call::{Endpoint, UpstreamCall};
use crate::client::UpstreamConfig;
use crate::failure::{Failure, FailureKind, Spent, SpentSoFar};
use crate::openai::read_clock::ReadClock;
use crate::openai::{self, Deadline, RequestBody, now_unix_ms};
use crate::reply::{EndSummary, EventStream, JsonStream, Reply};
use crate::target::AccountTarget;

/// One call to a ChatGPT-subscription account.
pub(crate) async fn call(
    session: Session<'_>,
    call: UpstreamCall<'_>,
    deadline: Duration,
    spent: &SpentSoFar,
) -> Result<Reply, Failure> {
    let deadline = Deadline::from_now(deadline);
    let (params, images, mask, endpoint) = match call {
        UpstreamCall::Respond { .. } => return respond(session, call, deadline).await,
        UpstreamCall::Generate { params } => (params, &[][..], None, ImageEndpoint::Generation),
        UpstreamCall::Edit { params, images, mask } => (params, images, mask, ImageEndpoint::Edit),
    };
    let target = session.target;
    if target.main_models.is_empty() {
        return Err(Failure::protocol(
            "the codex account has no main model configured",
        ));
    }
    // The ChatGPT backend takes input images as base64 inside the JSON request: encoded as the
    // body is sent, from the uploads (files the codec spilled stay on disk).
    let request = CodexRequest::new(params, images, mask)?;
    let job = Job {
        client: session.client.clone(),
        config: session.config.clone(),
        auth: Arc::clone(session.auth),
        target: target.clone(),
        request,
        n: params.n,
        endpoint,
        requested: requested(params),
        deadline,
    };
    let mut run = Run::new(Arc::new(job));
    if params.stream {
        // Open the first upstream call before answering, so that a refusal at the start (429,
        // 401, 5xx) is an ordinary failure the caller can fail over from, not an error frame.
        run.open_first().await?;
        return Ok(Reply::Events(crate::reply::whole_events(run.into_events())));
    }
    run.into_json(spent).await
}

/// A client's Responses call, adapted to the ChatGPT backend and sent with the account's token and
/// headers: streamed upstream always, answered as the client asked.
async fn respond(session: Session<'_>, call: UpstreamCall<'_>, deadline: Deadline) -> Result<Reply, Failure> {
    let UpstreamCall::Respond { body, stream } = call else {
        return Err(Failure::protocol("not a Responses call"));
    };
    let adapted = client_call::adapted(body);
    let (shape, body) = openai::prepare(UpstreamCall::Respond {
        body: &adapted,
        stream: true,
    })?;
    let RequestBody::Json(body) = body else {
        return Err(Failure::protocol("a Responses call has a JSON body"));
    };
    let response = session
        .send(
            shape.endpoint,
            || Ok(RequestBody::Json(body.clone())),
            shape.is_stream,
            deadline,
        )
        .await?;
    let reply = openai::finish(response, shape, session.config, deadline).await?;
    if stream {
        return client_call::streamed(reply);
    }
    client_call::final_response(reply).await
}

/// What the client asked for, to fill in what the upstream does not report.
fn requested(params: &ImageParams) -> Resolved {
    Resolved {
        size: Some(params.size.to_string()),
        quality: Some(params.quality.as_str().to_owned()),
        background: Some(params.background.as_str().to_owned()),
        output_format: Some(params.output_format.as_str().to_owned()),
    }
}

/// Everything the calls of one request share.
struct Job {
    client: reqwest::Client,
    config: UpstreamConfig,
    auth: Arc<CodexAuth>,
    target: AccountTarget,
    request: CodexRequest,
    n: u8,
    endpoint: ImageEndpoint,
    requested: Resolved,
    deadline: Deadline,
}

/// One image event.
enum Output {
    Partial(PartialImage),
    Completed(FinalImage, Usage),
}

/// The calls of one request, run one after the other.
struct Run {
    job: Arc<Job>,
    images_done: u8,
    model_index: usize,
    current: Option<EventStream>,
    relayed_for_image: bool,
    pending: Option<FinalImage>,
    done: bool,
    /// The request's deadline, moved forward by the time the client held the stream: each call
    /// starts under it, as within one call, up to a budget of the client's own.
    clock: ReadClock,
}

impl Run {
    fn new(job: Arc<Job>) -> Self {
        Self {
            clock: ReadClock::new(job.deadline),
            job,
            images_done: 0,
            model_index: 0,
            current: None,
            relayed_for_image: false,
            pending: None,
            done: false,
        }
    }

    async fn next(&mut self) -> Option<Result<Output, Failure>> {
        loop {
            if self.done {
                return None;
            }
            let Some(current) = self.current.as_mut() else {
                if self.images_done >= self.job.n {
                    self.done = true;
                    return None;
                }
                if self.clock.client_out_of_time() {
                    return self.fail(self.clock.failure());
                }
                let job = Arc::clone(&self.job);
                match start(&job, self.model_index, self.clock.upstream_deadline()).await {
                    Ok(stream) => self.current = Some(stream),
                    Err(failure) if self.next_model(&failure) => {}
                    Err(failure) => return self.fail(failure),
                }
                continue;
            };
            let step = match current.next().await {
                None => Step::Failed(Failure::transient(
                    "the upstream stream ended before the response completed",
                )),
                Some(Err(failure)) => Step::Failed(failure),
                Some(Ok(event)) => step(&event, self.pending.is_some()),
            };
            match step {
                Step::Ignore => {}
                Step::Partial(partial) => {
                    self.relayed_for_image = true;
                    return Some(Ok(Output::Partial(partial)));
                }
                Step::Image(image) => self.pending = Some(image),
                Step::Completed { usage, image } => {
                    let Some(image) = self.pending.take().or(image) else {
                        return self.fail(Failure::no_image());
                    };
                    self.images_done += 1;
                    self.current = None;
                    self.relayed_for_image = false;
                    return Some(Ok(Output::Completed(image, usage)));
                }
                Step::Failed(failure) if self.next_model(&failure) => {}
                Step::Failed(failure) => return self.fail(failure),
            }
        }
    }

    /// Starts the first upstream call (moving through the main models as they are refused).
    async fn open_first(&mut self) -> Result<(), Failure> {
        loop {
            let job = Arc::clone(&self.job);
            match start(&job, self.model_index, self.clock.upstream_deadline()).await {
                Ok(stream) => {
                    self.current = Some(stream);
                    return Ok(());
                }
                Err(failure) if self.next_model(&failure) => {}
                Err(failure) => return Err(failure),
            }
        }
    }

    /// Moves to the next main model when `failure` allows it; true when there is one to try.
    fn next_model(&mut self, failure: &Failure) -> bool {
        let has_next = self.model_index + 1 < self.job.target.main_models.len();
        if failure.kind != FailureKind::ModelUnsupported || self.relayed_for_image || !has_next {
            return false;
        }
        tracing::info!(
            account_id = self.job.target.account_id,
            unsupported = self
                .job
                .target
                .main_models
                .get(self.model_index)
                .map(String::as_str),
            next = self
                .job
                .target
                .main_models
                .get(self.model_index + 1)
                .map(String::as_str),
            "main model not supported, trying the next one"
        );
        self.model_index += 1;
        self.current = None;
        self.pending = None;
        true
    }

    fn fail(&mut self, failure: Failure) -> Option<Result<Output, Failure>> {
        self.done = true;
        self.current = None;
        Some(Err(failure))
    }

    /// The images as a stream of Images API events. Each `*.completed` event carries the usage of
    /// the images so far, as an OpenAI stream does: the last one is the whole request's.
    fn into_events(self) -> EventStream {
        futures::stream::unfold((self, Usage::default()), |(mut run, mut so_far)| async move {
            run.clock.resumed();
            let output = run.next().await?;
            run.clock.handed_over();
            let output = output.map(|output| match output {
                Output::Completed(image, usage) => {
                    so_far = so_far.saturating_add(usage);
                    Output::Completed(image, so_far)
                }
                partial @ Output::Partial(_) => partial,
            });
            let event = output.and_then(|output| image_event(&run.job, output));
            Some((event, (run, so_far)))
        })
        .boxed()
    }

    /// The images as one Images API response; `spent` follows the images made so far.
    async fn into_json(mut self, spent: &SpentSoFar) -> Result<Reply, Failure> {
        let mut data = Vec::with_capacity(usize::from(self.job.n));
        let mut usage = Usage::default();
        let mut first: Option<Resolved> = None;
        while let Some(output) = self.next().await {
            let output = match output {
                Ok(output) => output,
                Err(failure) => {
                    let made = u32::try_from(data.len()).unwrap_or(u32::MAX);
                    return Err(failure.with_spent(made, usage));
                }
            };
            if let Output::Completed(image, image_usage) = output {
                usage = usage.saturating_add(image_usage);
                first.get_or_insert(image.resolved);
                data.push(ImageData {
                    b64_json: image.b64,
                    revised_prompt: image.revised_prompt,
                });
                spent.set(Spent {
                    images: u32::try_from(data.len()).unwrap_or(u32::MAX),
                    usage,
                });
            }
        }
        let resolved = first.unwrap_or_default();
        let requested = &self.job.requested;
        let response = ImagesResponse {
            created: now_seconds(),
            background: resolved
                .background
                .or_else(|| not_auto(&requested.background, Background::Auto.as_str())),
            data,
            model: None,
            output_format: resolved.output_format.or_else(|| requested.output_format.clone()),
            quality: resolved
                .quality
                .or_else(|| not_auto(&requested.quality, Quality::Auto.as_str())),
            size: resolved.size.or_else(|| not_auto(&requested.size, "auto")),
            usage: Some(usage),
        };
        Ok(Reply::JsonStream(images_document(response)?))
    }
}

/// `response` as a body sent in pieces: the images go out from the buffers they were copied into,
/// once, out of their events, so they are held once, never copied into a second, whole document.
fn images_document(response: ImagesResponse) -> Result<JsonStream, Failure> {
    let summary = ResponseSummary {
        created: Some(response.created),
        size: response.size.clone(),
        quality: response.quality.clone(),
        output_format: response.output_format.clone(),
        background: response.background.clone(),
        usage: response.usage,
        images: response.data.len(),
        ..ResponseSummary::default()
    };
    let mut pieces = response
        .into_json_pieces()
        .map_err(|err| Failure::protocol(format!("encoding the images response failed: {err}")))?
        .into_iter();
    let head = pieces.next().unwrap_or_default();
    let rest: Vec<Bytes> = pieces.collect();
    let length = head.len() + rest.iter().map(Bytes::len).sum::<usize>();
    let (sender, end_summary) = EndSummary::channel();
    // Known before the first byte is sent: the relay takes it when the body has ended.
    let _ = sender.send(summary);
    Ok(JsonStream {
        head,
        rest: futures::stream::iter(rest.into_iter().map(Ok)).boxed(),
        summary: end_summary,
        request_id: None,
        content_length: u64::try_from(length).ok(),
        in_hand: true,
    })
}

/// Starts the call for the next image with main model number `model_index`, under `deadline`.
async fn start(job: &Job, model_index: usize, deadline: Deadline) -> Result<EventStream, Failure> {
    let Some(model) = job.target.main_models.get(model_index) else {
        return Err(Failure::protocol("the codex account has no main model left"));
    };
    let body = || job.request.body_for(model);
    let session = Session {
        client: &job.client,
        config: &job.config,
        auth: &job.auth,
        target: &job.target,
    };
    let response = session.send(Endpoint::Responses, body, true, deadline).await?;
    Ok(openai::stream::relay_events(response, 1, deadline))
}

fn not_auto(value: &Option<String>, auto: &str) -> Option<String> {
    value.clone().filter(|value| value != auto)
}

fn now_seconds() -> i64 {
    i64::try_from(now_unix_ms() / 1000).unwrap_or(i64::MAX)
}

/// One output as the Images API event of the job's endpoint.
fn image_event(job: &Job, output: Output) -> Result<SseEvent, Failure> {
    let pick = |upstream: Option<String>, requested: &Option<String>| {
        upstream
            .or_else(|| requested.clone())
            .unwrap_or_else(|| "auto".to_owned())
    };
    let requested = &job.requested;
    let event = match output {
        Output::Partial(partial) => ImageStreamEvent::partial(
            job.endpoint,
            PartialImageEvent {
                b64_json: partial.b64,
                created_at: now_seconds(),
                size: pick(partial.resolved.size, &requested.size),
                quality: pick(partial.resolved.quality, &requested.quality),
                background: pick(partial.resolved.background, &requested.background),
                output_format: pick(partial.resolved.output_format, &requested.output_format),
                partial_image_index: partial.index,
            },
        ),
        Output::Completed(image, usage) => ImageStreamEvent::completed(
            job.endpoint,
            CompletedImageEvent {
                b64_json: image.b64,
                created_at: now_seconds(),
                size: pick(image.resolved.size, &requested.size),
                quality: pick(image.resolved.quality, &requested.quality),
                background: pick(image.resolved.background, &requested.background),
                output_format: pick(image.resolved.output_format, &requested.output_format),
                usage,
            },
        ),
    };
    let data = serde_json::to_string(&event)
        .map_err(|err| Failure::protocol(format!("encoding an image event failed: {err}")))?;
    Ok(SseEvent {
        event: Some(event.event_type().to_owned()),
        data,
        id: None,
    })
}
