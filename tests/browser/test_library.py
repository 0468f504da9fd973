from __future__ import annotations

import re

import pytest
from playwright.sync_api import expect

from tests.browser.looks import SCREENSHOTS
from tests.library.cards import lorebook, png_card, v2_card

pytestmark = pytest.mark.browser


def test_import_a_card_and_see_its_greeting_and_lorebook(signed_in_page, tmp_path):
    page = signed_in_page
    card = tmp_path / "mira.png"
    card.write_bytes(png_card(v2_card(character_book=lorebook())))
    page.get_by_role("link", name="Characters").click()
    page.get_by_label("Files").set_input_files(str(card))
    page.get_by_role("button", name="Import").click()
    page.get_by_role("link", name="Mira").click()
    expect(page.locator(".greeting")).to_contain_text("Careful—the ink is still wet.")
    page.get_by_role("link", name="Drowned Atlas").click()
    expect(page.get_by_role("link", name="The atlas")).to_be_visible()


def test_reorder_a_presets_sections(signed_in_page):
    page = signed_in_page
    page.get_by_role("link", name="Presets").click()
    page.get_by_role("link", name="OrbChat default").click()
    names = page.locator("#section-list .section-name")
    before = names.all_inner_texts()
    page.get_by_role("button", name=f"Move {before[4]} up").click()
    expect(names.nth(3)).to_have_text(before[4])
    page.reload()
    expect(names.nth(3)).to_have_text(before[4])
    expect(names.nth(4)).to_have_text(before[3])


def test_create_a_world_book_entry_and_see_it_activate(signed_in_page):
    page = signed_in_page
    page.get_by_role("link", name="World books").click()
    page.get_by_label("Name").fill("Beasts")
    page.get_by_role("button", name="Create world book").click()
    page.get_by_role("link", name="New entry").click()
    page.get_by_label("Comment").fill("Dragons")
    page.get_by_label("Keys", exact=True).fill("dragon, wyrm")
    page.get_by_label("Content").fill("Dragons hoard memories, not gold.")
    page.get_by_role("button", name="Save entry").click()
    expect(page.get_by_role("link", name="Dragons")).to_be_visible()
    page.get_by_label("Messages").fill("The innkeeper sighs.\nA wyrm circles the tower.")
    page.get_by_role("button", name="Test activation").click()
    result = page.locator("#try-result")
    expect(result).to_contain_text("Activated (1)")
    expect(result).to_contain_text(re.compile(r"Dragons .*wyrm"))


def test_continue_returns_to_the_chat_new_chat_started(signed_in_page):
    page = signed_in_page
    page.get_by_role("link", name="Characters").click()
    tile = page.locator(".tile").filter(has_text="Maren Tallis")
    expect(tile.get_by_role("link", name="Continue")).to_have_count(0)
    tile.get_by_role("button", name="New chat").click()
    expect(page.locator("#messages > .message").first).to_contain_text("I keep the Light.")
    room_url = page.url
    page.get_by_role("link", name="Characters").click()
    for width, height in ((1366, 900), (390, 844)):
        page.set_viewport_size({"width": width, "height": height})
        page.screenshot(path=str(SCREENSHOTS / f"characters-continue-{width}.png"), full_page=True)
    tile.get_by_role("link", name="Continue").click()
    expect(page).to_have_url(room_url)


def test_duplicate_import_asks(signed_in_page, tmp_path):
    from orbchat.library.models import Character

    page = signed_in_page
    card = tmp_path / "mira.png"
    card.write_bytes(png_card(v2_card()))

    def upload() -> None:
        page.get_by_role("link", name="Characters").click()
        page.get_by_label("Files").set_input_files(str(card))
        page.get_by_role("button", name="Import").click()

    upload()
    expect(page.locator(".results .ok")).to_contain_text("Mira")
    upload()
    question = page.locator(".results .duplicate")
    expect(question).to_contain_text("“Mira” is already in your library — import as a copy, or skip?")
    for width, height in ((1366, 900), (390, 844)):
        page.set_viewport_size({"width": width, "height": height})
        page.screenshot(path=str(SCREENSHOTS / f"import-duplicate-asks-{width}.png"), full_page=True)
    page.set_viewport_size({"width": 1366, "height": 900})
    question.get_by_role("button", name="Skip").click()
    expect(page.locator(".results")).to_contain_text("Skipped mira.png: nothing imported.")
    assert Character.objects.filter(name="Mira").count() == 1
    upload()
    page.locator(".results .duplicate").get_by_role("button", name="Import as a copy").click()
    expect(page.locator(".results .ok")).to_contain_text("Mira")
    assert Character.objects.filter(name="Mira").count() == 2
