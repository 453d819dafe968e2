"""Conformance of imagegate with the official `openai` Python SDK, unmodified.

Run by tests/tests/python_sdk.rs against a real gateway and simulator:
IMAGEGATE_BASE_URL (ends with /v1), IMAGEGATE_KEY, IMAGEGATE_FIXTURES (a folder with a.png, b.png, mask.png),
IMAGEGATE_SIM_URL (the simulator, scripted through /sim/faults and counted through /sim/stats).
Each check raises on failure; the last line counts what passed.
"""

import base64
import json
import os
import struct
import sys
import urllib.request

import openai
from openai import OpenAI

BASE = os.environ["IMAGEGATE_BASE_URL"]
KEY = os.environ["IMAGEGATE_KEY"]
FIXTURES = os.environ["IMAGEGATE_FIXTURES"]
SIM = os.environ["IMAGEGATE_SIM_URL"]

client = OpenAI(base_url=BASE, api_key=KEY, max_retries=0, timeout=120)


def png_size(data: bytes):
    assert data[:8] == b"\x89PNG\r\n\x1a\n", "not a PNG"
    return struct.unpack(">II", data[16:24])


def check_generate():
    result = client.images.generate(model="gpt-image-2", prompt="a lighthouse at dusk", size="1536x1024", quality="low")
    assert png_size(base64.b64decode(result.data[0].b64_json)) == (1536, 1024)
    assert result.size == "1536x1024" and result.output_format == "png" and result.quality == "low"
    assert result.usage.total_tokens == result.usage.input_tokens + result.usage.output_tokens > 0
    assert result.usage.input_tokens_details.text_tokens > 0
    # The interface names the model used (OpenAI's own Images answers do not).
    assert getattr(result, "model", None) == "gpt-image-2", result


def check_generate_stream():
    stream = client.images.generate(
        model="gpt-image-2", prompt="a red kite", size="1024x1024", stream=True, partial_images=2
    )
    events = list(stream)
    kinds = [event.type for event in events]
    assert kinds == ["image_generation.partial_image"] * 2 + ["image_generation.completed"], kinds
    assert [e.partial_image_index for e in events[:2]] == [0, 1]
    final = events[-1]
    assert png_size(base64.b64decode(final.b64_json)) == (1024, 1024)
    assert final.usage.total_tokens > 0


def check_edit():
    with open(os.path.join(FIXTURES, "a.png"), "rb") as a, open(os.path.join(FIXTURES, "b.png"), "rb") as b, open(
        os.path.join(FIXTURES, "mask.png"), "rb"
    ) as mask:
        result = client.images.edit(
            model="gpt-image-2", image=[a, b], mask=mask, prompt="add a small boat", size="1024x1024"
        )
    assert png_size(base64.b64decode(result.data[0].b64_json)) == (1024, 1024)
    assert result.usage.input_tokens_details.image_tokens > 0
    assert getattr(result, "model", None) == "gpt-image-2", result


def check_models():
    listed = [model.id for model in client.models.list()]
    assert "gpt-image-2" in listed, listed
    assert client.models.retrieve("gpt-image-2").id == "gpt-image-2"


def check_responses():
    response = client.responses.create(
        model="gpt-5",
        input="Draw a watercolor fox.",
        tools=[{"type": "image_generation", "size": "1024x1024", "quality": "low"}],
    )
    calls = [item for item in response.output if item.type == "image_generation_call"]
    assert calls and calls[0].result, response.output
    assert png_size(base64.b64decode(calls[0].result)) == (1024, 1024)
    with client.responses.stream(
        model="gpt-5",
        input="Draw a paper crane.",
        tools=[{"type": "image_generation", "size": "1024x1024", "partial_images": 1}],
    ) as stream:
        kinds = [event.type for event in stream]
        final = stream.get_final_response()
    assert kinds[0] == "response.created" and kinds[-1] == "response.completed", kinds
    assert "response.image_generation_call.partial_image" in kinds, kinds
    assert any(item.type == "image_generation_call" and item.result for item in final.output)


def check_wrong_key():
    bad = OpenAI(base_url=BASE, api_key="sk-ig-aaaaaaaaaaaa-notarealsecretnotarealsecret00", max_retries=0)
    try:
        bad.images.generate(model="gpt-image-2", prompt="x")
    except openai.AuthenticationError as err:
        assert err.status_code == 401 and err.code == "INVALID_API_KEY", err
        assert err.request_id, "x-request-id missing"
    else:
        raise AssertionError("a wrong key was accepted")


def check_invalid_size():
    try:
        client.images.generate(model="gpt-image-2", prompt="x", size="1792x936")
    except openai.BadRequestError as err:
        assert err.status_code == 400 and err.param == "size", err
        assert err.type == "invalid_request_error", err
        assert "936" in err.message, err.message
    else:
        raise AssertionError("an invalid size was accepted")


def sim(method, path, body=None):
    data = None if body is None else json.dumps(body).encode()
    request = urllib.request.Request(SIM + path, data=data, method=method, headers={"content-type": "application/json"})
    with urllib.request.urlopen(request, timeout=10) as response:
        return json.loads(response.read() or b"null")


def upstream_calls():
    return sim("GET", "/sim/stats")["requests"]


def check_refusal_is_not_retried_by_the_sdk():
    # 502 by the interface, but `x-should-retry: false`: the SDK, retrying 5xx by default, must not.
    retrying = OpenAI(base_url=BASE, api_key=KEY, max_retries=2, timeout=120)
    sim("POST", "/sim/faults", {"fault": "refusal", "times": 1})
    before = upstream_calls()
    try:
        retrying.images.generate(model="gpt-image-2", prompt="x", size="1024x1024", quality="low")
    except openai.InternalServerError as err:
        assert err.status_code == 502 and err.code == "moderation_blocked", err
        assert "Upstream request failed: the content was refused" in err.message, err.message
    else:
        raise AssertionError("a refused prompt was retried until it passed")
    finally:
        sim("DELETE", "/sim/faults")
    assert upstream_calls() - before == 1, "the refusal reached the upstream more than once"


def check_short_usage_limit_is_waited_out_by_the_sdk():
    # 429 `usage_limit_reached` with `retry-after: 1` and `x-should-retry: true`: the SDK waits and
    # its retry gets the image.
    retrying = OpenAI(base_url=BASE, api_key=KEY, max_retries=2, timeout=120)
    sim("POST", "/sim/faults", {"fault": "rate_limit", "retry_after_seconds": 1, "times": 1})
    before = upstream_calls()
    try:
        raw = retrying.images.with_raw_response.generate(model="gpt-image-2", prompt="x", size="1024x1024", quality="low")
    finally:
        sim("DELETE", "/sim/faults")
    assert raw.retries_taken >= 1, "the first answer was no 429"
    assert raw.parse().data[0].b64_json
    assert upstream_calls() - before == 2, "the limit was not met once and then waited out"


def check_keepalive_answers_parse_as_usual():
    # Slow answers with the opt-in keepalive, asked for through the SDK's own `default_headers`:
    # newlines come before the JSON, and the SDK parses the document as usual.
    keepalive = OpenAI(
        base_url=BASE, api_key=KEY, max_retries=0, timeout=120, default_headers={"x-imagegate-keepalive": "1"}
    )
    sim("POST", "/sim/faults", {"fault": "stall", "stall_ms": 2500, "times": 2})
    try:
        generated = keepalive.images.with_raw_response.generate(
            model="gpt-image-2", prompt="x", size="1024x1024", quality="low"
        )
        with open(os.path.join(FIXTURES, "a.png"), "rb") as a:
            edited = keepalive.images.with_raw_response.edit(model="gpt-image-2", image=a, prompt="x", size="1024x1024")
    finally:
        sim("DELETE", "/sim/faults")
    for raw in (generated, edited):
        assert raw.headers.get("x-imagegate-keepalive") == "1", dict(raw.headers)
        assert raw.http_response.content.startswith(b"\n\n"), raw.http_response.content[:20]
        assert png_size(base64.b64decode(raw.parse().data[0].b64_json)) == (1024, 1024)


CHECKS = [
    check_generate,
    check_generate_stream,
    check_edit,
    check_models,
    check_responses,
    check_wrong_key,
    check_invalid_size,
    check_refusal_is_not_retried_by_the_sdk,
    check_short_usage_limit_is_waited_out_by_the_sdk,
    check_keepalive_answers_parse_as_usual,
]

if __name__ == "__main__":
    passed = failed = 0
    for check in CHECKS:
        try:
            check()
            passed += 1
            print(f"ok   {check.__name__}")
        except Exception as err:  # noqa: BLE001 - report every failing check
            failed += 1
            print(f"FAIL {check.__name__}: {err!r}")
    print(f"sdk conformance: {passed} ok, {failed} failing")
    sys.exit(1 if failed else 0)
