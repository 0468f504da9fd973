"""The host's own prompts reach the Utility model: real services, database and Chroma; the fake provider."""

from __future__ import annotations

import json

import pytest

from memory.models import MemoryTuning, Summary
from memory.services import catch_up as passes
from orbchat.connections import selectors as connection_selectors
from orbchat.connections import services as connection_services
from tests.fakes.llm import Reply
from tests.memory.conftest import story_room

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def utility(host, fake_llm):
    """The host's Utility model is the fake provider."""
    connection = connection_services.connection_create(
        owner=host, name="Fake utility", provider="local", model="fake-utility", api_base=fake_llm.base_url
    )
    roles = connection_selectors.model_roles_get(user=host)
    connection_services.model_roles_update(
        user=host, chat=roles.chat, utility=connection, embedding=None, rerank_kind="builtin"
    )
    return connection


def answer() -> Reply:
    summary = {"heading": "At the lighthouse", "facts": ["The key is hidden."], "keywords": ["key"]}
    return Reply(json.dumps(summary))


def test_the_hosts_own_prompts_are_what_the_utility_model_is_sent(room, utility, fake_llm):
    MemoryTuning.objects.create(
        pk=1,
        custom_prompts={
            "block": "Archive this for {{room}} in French.\n\n{{messages}}\n\nJSON, s'il vous plaît.",
            "rollup": "Tell the arc of level {{tier}}.\n\n{{notes}}",
            "manager": "Keep the facts ({{categories}}) in French.\n\n{{material}}",
        },
    )
    fake_llm.script(*[answer() for _ in range(5)])
    story_room(room, 40)
    passes.catch_up(room.pk)
    assert Summary.objects.filter(room=room, source=Summary.Source.UTILITY).count() == 5
    sent = [request.body["messages"] for request in fake_llm.requests if "tools" not in request.body]
    managed = [request.body["messages"] for request in fake_llm.requests if "tools" in request.body]
    blocks = [messages for messages in sent if "Transcript:" in messages[-1]["content"]]
    rollups = [messages for messages in sent if messages[-1]["content"].startswith("Notes, oldest first:")]
    assert len(blocks) == 4 and len(rollups) == 1
    system, user = blocks[0]
    assert system == {"role": "system", "content": f"Archive this for {room.title} in French."}
    assert "#3 " in user["content"] and user["content"].endswith("\n\nJSON, s'il vous plaît.")
    assert rollups[0][0] == {"role": "system", "content": "Tell the arc of level 1."}
    assert "Note 4:\nAt the lighthouse" in rollups[0][1]["content"]
    # The memory manager reads each of the four blocks with the host's own instructions.
    assert len(managed) == 4
    assert (
        managed[0][0]["content"].startswith("Keep the facts (promise, relationship, ")
        and "French" in managed[0][0]["content"]
    )
    assert managed[0][1]["content"].startswith("Room: ") and "Facts kept:" in managed[0][1]["content"]


def test_without_its_own_prompts_the_utility_model_gets_the_built_in_ones(room, utility, fake_llm):
    fake_llm.script(answer())
    story_room(room, 16)
    passes.catch_up(room.pk)
    request, manager = fake_llm.requests  # the summary's, then the memory manager's reading of it
    assert manager.body["messages"][0]["content"].startswith(
        "You keep the lasting facts of a long roleplay chat"
    )
    system = request.body["messages"][0]["content"]
    assert system.startswith("You keep the memory of a long roleplay chat. You are shown one stretch")
    assert request.body["messages"][-1]["content"].endswith("\n\nWrite the JSON object now.")
