"""The host edits the scene note at the head of the Memory panel, reads the chat's facts, filters
them, edits one (it becomes yours) and restores a corrected one. At desktop and phone width, with
screenshots for a reviewer."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
from django.db import connection
from playwright.sync_api import expect

from memory.services import facts as fact_services
from memory.services import scene
from rooms import services as room_services
from tests.browser.looks import SCREENSHOTS
from tests.browser.test_rooms import contexts, sign_in  # noqa: F401 - fixtures
from tests.factories import make_owner
from tests.memory.conftest import story_room

pytestmark = pytest.mark.browser

KEY = "Maren keeps the brass key in the tide ledger."
OLD = "The Traveller promised Maren to return by dawn."
NEW = "The Traveller promised Maren to return before the storm."
EDITED = "Maren hid the brass key under the fog bell."


def room_with_facts():
    try:
        owner = make_owner(username="owner")
        room = room_services.room_create_from_character(host=owner, character=owner.characters.get())
        story_room(room, 30)
        fact_services.fact_create(
            room=room,
            text=KEY,
            category="discovery",
            subjects=["Maren", "brass key"],
            confidence=0.7,
            first_seq=3,
            last_seq=5,
            source="model",
        )
        old = fact_services.fact_create(
            room=room,
            text=OLD,
            category="promise",
            subjects=["Traveller", "Maren"],
            confidence=0.5,
            first_seq=10,
            last_seq=10,
            source="extractor",
        ).fact
        fact_services.fact_correct(fact=old, text=NEW, source="model")
        cold = fact_services.fact_create(
            room=room, text="Harrow distrusts the ferryman.", category="relationship", source="model"
        ).fact
        fact_services.facts_set_heat(heats={cold.pk: 0.2})
        scene.scene_note_edit(
            room=room,
            note=scene.clean_note(
                where="the lighthouse lamp room",
                who="Maren, Traveller",
                when="dusk, the night of the storm",
                open_threads="the missing ledger page\nwho rang the fog bell",
            ),
        )
        return room
    finally:
        connection.close()


def fact_card(page, text: str):
    return page.locator("article.fact-card").filter(has=page.locator(".fact-text", has_text=text))


@pytest.mark.parametrize("size", [(1366, 900), (390, 844)], ids=["desktop", "phone"])
def test_host_filters_edits_and_restores_facts(contexts, size):  # noqa: F811
    with ThreadPoolExecutor(1) as pool:
        room = pool.submit(room_with_facts).result()
    page = sign_in(contexts(), "owner")
    page.set_viewport_size({"width": size[0], "height": size[1]})
    name = "desktop" if size[0] > 800 else "phone"
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)

    page.goto(f"/chats/{room.pk}/memory/")
    note = page.locator(".scene-note")
    expect(note).to_contain_text("the lighthouse lamp room")
    expect(note).to_contain_text("who rang the fog bell")
    note.get_by_text("Edit the scene note").click()
    note.get_by_label("Where").fill("the cellar under the lighthouse " * 3)
    page.screenshot(path=str(SCREENSHOTS / f"memory-scene-edit-{name}.png"), full_page=True)
    note.get_by_role("button", name="Save the scene note").click()
    expect(page.locator(".scene-note .field-errors")).to_have_text(
        "The scene note's where is 95 characters; at most 80."
    )
    page.locator(".scene-note").get_by_label("Where").fill("the cellar under the lighthouse")
    page.locator(".scene-note").get_by_role("button", name="Save the scene note").click()
    expect(page.locator("ul.flash li")).to_contain_text("Scene note saved")
    expect(page.locator(".scene-note")).to_contain_text("the cellar under the lighthouse")
    page.goto(f"/chats/{room.pk}/memory/")
    page.get_by_role("link", name="Facts", exact=True).click()
    expect(page.locator(".memory-tabs a[aria-current=page]")).to_have_text("Facts")
    expect(page.locator("article.fact-card")).to_have_count(3)
    key = fact_card(page, KEY)
    expect(key.locator(".tag.source")).to_have_text("Utility model")
    expect(key).to_contain_text("About Maren, brass key")
    expect(key.get_by_role("link", name="messages 3–5")).to_be_visible()
    expect(fact_card(page, "Harrow distrusts").locator(".tag.heat")).to_have_text("Cold 0.20")
    fact_card(page, NEW).get_by_text("Correction chain · 2 versions").click()
    expect(fact_card(page, NEW).locator(".fact-chain li").first).to_contain_text(OLD)
    page.screenshot(path=str(SCREENSHOTS / f"memory-facts-{name}.png"), full_page=True)

    # Filter by category, then by heat.
    page.locator("form.filters").get_by_label("Category").select_option("promise")
    page.get_by_role("button", name="Show").click()
    expect(page.locator("article.fact-card .fact-text")).to_have_text([NEW])
    page.locator("form.filters").get_by_label("Category").select_option("")
    page.locator("form.filters").get_by_label("Heat").select_option("cold")
    page.get_by_role("button", name="Show").click()
    expect(page.locator("article.fact-card .fact-text")).to_have_text(["Harrow distrusts the ferryman."])
    page.locator("form.filters").get_by_label("Heat").select_option("all")
    page.get_by_role("button", name="Show").click()

    # Edit: the fact becomes yours.
    key = fact_card(page, KEY)
    key.get_by_text("Edit", exact=True).click()
    key.get_by_label("Text").fill(EDITED)
    page.screenshot(path=str(SCREENSHOTS / f"memory-facts-edit-{name}.png"), full_page=True)
    key.get_by_role("button", name="Save").click()
    expect(page.locator("ul.flash li")).to_contain_text("The fact is now yours")
    edited = fact_card(page, EDITED)
    expect(edited.locator(".tag.yours")).to_have_text("Yours")
    expect(edited).to_contain_text("Confidence 0.70")  # as the form kept it

    # Restore the corrected version: it is the active one again, the correction corrected.
    page.locator("form.filters").get_by_label("Status").select_option("superseded")
    page.get_by_role("button", name="Show").click()
    old = fact_card(page, OLD)
    expect(old.locator(".tag.status")).to_have_text("Corrected")
    old.get_by_role("button", name="Restore").click()
    expect(page.locator("ul.flash li")).to_contain_text("Fact restored")
    expect(page.locator("article.fact-card .fact-text")).to_have_text([NEW])
    page.locator("form.filters").get_by_label("Status").select_option("active")
    page.get_by_role("button", name="Show").click()
    expect(fact_card(page, OLD)).to_have_count(1)
    expect(fact_card(page, NEW)).to_have_count(0)
    page.screenshot(path=str(SCREENSHOTS / f"memory-facts-restored-{name}.png"), full_page=True)

    # The tier map's facts row.
    page.goto(f"/chats/{room.pk}/memory/map/")
    expect(page.locator(".tier-map-rows li")).to_have_text(["Facts"])
    expect(page.locator(".tier-map-svg rect.fact-tick")).to_have_count(2)  # the two tied to messages
    page.screenshot(path=str(SCREENSHOTS / f"memory-facts-map-{name}.png"), full_page=True)
