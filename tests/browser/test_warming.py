"""The first minutes after a start: the chat page says the memory model is warming up, and a
reply does not wait for it."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
from django.db import connection
from playwright.sync_api import expect

from memory.services import catch_up as passes
from orbchat.connections import services as connection_services
from rooms import services as room_services
from tests import services
from tests.browser.test_reading import SIZES, shot
from tests.browser.test_rooms import send, sign_in, socket_open
from tests.factories import make_owner
from tests.fakes.llm import Reply
from tests.memory.conftest import story_room

pytestmark = pytest.mark.browser

WARMING = "warming up the memory model…"


def room_with_memory(fake_llm):
    """The owner's 60-message chat with Maren, its memory built."""
    try:
        owner = make_owner(username="owner")
        connection_services.connection_create(
            owner=owner, name="Fake", provider="local", model="fake-model", api_base=fake_llm.base_url
        )
        room = room_services.room_create_from_character(host=owner, character=owner.characters.get())
        story_room(room, 60)
        passes.catch_up(room.pk)
        return room
    finally:
        connection.close()


def test_a_fresh_start_says_the_memory_model_is_warming_up_until_it_is_ready(
    browser, child_env, tmp_path, transactional_db, fake_llm
):
    with ThreadPoolExecutor(1) as pool:
        room = pool.submit(room_with_memory, fake_llm).result()
    fake_llm.script(Reply("*Maren looks up from the ledger.* The fog lifts at dawn.", token_delay=0.01))
    # A web process on a data folder with no exported model: its first start exports it (seconds
    # to a minute), as after an install.
    web, url = services.start_web(tmp_path, {**child_env, "EMBEDDER_DIR": str(tmp_path / "embedder")})
    opened = []
    try:
        pages = {}
        for size, viewport in SIZES.items():
            context = browser.new_context(base_url=url, viewport=viewport)
            context.set_default_timeout(15000)
            opened.append(context)
            pages[size] = sign_in(context, "owner")
            pages[size].goto(f"/chats/{room.pk}/")
            expect(pages[size].get_by_role("status").filter(has_text=WARMING)).to_be_visible()
            shot(pages[size], "chat-warming", size)
        page = pages["desktop"]
        socket_open(page)
        send(page, "Where did we leave the brass key?")
        # The reply goes on without memory after at most two seconds of waiting for the model.
        expect(page.locator("#messages > .message").last).to_contain_text(
            "The fog lifts at dawn.", timeout=15000
        )
        expect(page.get_by_role("status").filter(has_text=WARMING)).to_be_visible()
        # Once the model has loaded, the line goes by itself.
        expect(page.get_by_text(WARMING)).to_have_count(0, timeout=240000)
        page.reload()
        expect(page.locator("#messages > .message").last).to_contain_text("The fog lifts at dawn.")
        assert page.get_by_text(WARMING).count() == 0
    finally:
        for context in opened:
            context.close()
        web.stop()
