"""The host's brain-icon popover says why nothing was recalled and offers the Chat model for memory."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
from django.db import connection
from playwright.sync_api import expect

from orbchat.connections import services as connection_services
from rooms import services as room_services
from tests.browser.test_rooms import contexts, send, sign_in, socket_open  # noqa: F401 - fixtures
from tests.factories import make_owner
from tests.fakes.llm import Reply

pytestmark = pytest.mark.browser


def young_room(fake_llm):
    try:
        owner = make_owner(username="owner")
        connection_services.connection_create(
            owner=owner, name="Fake", provider="local", model="fake-model", api_base=fake_llm.base_url
        )
        return room_services.room_create_from_character(host=owner, character=owner.characters.get())
    finally:
        connection.close()


def test_the_popover_says_why_and_fits_a_phone_screen(contexts, fake_llm):  # noqa: F811
    with ThreadPoolExecutor(1) as pool:
        room = pool.submit(young_room, fake_llm).result()
    fake_llm.script(Reply("*Maren nods.* Welcome.", token_delay=0.01))
    host = sign_in(contexts(), "owner")
    host.set_viewport_size({"width": 360, "height": 640})
    host.goto(f"/chats/{room.pk}/")
    socket_open(host)
    send(host, "Hello, lighthouse keeper.")
    expect(host.locator("#memory-icon")).to_have_attribute("data-state", "done", timeout=20000)
    host.locator("#memory-icon").click()
    popover = host.get_by_role("dialog", name="Memory")
    expect(popover).to_contain_text("Nothing recalled: no summaries yet (first at message 16).")
    expect(popover).to_contain_text("written by the built-in summariser")
    box = popover.bounding_box()
    assert box["x"] >= 0 and box["x"] + box["width"] <= 360

    popover.get_by_role("button", name="Use my Chat model for memory").click()
    expect(host.get_by_text("Fake now writes your memory summaries.")).to_be_visible()
    host.locator("#memory-icon").click()
    expect(host.get_by_role("dialog", name="Memory")).not_to_contain_text("built-in summariser")
