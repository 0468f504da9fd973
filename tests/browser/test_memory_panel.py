"""The Memory panel in the browser: correct and steer what a 600-message story remembers."""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.db import connection
from playwright.sync_api import expect

from memory.services import catch_up as passes
from orbchat.connections import services as connection_services
from rooms import services as room_services
from tests.browser.test_rooms import contexts, send, sign_in, socket_open  # noqa: F401 - fixtures
from tests.factories import make_owner
from tests.fakes.llm import Reply
from tests.memory.conftest import story_room
from tests.memory.test_recaller import varied

pytestmark = pytest.mark.browser

CORRECTION = "Maren swore on the brass key never to light the lamp for the ferryman.\nKeywords: brass key"
ADDED = "Kira promised Aoi she would not make a wish, and broke it the same night."


def room_with_memory(fake_llm):
    """A 600-message room with its memory built, hosted by "owner"."""
    try:
        owner = make_owner(username="owner")
        connection_services.connection_create(
            owner=owner,
            name="Fake",
            provider="local",
            model="fake-model",
            api_base=fake_llm.base_url,
            context_size=4000,
        )
        room = room_services.room_create_from_character(host=owner, character=owner.characters.get())
        story_room(room, 600, plant={seq: varied(seq) for seq in range(600)})
        passes.catch_up(room.pk)
        return room
    finally:
        connection.close()


def card(page, label_pattern: str):
    return page.locator("article.memory-card").filter(
        has=page.get_by_role("heading", name=re.compile(label_pattern))
    )


def test_host_corrects_pins_forgets_adds_generates_and_maps_the_memory(contexts, fake_llm):  # noqa: F811
    with ThreadPoolExecutor(1) as pool:
        room = pool.submit(room_with_memory, fake_llm).result()
    page = sign_in(contexts(), "owner")
    page.goto(f"/chats/{room.pk}/")
    page.get_by_role("link", name="Memory", exact=True).click()
    expect(page.get_by_role("heading", name="Memory", exact=True)).to_be_visible()

    # Edit a tier-0 summary: it becomes "Yours".
    page.goto(f"/chats/{room.pk}/memory/?tier=0")
    target = card(page, r"^Tier 0 · block 40 · messages 320–327$")
    target.get_by_text("Edit", exact=True).click()
    target.get_by_role("textbox").fill(CORRECTION)
    target.get_by_role("button", name="Save").click()
    target = card(page, r"^Tier 0 · block 40 · messages 320–327$")
    expect(target.locator(".tag.yours")).to_have_text("Yours")
    expect(target.locator(".memory-text")).to_contain_text("swore on the brass key")

    # Pin it, and see it in the next reply's Preview, marked as pinned.
    target.get_by_role("button", name="Pin").click()
    expect(card(page, r"^Tier 0 · block 40 ").locator(".tag.pinned")).to_have_text("Pinned")
    fake_llm.script(Reply("*Maren looks at the sea.* The lamp stays dark tonight."))
    page.goto(f"/chats/{room.pk}/")
    socket_open(page)
    send(page, "What about the weather?")
    expect(page.locator("#messages > .message").last).to_contain_text("The lamp stays dark tonight.")
    page.get_by_role("link", name="Preview").click()
    recalled = page.locator("ol.recalled li").filter(has_text="swore on the brass key")
    expect(recalled.first).to_contain_text("pinned")
    expect(recalled.first).to_contain_text("Tier 0 · block 40 · messages 320–327")

    # Forget another: its stretch is reported uncovered, with Rebuild offered.
    page.goto(f"/chats/{room.pk}/memory/?tier=0")
    page.on("dialog", lambda dialog: dialog.accept())
    card(page, r"^Tier 0 · block 45 · messages 360–367$").get_by_role("button", name="Forget").click()
    expect(page.locator("ul.flash li")).to_contain_text("Forgotten: messages 360–367")
    gaps = page.locator(".memory-gaps")
    expect(gaps).to_contain_text("Tier 0 · block 45 · messages 360–367: forgotten.")
    expect(gaps.get_by_role("button", name="Rebuild")).to_be_visible()
    expect(card(page, r"^Tier 0 · block 45 ")).to_have_count(0)

    # Add a memory of one's own.
    page.get_by_text("Add a memory").click()
    page.get_by_label("Text", exact=True).fill(ADDED)
    page.get_by_role("button", name="Add", exact=True).click()
    expect(page.locator("ul.flash li")).to_contain_text("Memory added")
    mine = card(page, r"^Added · the whole story$")
    expect(mine.locator(".memory-text")).to_have_text(ADDED)
    expect(mine.locator(".tag.yours")).to_be_visible()

    # Generate the next memory now, without waiting for its block to fill; then once more.
    page.get_by_role("button", name="Generate next memory now").click()
    expect(page.locator("ul.flash li")).to_contain_text(
        re.compile(r"New memory: Tier 0 · block \d+ · messages \d+–\d+")
    )
    expect(page.locator("ul.flash li")).to_contain_text("Press again to continue")
    page.get_by_role("button", name="Generate next memory now").click()
    expect(page.locator("ul.flash li")).to_contain_text(
        re.compile(r"New memory|Every message before the newest already has a memory")
    )

    # The tier map: tiers as rows, bars over the 600 messages, the corrected one marked.
    page.get_by_role("link", name="Tier map").click()
    expect(page.get_by_role("heading", name="Tier map")).to_be_visible()
    expect(page.locator(".tier-map-rows li")).to_have_text(["Tier 3", "Tier 2", "Tier 1", "Tier 0"])
    bars = page.locator(".tier-map-svg rect.bar")
    assert bars.count() > 90
    expect(page.locator(".tier-map-svg rect.bar.yours.pinned")).to_have_count(1)
    expect(page.locator(".tier-map-svg rect.live")).to_have_count(1)
    assert page.locator(".tier-map-svg rect.bar.recalled").count() >= 1
    box = page.locator(".tier-map-svg rect.bar").first.bounding_box()
    assert box["width"] >= 10  # a tier-0 block stays a readable bar
    page.locator(".tier-map-svg a:has(rect.yours)").click()
    expect(page.get_by_role("heading", name="Tier 0 · block 40 · messages 320–327", level=1)).to_be_visible()
    expect(page.locator(".memory-lines li").first).to_contain_text("#320")
