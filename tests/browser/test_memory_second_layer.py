"""Memory's second layer end to end: a long chat in "ask first", the host starts the cycle, watches
its stages, finds the fact the Utility model wrote in the Facts tab, corrects it, and the next
reply's Context used shows the correction, not the old text."""

from __future__ import annotations

import json
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.db import connection
from playwright.sync_api import expect

from memory.models import MemoryTuning
from orbchat.connections import services as connection_services
from rooms import services as room_services
from tests.browser.test_reading import SIZES, shot
from tests.browser.test_rooms import contexts, send, sign_in, socket_open  # noqa: F401 - fixtures
from tests.factories import make_owner
from tests.fakes.llm import Reply
from tests.memory.conftest import story_room

pytestmark = pytest.mark.browser

FACT = "Maren keeps the brass key in the tide ledger."
CORRECTED = "Maren hid the brass key under the fog bell."
SCENE = Reply(
    json.dumps(
        {"where": "the lighthouse lamp room", "who": ["Maren Tallis"], "when": "dusk", "open_threads": []}
    )
)
SUMMARY = Reply(
    json.dumps({"heading": "The lamp room", "facts": ["Maren trims the wick."], "keywords": ["lamp"]}),
    token_delay=0.05,
)
FACTS = Reply(
    "",
    tool_calls=[
        {
            "name": "create_fact",
            "arguments": {
                "text": FACT,
                "category": "discovery",
                "subjects": ["brass key"],
                "confidence": 0.9,
            },
        }
    ],
)


def long_ask_first_chat(fake_llm):
    """The owner's chat with Maren, 14 messages long, in "ask first"; the fake model chats and
    writes memory, with a context so small that the first messages no longer fit in a prompt."""
    try:
        MemoryTuning.objects.update_or_create(pk=1, defaults={"run_solo": "ask"})
        owner = make_owner(username="owner")
        model = connection_services.connection_create(
            owner=owner,
            name="Fake",
            provider="local",
            model="fake-model",
            api_base=fake_llm.base_url,
            context_size=1500,
        )
        connection_services.model_roles_update(
            user=owner, chat=model, utility=model, embedding=None, rerank_kind="builtin"
        )
        room = room_services.room_create_from_character(host=owner, character=owner.characters.get())
        return story_room(room, 14)
    finally:
        connection.close()


def fact_card(page, text: str):
    return page.locator("article.fact-card").filter(has=page.locator(".fact-text", has_text=text))


def both_widths(page, name: str, focus=None) -> None:
    """Screenshots at desktop and phone width (with `focus` scrolled into view); the journey itself
    runs at desktop width."""
    for size, viewport in SIZES.items():
        page.set_viewport_size(viewport)
        if focus is not None:
            focus.scroll_into_view_if_needed()
        shot(page, name, size)
    page.set_viewport_size(SIZES["desktop"])


def test_a_corrected_fact_is_what_the_next_reply_uses(contexts, fake_llm, celery_worker):  # noqa: F811
    with ThreadPoolExecutor(1) as pool:
        room = pool.submit(long_ask_first_chat, fake_llm).result()
    fake_llm.script(Reply("*Maren trims the wick.* Then we wait."))
    page = sign_in(contexts(), "owner")
    page.set_viewport_size(SIZES["desktop"])
    page.goto(f"/chats/{room.pk}/")
    socket_open(page)

    send(page, "Will the ferry come tonight?")  # messages 14 and 15: the first batch is due
    expect(page.locator("#messages > .message").last).to_contain_text("Then we wait.", timeout=30000)
    prompt = page.locator("#memory-ask")
    expect(prompt).to_be_visible(timeout=15000)
    expect(prompt).to_contain_text("Update memory? 8 new messages")
    both_widths(page, "second-layer-ask")

    fake_llm.script(SCENE, SUMMARY, FACTS)  # the cycle asks in this order
    prompt.get_by_role("button", name="Start now").click()
    panel = page.locator("#memory-run")
    expect(panel).to_be_visible()
    stages = panel.locator("#memory-stages")
    expect(stages).to_contain_text("Summaries", timeout=30000)
    both_widths(page, "second-layer-cycle-running")
    expect(panel.locator("#memory-run-state")).to_have_text("done", timeout=60000)
    expect(stages.locator("li")).to_have_text(["Scene note ✓", "Summaries 1/1", "Facts ✓", "Index ✓"])
    both_widths(page, "second-layer-cycle-done")

    # The fact the Utility model wrote, in the Facts tab of the memory panel; the host corrects it.
    page.goto(f"/chats/{room.pk}/memory/")
    page.get_by_role("link", name="Facts", exact=True).click()
    card = fact_card(page, FACT)
    expect(card.locator(".tag.source")).to_have_text("Utility model")
    expect(card).to_contain_text("About brass key")
    expect(card.get_by_role("link", name="messages 0–7")).to_be_visible()
    both_widths(page, "second-layer-facts", card)
    card.get_by_text("Edit", exact=True).click()
    card.get_by_label("Text").fill(CORRECTED)
    card.get_by_role("button", name="Save").click()
    expect(page.locator("ul.flash li")).to_contain_text("The fact is now yours")
    expect(fact_card(page, CORRECTED).locator(".tag.yours")).to_have_text("Yours")
    expect(fact_card(page, FACT)).to_have_count(0)
    both_widths(page, "second-layer-fact-yours", fact_card(page, CORRECTED))

    # The next reply recalls the corrected fact: the first messages are out of the prompt.
    fake_llm.script(Reply("*Maren lifts the fog bell.* Here."))
    page.goto(f"/chats/{room.pk}/")
    socket_open(page)
    send(page, "Where did she put the brass key?")
    reply = page.locator("#messages > .message").last
    expect(reply).to_contain_text("Here.", timeout=30000)
    expect(reply).not_to_have_class("streaming", timeout=20000)
    reply.hover()
    reply.get_by_role("button", name="Context used").click()
    used = reply.get_by_role("region", name="Context used")
    expect(used).to_contain_text(CORRECTED)
    expect(used).not_to_contain_text(FACT)
    expect(used).to_contain_text("messages 0–7")  # their summary: they are out of the prompt
    both_widths(page, "second-layer-context-used", used.locator(".context-used-head"))
    sent = str(fake_llm.requests[-1].body["messages"])  # what the Chat model was given
    assert CORRECTED in sent and FACT not in sent
