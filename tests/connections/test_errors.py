"""Provider failures in plain words: what happened, what to do, and whether retrying can help."""

from __future__ import annotations

import pytest

from orbchat.connections import gateway, services
from tests.factories import make_owner
from tests.fakes.llm import Reply

RAW = "Incorrect API key provided: sk-proj-abcd1234efgh5678. Traceback: litellm.AuthenticationError"


@pytest.fixture
def owner(db):
    return make_owner()


def _failure(owner, fake_llm, reply: Reply, *, api: str = "chat") -> gateway.Failure:
    connection = services.connection_create(
        owner=owner, name="x", provider="local", model="m", api_base=fake_llm.base_url, api=api
    )
    fake_llm.script(reply)
    with pytest.raises(Exception) as raised:
        gateway.complete(gateway.target_for(connection), [{"role": "user", "content": "Hi"}], max_tokens=5)
    return gateway.explain(raised.value)


@pytest.mark.parametrize("api", ["chat", "text"])
@pytest.mark.parametrize(
    ("status", "text", "retry"),
    [
        (401, "The provider refused the API key. Check the key in Settings → Models.", False),
        (403, "The provider says this key may not use this model. Check the key and the model", False),
        (404, "The provider does not know this model. Check the model name in Settings → Models.", False),
        (400, "The provider rejected the request. Check the model and the extra parameters", False),
        (429, "The provider is limiting how often it can be called. Wait a moment, then retry.", True),
        (500, "The provider had a problem on its side. Retry in a moment.", True),
        (503, "The provider had a problem on its side. Retry in a moment.", True),
    ],
)
def test_each_status_is_said_plainly_without_the_raw_error(owner, fake_llm, api, status, text, retry):
    failure = _failure(owner, fake_llm, Reply(status=status, error_message=RAW), api=api)
    assert failure.text.startswith(text) and failure.retry is retry
    assert "sk-proj" not in failure.text and "Traceback" not in failure.text and "Error" not in failure.text
    assert str(status) not in failure.text


def test_an_unreachable_server_says_to_check_it_and_may_be_retried(owner):
    connection = services.connection_create(
        owner=owner, name="Gone", provider="local", model="m", api_base="http://127.0.0.1:9/v1"
    )
    with pytest.raises(Exception) as raised:
        gateway.complete(gateway.target_for(connection), [{"role": "user", "content": "Hi"}])
    failure = gateway.explain(raised.value)
    assert failure.text.startswith("Could not reach the provider. Check that the server is running")
    assert failure.retry


def test_a_text_connection_is_tested_through_v1_completions(owner, fake_llm):
    connection = services.connection_create(
        owner=owner, name="Kobold", provider="local", model="m", api_base=fake_llm.base_url, api="text"
    )
    fake_llm.script(Reply("ready"))
    worked, message = gateway.test_connection(connection)
    assert worked and message == "The model answered: ready"
    assert fake_llm.completions()[-1].body["prompt"] == "Reply with the single word: ready\n"


def test_testing_a_text_connection_writes_the_request_with_its_instruct_template(owner, fake_llm):
    from django.urls import reverse

    from tests.factories import client_for

    connection = services.connection_create(
        owner=owner,
        name="Gemma",
        provider="local",
        model="gemma-2-9b-it",
        api_base=fake_llm.base_url,
        api="text",
    )
    fake_llm.script(Reply("ready"))
    response = client_for(owner).post(
        reverse("connections:test", args=[connection.pk]), HTTP_HX_REQUEST="true"
    )
    assert "The model answered: ready" in response.content.decode()
    body = fake_llm.completions()[-1].body
    # Automatic: the model's name finds the bundled Gemma 2 template.
    assert body["prompt"] == (
        "<start_of_turn>user\nReply with the single word: ready<end_of_turn>\n<start_of_turn>model\n"
    )
    assert body["stop"] == [
        "\n<end_of_turn>",
        "\n<start_of_turn>user",
        "\n<start_of_turn>model",
        "\n<start_of_turn>system",
    ]
