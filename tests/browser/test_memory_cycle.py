"""Ask first, in the browser: a reply makes a batch due, the host is asked "Update memory?",
presses Start now, and watches the cycle (stages, the Utility model's tokens) to its end."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
from django.db import connection
from playwright.sync_api import expect

from memory.models import MemoryTuning, Summary
from orbchat.connections import services as connection_services
from rooms import services as room_services
from tests.browser.looks import SIZES
from tests.browser.test_reading import shot
from tests.browser.test_rooms import contexts, send, sign_in, socket_open  # noqa: F401 - fixtures
from tests.factories import make_owner
from tests.fakes.llm import Reply
from tests.memory.conftest import story_room

pytestmark = pytest.mark.browser

ANSWER = (
    '{"heading": "Maren and the lamp", "facts": ["Maren keeps the light burning until the ferry comes.",'
    ' "The brass key has an anchor on it."], "keywords": ["lamp", "brass key"]}'
)


def ask_first_room(fake_llm):
    """The owner's chat with Maren, 14 messages long, in "ask first"; the fake model chats and
    writes memory."""
    try:
        MemoryTuning.objects.update_or_create(pk=1, defaults={"run_solo": "ask"})
        owner = make_owner(username="owner")
        model = connection_services.connection_create(
            owner=owner, name="Fake", provider="local", model="fake-model", api_base=fake_llm.base_url
        )
        connection_services.model_roles_update(
            user=owner, chat=model, utility=model, embedding=None, rerank_kind="builtin"
        )
        room = room_services.room_create_from_character(host=owner, character=owner.characters.get())
        return story_room(room, 14)
    finally:
        connection.close()


def test_ask_first_then_start_now_shows_the_cycle_to_its_end(contexts, fake_llm, celery_worker, size):  # noqa: F811
    with ThreadPoolExecutor(1) as pool:
        room = pool.submit(ask_first_room, fake_llm).result()
    fake_llm.script(
        Reply("*Maren trims the wick.* Then we wait."),
        Reply('{"where": "the lighthouse", "who": ["Maren"]}'),  # the cycle reads the scene note first
        Reply(ANSWER, token_delay=0.3),  # slow enough to reload the page while it streams
    )
    page = sign_in(contexts(), "owner")
    page.set_viewport_size(SIZES[size])
    page.goto(f"/chats/{room.pk}/")
    socket_open(page)
    prompt = page.locator("#memory-ask")
    expect(prompt).to_be_hidden()

    send(page, "Will the ferry come tonight?")  # messages 14 and 15: block 0 is due
    expect(page.locator("#messages > .message").last).to_contain_text("Then we wait.", timeout=30000)
    expect(prompt).to_be_visible(timeout=15000)
    expect(prompt).to_contain_text("Update memory? 8 new messages")
    shot(page, "memory-ask", size)

    page.reload()  # still asked on reopening
    socket_open(page)
    expect(prompt).to_be_visible()
    assert not Summary.objects.filter(room=room).exists()

    prompt.get_by_role("button", name="Start now").click()
    expect(prompt).to_be_hidden()
    panel = page.locator("#memory-run")
    expect(panel).to_be_visible()
    expect(panel.get_by_role("button", name="Close")).to_be_hidden()  # only once it has ended
    expect(panel.locator("#memory-stages")).to_contain_text("Summaries 0/1", timeout=30000)
    expect(panel.locator("#memory-tokens")).not_to_have_text("0", timeout=30000)
    panel.get_by_text("View live output").click()
    expect(panel.locator("#memory-live-text")).to_contain_text("Maren", timeout=30000)
    shot(page, "memory-cycle-running", size)

    page.reload()  # opened again mid-cycle: the panel as it stands, then live again
    socket_open(page)
    expect(panel).to_be_visible()
    expect(panel.locator("#memory-stages")).to_contain_text("Scene note ✓")
    expect(panel.locator("#memory-stages")).to_contain_text("Summaries 0/1")
    expect(panel.locator("#memory-live-text")).to_contain_text("Maren")

    expect(panel.locator("#memory-run-state")).to_have_text("done", timeout=60000)
    expect(panel.locator("#memory-stages")).to_contain_text("Summaries 1/1")
    expect(panel.locator("#memory-stages")).to_contain_text("Index ✓")
    assert int(panel.locator("#memory-tokens").inner_text()) > 10
    assert float(panel.locator("#memory-speed").inner_text()) > 0
    expect(panel.get_by_role("button", name="Cancel")).to_be_hidden()
    shot(page, "memory-cycle-done", size)
    summary = Summary.objects.get(room=room, tier=0, block=0)
    assert "Maren keeps the light burning" in summary.text

    page.reload()  # the batch is written: no prompt any more
    socket_open(page)
    expect(prompt).to_be_hidden()
