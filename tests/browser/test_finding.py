"""Starting and finding chats in the browser: New group chat, the chat list's last lines."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
from playwright.sync_api import expect

from tests.browser.looks import SCREENSHOTS, SIZES

pytestmark = pytest.mark.browser


def _shoot(page, name: str) -> None:
    for size, viewport in SIZES.items():
        page.set_viewport_size(viewport)
        page.screenshot(path=str(SCREENSHOTS / f"{name}-{size}.png"), full_page=True)


def test_create_a_group_chat_of_two_characters(signed_in_page):
    from orbchat.accounts.models import User
    from orbchat.library import services as library_services
    from rooms import services
    from rooms.models import Room

    page = signed_in_page
    owner = User.objects.get(username="owner")
    library_services.character_create(owner=owner, card={"name": "Quill", "first_mes": "Quill bows low."})
    page.get_by_role("link", name="New group chat").click()
    expect(page.get_by_role("heading", name="New group chat")).to_be_visible()
    page.get_by_label("Maren Tallis").check()
    page.get_by_label("Quill").check()
    page.get_by_label("Who speaks each round").select_option("round_robin")
    page.get_by_label("Title").fill("Lighthouse supper")
    _shoot(page, "group-chat-new")
    page.get_by_role("button", name="Start group chat").click()
    expect(page.get_by_role("heading", name="Lighthouse supper")).to_be_visible()
    chips = page.locator(".seat-chip")
    expect(chips.filter(has_text="Maren Tallis")).to_have_count(1)
    expect(chips.filter(has_text="Quill")).to_have_count(1)
    speakers = page.locator("#messages > .message .speaker")
    expect(speakers).to_have_text(["Maren Tallis", "Quill"])
    _shoot(page, "group-chat-room")
    page.goto("/")
    row = page.locator(".chat-row").filter(has_text="Lighthouse supper")
    expect(row.locator(".chat-last")).to_contain_text("Quill: Quill bows low.")
    room = Room.objects.get(title="Lighthouse supper")
    text = "*Leans in* " + "The lamp keeps turning. " * 12
    # In a thread of its own: the service sends its events through async code, which cannot run
    # in the thread that drives the browser.
    with ThreadPoolExecutor(1) as pool:
        pool.submit(services.message_create, room=room, author=owner, text=text).result()
    page.reload()
    expect(row.locator(".chat-last")).to_contain_text("owner: Leans in The lamp keeps turning.")
    _shoot(page, "chat-list-last-lines")
    width = page.evaluate("document.documentElement.scrollWidth - window.innerWidth")
    assert width <= 0, "the chat list scrolls sideways at phone width"


def test_a_group_chat_of_one_character_is_refused(signed_in_page):
    page = signed_in_page
    page.goto("/chats/new/")
    page.get_by_label("Maren Tallis").check()
    page.get_by_role("button", name="Start group chat").click()
    expect(page.get_by_role("alert")).to_contain_text("Pick at least two characters")
    _shoot(page, "group-chat-refused")
