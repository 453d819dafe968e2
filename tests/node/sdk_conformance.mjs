// Conformance of imagegate with the official `openai` Node SDK, unmodified (pinned in package.json).
//
// Run by tests/tests/node_sdk.rs against a real gateway and simulator:
// IMAGEGATE_BASE_URL (ends with /v1), IMAGEGATE_KEY, IMAGEGATE_FIXTURES (a folder with a.png, b.png,
// mask.png; b.png is larger than the 256 KiB the gateway keeps in memory), IMAGEGATE_SIM_URL (the
// simulator, whose /sim/stats shows the files of the last edit it received).
// Each check throws on failure; the last line counts what passed.

import assert from 'node:assert/strict';
import { createHash } from 'node:crypto';
import fs from 'node:fs';
import path from 'node:path';

import OpenAI, { toFile } from 'openai';

const BASE = process.env.IMAGEGATE_BASE_URL;
const KEY = process.env.IMAGEGATE_KEY;
const FIXTURES = process.env.IMAGEGATE_FIXTURES;
const SIM = process.env.IMAGEGATE_SIM_URL;
for (const [name, value] of Object.entries({ BASE, KEY, FIXTURES, SIM })) {
  if (!value) throw new Error(`environment variable for ${name} is not set`);
}

const client = new OpenAI({ baseURL: BASE, apiKey: KEY, maxRetries: 0, timeout: 120_000 });

const fixture = (name) => path.join(FIXTURES, name);
const sha256 = (bytes) => createHash('sha256').update(bytes).digest('hex');

/** [width, height] of a base64 PNG. */
function pngSize(b64) {
  assert.equal(typeof b64, 'string', 'b64_json missing');
  const data = Buffer.from(b64, 'base64');
  assert.ok(data.subarray(0, 8).equals(Buffer.from([0x89, 0x50, 0x4e, 0x47, 0x0d, 0x0a, 0x1a, 0x0a])), 'not a PNG');
  return [data.readUInt32BE(16), data.readUInt32BE(20)];
}

/** What the simulator says it got as files of the last edit: [field, bytes, sha256] in form order. */
async function simEditInputs() {
  const response = await fetch(`${SIM}/sim/stats`);
  assert.equal(response.status, 200);
  const stats = await response.json();
  return stats.last_edit_inputs.map((input) => [input.field, input.bytes, input.sha256]);
}

/** [field, bytes, sha256] of a fixture as the upstream should receive it. */
function sent(field, name) {
  const bytes = fs.readFileSync(fixture(name));
  return [field, bytes.length, sha256(bytes)];
}

async function check_generate() {
  const result = await client.images.generate({
    model: 'gpt-image-2',
    prompt: 'a lighthouse at dusk',
    size: '1536x1024',
    quality: 'low',
  });
  assert.equal(result.data.length, 1);
  assert.deepEqual(pngSize(result.data[0].b64_json), [1536, 1024]);
  assert.equal(result.size, '1536x1024');
  assert.equal(result.output_format, 'png');
  assert.equal(result.quality, 'low');
  const usage = result.usage;
  assert.ok(usage.total_tokens > 0, JSON.stringify(usage));
  assert.equal(usage.total_tokens, usage.input_tokens + usage.output_tokens, JSON.stringify(usage));
  assert.ok(usage.input_tokens_details.text_tokens > 0, JSON.stringify(usage));
  // The interface names the model used (OpenAI's own Images answers do not).
  assert.equal(result.model, 'gpt-image-2');
}

async function check_generate_stream() {
  const stream = await client.images.generate({
    model: 'gpt-image-2',
    prompt: 'a red kite',
    size: '1024x1024',
    stream: true,
    partial_images: 2,
  });
  const events = [];
  for await (const event of stream) events.push(event);
  const kinds = events.map((event) => event.type);
  assert.deepEqual(kinds, [
    'image_generation.partial_image',
    'image_generation.partial_image',
    'image_generation.completed',
  ]);
  assert.deepEqual(events.slice(0, 2).map((event) => event.partial_image_index), [0, 1]);
  const final = events[2];
  assert.deepEqual(pngSize(final.b64_json), [1024, 1024]);
  assert.equal(final.size, '1024x1024');
  assert.equal(final.output_format, 'png');
  assert.ok(final.usage.total_tokens > 0, JSON.stringify(final.usage));
}

async function check_edit() {
  // Two images as an array (the SDK sends repeated `image[]` parts, in order), the second larger than
  // 256 KiB and read from a stream; the mask straight from a read stream (a part with the file's name and
  // no image content type: the gateway sniffs the bytes).
  const result = await client.images.edit({
    model: 'gpt-image-2',
    image: [
      await toFile(fs.readFileSync(fixture('a.png')), 'a.png', { type: 'image/png' }),
      await toFile(fs.createReadStream(fixture('b.png')), 'b.png', { type: 'image/png' }),
    ],
    mask: fs.createReadStream(fixture('mask.png')),
    prompt: 'add a small boat',
    size: '1024x1024',
  });
  assert.equal(result.data.length, 1);
  assert.deepEqual(pngSize(result.data[0].b64_json), [1024, 1024]);
  assert.equal(result.model, 'gpt-image-2');
  // The simulator charges 85 + 170 per 512 px tile of each input image: a.png (512x512) 255,
  // b.png (640x640) 765. Both images reached it.
  assert.equal(result.usage.input_tokens_details.image_tokens, 255 + 765, JSON.stringify(result.usage));
  const inputs = await simEditInputs();
  const [a, b, mask] = [sent('image[]', 'a.png'), sent('image[]', 'b.png'), sent('mask', 'mask.png')];
  assert.deepEqual(
    inputs.map(([, bytes, hash]) => [bytes, hash]),
    [a, b, mask].map(([, bytes, hash]) => [bytes, hash]),
    'the upstream did not get the same files in the same order',
  );
  assert.equal(inputs[2][0], 'mask');
}

async function check_edit_stream() {
  // One image (a single `image` part) streamed from disk, larger than 256 KiB, with a streamed answer.
  const stream = await client.images.edit({
    model: 'gpt-image-2',
    image: fs.createReadStream(fixture('b.png')),
    prompt: 'make it autumn',
    size: '1024x1024',
    quality: 'low',
    stream: true,
    partial_images: 1,
  });
  const events = [];
  for await (const event of stream) events.push(event);
  const kinds = events.map((event) => event.type);
  assert.deepEqual(kinds, ['image_edit.partial_image', 'image_edit.completed']);
  assert.equal(events[0].partial_image_index, 0);
  const final = events[1];
  assert.deepEqual(pngSize(final.b64_json), [1024, 1024]);
  assert.equal(final.size, '1024x1024');
  assert.equal(final.quality, 'low');
  // b.png (640x640) is four tiles: 85 + 4 * 170.
  assert.equal(final.usage.input_tokens_details.image_tokens, 765, JSON.stringify(final.usage));
  const [, bytes, hash] = sent('image', 'b.png');
  assert.deepEqual(
    (await simEditInputs()).map(([, b, h]) => [b, h]),
    [[bytes, hash]],
    'the upstream did not get the streamed file',
  );
}

async function check_models() {
  const listed = [];
  for await (const model of client.models.list()) listed.push(model.id);
  assert.ok(listed.includes('gpt-image-2'), JSON.stringify(listed));
  const model = await client.models.retrieve('gpt-image-2');
  assert.equal(model.id, 'gpt-image-2');
  assert.equal(model.object, 'model');
}

async function check_responses() {
  const response = await client.responses.create({
    model: 'gpt-5',
    input: 'Draw a watercolor fox.',
    tools: [{ type: 'image_generation', size: '1024x1024', quality: 'low' }],
  });
  const calls = response.output.filter((item) => item.type === 'image_generation_call');
  assert.ok(calls.length > 0 && calls[0].result, JSON.stringify(response.output).slice(0, 500));
  assert.deepEqual(pngSize(calls[0].result), [1024, 1024]);

  const stream = client.responses.stream({
    model: 'gpt-5',
    input: 'Draw a paper crane.',
    tools: [{ type: 'image_generation', size: '1024x1024', partial_images: 1 }],
  });
  const kinds = [];
  let partial = null;
  for await (const event of stream) {
    kinds.push(event.type);
    if (event.type === 'response.image_generation_call.partial_image') partial = event;
  }
  const final = await stream.finalResponse();
  assert.equal(kinds[0], 'response.created', JSON.stringify(kinds));
  assert.equal(kinds.at(-1), 'response.completed', JSON.stringify(kinds));
  assert.ok(partial, `no partial image event: ${JSON.stringify(kinds)}`);
  assert.equal(partial.partial_image_index, 0);
  assert.ok(Buffer.from(partial.partial_image_b64, 'base64').length > 0, 'empty partial image');
  const done = final.output.filter((item) => item.type === 'image_generation_call' && item.result);
  assert.equal(done.length, 1, JSON.stringify(final.output.map((item) => item.type)));
  assert.deepEqual(pngSize(done[0].result), [1024, 1024]);
}

async function check_wrong_key() {
  const bad = new OpenAI({
    baseURL: BASE,
    apiKey: 'sk-ig-aaaaaaaaaaaa-notarealsecretnotarealsecret00',
    maxRetries: 0,
  });
  try {
    await bad.images.generate({ model: 'gpt-image-2', prompt: 'x' });
  } catch (err) {
    assert.ok(err instanceof OpenAI.AuthenticationError, `not an AuthenticationError: ${err}`);
    assert.equal(err.status, 401);
    assert.equal(err.code, 'INVALID_API_KEY');
    assert.ok(err.requestID, 'x-request-id missing');
    return;
  }
  throw new Error('a wrong key was accepted');
}

async function check_invalid_size() {
  try {
    await client.images.generate({ model: 'gpt-image-2', prompt: 'x', size: '1792x936' });
  } catch (err) {
    assert.ok(err instanceof OpenAI.BadRequestError, `not a BadRequestError: ${err}`);
    assert.equal(err.status, 400);
    assert.equal(err.param, 'size');
    assert.equal(err.type, 'invalid_request_error');
    assert.ok(err.message.includes('936'), err.message);
    assert.ok(err.requestID, 'x-request-id missing');
    return;
  }
  throw new Error('an invalid size was accepted');
}

/** Calls the simulator's admin API. */
async function sim(method, route, body) {
  const response = await fetch(`${SIM}${route}`, {
    method,
    headers: { 'content-type': 'application/json' },
    body: body === undefined ? undefined : JSON.stringify(body),
  });
  assert.ok(response.ok, `${method} ${route}: ${response.status}`);
  return response.json();
}

const upstreamCalls = async () => (await sim('GET', '/sim/stats')).requests;

async function check_refusal_is_not_retried_by_the_sdk() {
  // 502 by the interface, but `x-should-retry: false`: the SDK, retrying 5xx by default, must not.
  const retrying = new OpenAI({ baseURL: BASE, apiKey: KEY, maxRetries: 2, timeout: 120_000 });
  await sim('POST', '/sim/faults', { fault: 'refusal', times: 1 });
  const before = await upstreamCalls();
  try {
    await retrying.images.generate({ model: 'gpt-image-2', prompt: 'x', size: '1024x1024', quality: 'low' });
    throw new Error('a refused prompt was retried until it passed');
  } catch (err) {
    assert.ok(err instanceof OpenAI.InternalServerError, `not an InternalServerError: ${err}`);
    assert.equal(err.status, 502);
    assert.equal(err.code, 'moderation_blocked');
    assert.ok(err.message.includes('Upstream request failed: the content was refused'), err.message);
  } finally {
    await sim('DELETE', '/sim/faults');
  }
  assert.equal((await upstreamCalls()) - before, 1, 'the refusal reached the upstream more than once');
}

async function check_short_usage_limit_is_waited_out_by_the_sdk() {
  // 429 `usage_limit_reached` with `retry-after: 1` and `x-should-retry: true`: the SDK waits and
  // its retry gets the image.
  const retrying = new OpenAI({ baseURL: BASE, apiKey: KEY, maxRetries: 2, timeout: 120_000 });
  await sim('POST', '/sim/faults', { fault: 'rate_limit', retry_after_seconds: 1, times: 1 });
  const before = await upstreamCalls();
  try {
    const result = await retrying.images.generate({ model: 'gpt-image-2', prompt: 'x', size: '1024x1024', quality: 'low' });
    assert.ok(result.data[0].b64_json, 'no image');
  } finally {
    await sim('DELETE', '/sim/faults');
  }
  assert.equal((await upstreamCalls()) - before, 2, 'the limit was not met once and then waited out');
}

async function check_keepalive_answers_parse_as_usual() {
  // Slow answers with the opt-in keepalive, asked for through the SDK's own `defaultHeaders`:
  // newlines come before the JSON, and the SDK parses the document as usual.
  const keepalive = new OpenAI({
    baseURL: BASE,
    apiKey: KEY,
    maxRetries: 0,
    timeout: 120_000,
    defaultHeaders: { 'x-imagegate-keepalive': '1' },
  });
  await sim('POST', '/sim/faults', { fault: 'stall', stall_ms: 2500, times: 2 });
  try {
    const generated = await keepalive.images
      .generate({ model: 'gpt-image-2', prompt: 'x', size: '1024x1024', quality: 'low' })
      .withResponse();
    const edited = await keepalive.images
      .edit({
        model: 'gpt-image-2',
        image: await toFile(fs.readFileSync(fixture('a.png')), 'a.png', { type: 'image/png' }),
        prompt: 'x',
        size: '1024x1024',
      })
      .withResponse();
    for (const { data, response } of [generated, edited]) {
      assert.equal(response.headers.get('x-imagegate-keepalive'), '1');
      assert.deepEqual(pngSize(data.data[0].b64_json), [1024, 1024]);
    }
  } finally {
    await sim('DELETE', '/sim/faults');
  }
}

const CHECKS = [
  check_generate,
  check_generate_stream,
  check_edit,
  check_edit_stream,
  check_models,
  check_responses,
  check_wrong_key,
  check_invalid_size,
  check_refusal_is_not_retried_by_the_sdk,
  check_short_usage_limit_is_waited_out_by_the_sdk,
  check_keepalive_answers_parse_as_usual,
];

let passed = 0;
let failed = 0;
for (const check of CHECKS) {
  try {
    await check();
    passed += 1;
    console.log(`ok   ${check.name}`);
  } catch (err) {
    failed += 1;
    console.log(`FAIL ${check.name}: ${err}`);
  }
}
console.log(`sdk conformance: ${passed} ok, ${failed} failing`);
process.exitCode = failed ? 1 : 0;
