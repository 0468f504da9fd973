"""The host of a chat whose memory the built-in summariser wrote has it rewritten by their Utility model."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
from django.db import connection
from playwright.sync_api import expect

from memory.services import catch_up as passes
from orbchat.connections import services as connection_services
from rooms import services as room_services
from tests.browser.looks import SCREENSHOTS
from tests.browser.test_rooms import contexts, sign_in  # noqa: F401 - fixtures
from tests.factories import make_owner
from tests.memory.conftest import story_room

pytestmark = pytest.mark.browser


def imported_then_connected(fake_llm):
    """A long chat whose memory was built with no model; then its host connects one as Utility."""
    try:
        owner = make_owner(username="owner")
        connection_services.connection_create(
            owner=owner, name="Fake", provider="local", model="fake-model", api_base=fake_llm.base_url
        )
        room = room_services.room_create_from_character(host=owner, character=owner.characters.get())
        story_room(room, 80)
        passes.catch_up(room.pk)
        connection_services.model_roles_utility_from_chat(user=owner)
        return room
    finally:
        connection.close()


@pytest.mark.parametrize("size", [(1280, 800), (360, 640)], ids=["desktop", "phone"])
def test_the_panel_offers_the_rewrite_and_starts_it(contexts, fake_llm, size):  # noqa: F811
    with ThreadPoolExecutor(1) as pool:
        room = pool.submit(imported_then_connected, fake_llm).result()
    host = sign_in(contexts(), "owner")
    host.set_viewport_size({"width": size[0], "height": size[1]})
    host.goto(f"/chats/{room.pk}/memory/")
    offer = host.locator(".memory-rewrite")
    expect(offer).to_contain_text("of this chat's summaries were written by the built-in summariser.")
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    host.screenshot(path=str(SCREENSHOTS / f"memory-rewrite-{size[0]}.png"))
    offer.get_by_role("button", name="Rewrite them with Fake").click()
    expect(host.get_by_text("in the background")).to_be_visible()
    expect(host).to_have_url(f"{host.url.split('/chats/')[0]}/chats/{room.pk}/memory/")
    expect(host.locator(".memory-rewrite .backfill")).to_be_visible()
    host.screenshot(path=str(SCREENSHOTS / f"memory-rewrite-started-{size[0]}.png"))
