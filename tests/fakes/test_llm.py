"""The fake provider, driven through litellm as OrbChat drives a real one."""

from __future__ import annotations

import json

import litellm
import pytest

from tests.fakes.llm import Reply


def call(fake_llm, **kwargs):
    return litellm.completion(
        model="openai/fake-model",
        api_base=fake_llm.base_url,
        api_key="sk-test",
        messages=[{"role": "user", "content": "Hello?"}],
        num_retries=0,
        timeout=5,
        **kwargs,
    )


def test_non_streaming_reply(fake_llm):
    fake_llm.script(Reply("The tavern is quiet tonight."))
    response = call(fake_llm)
    assert response.choices[0].message.content == "The tavern is quiet tonight."
    assert response.choices[0].finish_reason == "stop"
    assert fake_llm.requests[0].body["messages"] == [{"role": "user", "content": "Hello?"}]
    assert fake_llm.requests[0].headers["authorization"] == "Bearer sk-test"


def test_streaming_reply_arrives_token_by_token(fake_llm):
    fake_llm.script(Reply("She draws her sword and waits."))
    chunks = [c.choices[0].delta.content or "" for c in call(fake_llm, stream=True)]
    assert "".join(chunks) == "She draws her sword and waits."
    assert len([c for c in chunks if c]) == 6


TOOL_CALL = {"name": "create_fact", "arguments": {"text": "Mara keeps the key.", "category": "event"}}


def test_a_reply_with_tool_calls_arrives_as_openai_tool_calls(fake_llm):
    fake_llm.script(Reply("", tool_calls=[TOOL_CALL]))
    tools = [{"type": "function", "function": {"name": "create_fact", "parameters": {"type": "object"}}}]
    choice = call(fake_llm, tools=tools).choices[0]
    (tool_call,) = choice.message.tool_calls
    assert choice.finish_reason == "tool_calls" and not choice.message.content
    assert tool_call.function.name == "create_fact" and tool_call.id.startswith("call_")
    assert json.loads(tool_call.function.arguments) == TOOL_CALL["arguments"]
    assert fake_llm.requests[0].body["tools"] == tools


def test_streamed_tool_calls_arrive_in_a_delta(fake_llm):
    fake_llm.script(Reply("", tool_calls=[TOOL_CALL]))
    deltas = [c.choices[0].delta for c in call(fake_llm, stream=True)]
    (tool_call,) = [made for delta in deltas for made in (delta.tool_calls or ())]
    assert json.loads(tool_call.function.arguments) == TOOL_CALL["arguments"]


@pytest.mark.parametrize(
    ("status", "error"),
    [
        (401, litellm.AuthenticationError),
        (429, litellm.RateLimitError),
        (500, litellm.InternalServerError),
    ],
)
def test_http_faults_reach_the_client_as_provider_errors(fake_llm, status, error):
    fake_llm.script(Reply(status=status))
    with pytest.raises(error):
        call(fake_llm)


def test_slow_tokens_trip_the_client_timeout(fake_llm):
    fake_llm.script(Reply("too slow", first_token_delay=3))
    with pytest.raises(litellm.Timeout):
        litellm.completion(
            model="openai/fake-model",
            api_base=fake_llm.base_url,
            api_key="sk-test",
            messages=[{"role": "user", "content": "Hello?"}],
            num_retries=0,
            timeout=0.5,
        )


def test_a_stream_cut_midway_delivers_only_the_first_tokens(fake_llm):
    fake_llm.script(Reply("one two three four five six", cut_after=2))
    received = []
    try:
        for chunk in call(fake_llm, stream=True):
            received.append(chunk.choices[0].delta.content or "")
    except Exception:  # noqa: BLE001 - litellm may or may not raise on a dropped stream
        pass
    assert "".join(received) == "one two"


def test_scripted_replies_run_in_order_then_the_default(fake_llm):
    fake_llm.script(Reply("first"), Reply("second"))
    texts = [call(fake_llm).choices[0].message.content for _ in range(3)]
    assert texts == ["first", "second", "OK."]


def _text_call(fake_llm, **params):
    return litellm.text_completion(
        model="text-completion-openai/fake-model",
        api_base=fake_llm.base_url,
        api_key="no-key",
        prompt="<|im_start|>user\nHi<|im_end|>\n<|im_start|>assistant\n",
        max_tokens=20,
        **params,
    )


def test_text_completion_reply_records_the_prompt_and_samplers(fake_llm):
    fake_llm.script(Reply("Hello there."))
    response = _text_call(fake_llm, temperature=0.5, extra_body={"top_k": 40, "dry_multiplier": 0.8})
    assert response.choices[0].text == "Hello there."
    (request,) = fake_llm.completions()
    assert request.body["prompt"].startswith("<|im_start|>user\nHi")
    assert (request.body["temperature"], request.body["top_k"], request.body["dry_multiplier"]) == (
        0.5,
        40,
        0.8,
    )


def test_text_completion_streams_token_by_token(fake_llm):
    fake_llm.script(Reply("one two three"))
    chunks = [c.choices[0].text for c in _text_call(fake_llm, stream=True) if c.choices and c.choices[0].text]
    assert chunks == ["one", " two", " three"]
    assert fake_llm.completions()[0].body["stream"] is True
