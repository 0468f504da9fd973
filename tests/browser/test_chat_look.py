"""A chat that looks like one: avatars and coloured names per speaker, your own messages told
apart, a compact action bar on hover or focus (a ⋯ menu and long press on touch), swipe arrows
and keyboard shortcuts, the recall panel inside the window, and no page wider than a phone.
At desktop (1366×900) and phone (390×844) width, with screenshots for a reviewer."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
from django.db import connection
from playwright.sync_api import expect

from orbchat.accounts.models import User
from orbchat.connections import services as connection_services
from orbchat.library import services as library_services
from rooms import services
from rooms.models import Message, Presence, Seat, Variant
from tests.browser.looks import SCREENSHOTS, SIZES
from tests.factories import PASSWORD, make_owner
from tests.fakes.llm import Reply

pytestmark = pytest.mark.browser

SECOND = "Teague"


@pytest.fixture
def tab(browser, live_site, transactional_db, size):
    """The owner signed in, in a tab of `size`; a phone tab has a touch screen and no hover."""
    phone = size == "phone"
    # The device prefers dark: the site follows it until the account picks a theme.
    context = browser.new_context(
        base_url=live_site, viewport=SIZES[size], has_touch=phone, is_mobile=phone, color_scheme="dark"
    )
    context.set_default_timeout(15000)
    make_owner(username="owner")
    page = context.new_page()
    page.goto("/login/")
    page.get_by_label("Username").fill("owner")
    page.get_by_label("Password").fill(PASSWORD)
    page.get_by_role("button", name="Sign in").click()
    expect(page.get_by_role("heading", name="Chats", exact=True)).to_be_visible()
    yield page
    context.close()


def shot(page, name: str, size: str) -> None:
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"look-{name}-{size}.png"))


def group_room(fake_llm):
    """The owner's chat with Maren and Teague: the greeting, the owner's line, Teague's reply.
    Made in a thread of its own: the services send their events through async code, which
    cannot run in the thread that drives the browser."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(_group_room, fake_llm).result()


def _group_room(fake_llm):
    try:
        return _make_group_room(fake_llm)
    finally:
        connection.close()


def _make_group_room(fake_llm):
    owner = User.objects.get(username="owner")
    connection_services.connection_create(
        owner=owner, name="Fake", provider="local", model="fake-model", api_base=fake_llm.base_url
    )
    room = services.room_create_from_character(host=owner, character=owner.characters.get())
    teague = library_services.character_create(
        owner=owner, card={"name": SECOND, "description": "A boatman.", "first_mes": "Tide's turning."}
    )
    seat = Seat.objects.create(room=room, character=teague, name=SECOND)
    Presence.objects.create(seat=seat, joined_seq=1)
    services.message_create(room=room, author=owner, text="Good evening, both of you.")
    reply = Message.objects.create(
        room=room, seq=2, kind=Message.Kind.CHARACTER, seat=seat, speaker_name=SECOND
    )
    Variant.objects.create(message=reply, room=room, index=0, text="*Teague nods.* Evening.")
    room.next_seq = 3
    room.save(update_fields=["next_seq"])
    return room


def open_room(page, room) -> None:
    page.goto(f"/chats/{room.pk}/")
    expect(page.locator(".room")).to_have_attribute("data-socket", "open")


def no_sideways_scroll(page) -> bool:
    return page.evaluate("() => document.documentElement.scrollWidth <= document.documentElement.clientWidth")


def send(page, text: str) -> None:
    page.get_by_label("Your message").fill(text)
    page.get_by_role("button", name="Send").click()


def test_each_speaker_has_an_avatar_and_a_coloured_name_and_yours_are_told_apart(tab, fake_llm, size):
    page = tab
    open_room(page, group_room(fake_llm))
    messages = page.locator("#messages > .message")
    expect(messages).to_have_count(3)
    greeting, mine, teague = messages.nth(0), messages.nth(1), messages.nth(2)
    expect(greeting.locator(".speaker")).to_have_text("Maren Tallis")
    expect(teague.locator(".speaker")).to_have_text(SECOND)
    # Maren's card picture loads as her avatar; Teague has none: his initial on his colour.
    expect(greeting.locator(".avatar img")).to_be_visible()
    assert greeting.locator(".avatar img").evaluate("img => img.complete && img.naturalWidth > 1")
    expect(teague.locator(".avatar")).to_be_visible()
    expect(teague.locator(".avatar-initial")).to_have_text("T")
    colour = teague.locator(".speaker").evaluate("el => getComputedStyle(el).color")
    assert colour == teague.locator(".avatar").evaluate("el => getComputedStyle(el).backgroundColor")
    assert colour != greeting.locator(".speaker").evaluate("el => getComputedStyle(el).color")
    # The owner's own message: marked as theirs and set apart from the others.
    assert "mine" in mine.get_attribute("class")
    expect(mine.locator(".speaker")).to_be_visible()
    assert mine.evaluate("el => getComputedStyle(el).backgroundColor") != teague.evaluate(
        "el => getComputedStyle(el).backgroundColor"
    )
    assert no_sideways_scroll(page)
    shot(page, "group-chat", size)


def test_the_action_bar_shows_on_hover_or_focus_and_the_rare_actions_sit_in_the_menu(tab, fake_llm, size):
    page = tab
    open_room(page, group_room(fake_llm))
    reply = page.locator("#messages > .message").last
    bar = reply.locator(".message-actions")
    edit = reply.get_by_role("button", name="Edit")
    more = reply.get_by_role("button", name="More actions")
    fork = reply.get_by_role("button", name="Fork here")
    expect(fork).to_be_hidden()
    if size == "desktop":
        page.mouse.move(5, 5)
        expect(bar).to_have_css("opacity", "0")
        reply.hover()
        expect(bar).to_have_css("opacity", "1")
        page.mouse.move(5, 5)
        expect(bar).to_have_css("opacity", "0")
        page.locator("#messages > .message").nth(1).locator("[data-action=copy]").focus()
        page.keyboard.press("Tab")
        expect(page.locator("#messages > .message").nth(1).locator(".message-actions")).to_have_css(
            "opacity", "1"
        )
        more.click()
    else:
        # No hover on a touch screen: the ⋯ stays in sight, the rest waits for it or a long press.
        expect(more).to_be_visible()
        expect(edit).to_be_hidden()
        box = reply.locator(".text").bounding_box()
        x, y = box["x"] + 10, box["y"] + box["height"] / 2
        reply.locator(".text").dispatch_event(
            "pointerdown", {"pointerType": "touch", "clientX": x, "clientY": y}
        )
        page.wait_for_timeout(700)
        reply.locator(".text").dispatch_event("pointerup", {"pointerType": "touch"})
    expect(fork).to_be_visible()
    expect(reply.get_by_role("button", name="Delete from here")).to_be_visible()
    expect(edit).to_be_visible()
    expect(bar).to_have_css("opacity", "1")
    shot(page, "message-menu", size)
    page.keyboard.press("Escape")
    expect(fork).to_be_hidden()


def overlaps(a: dict, b: dict) -> bool:
    return not (
        a["x"] + a["width"] <= b["x"]
        or b["x"] + b["width"] <= a["x"]
        or a["y"] + a["height"] <= b["y"]
        or b["y"] + b["height"] <= a["y"]
    )


@pytest.mark.parametrize("size", ["desktop"])
def test_in_a_narrow_window_with_a_mouse_the_action_bar_covers_no_words(tab, fake_llm, size):
    page = tab
    page.set_viewport_size(SIZES["phone"])  # a mouse that hovers, in a window a phone's width
    open_room(page, group_room(fake_llm))
    reply = page.locator("#messages > .message").last
    reply.hover()
    bar = reply.locator(".message-actions")
    expect(bar).to_have_css("opacity", "1")
    for words in (reply.locator(".message-head"), reply.locator(".text")):
        assert not overlaps(bar.bounding_box(), words.bounding_box())
    page.mouse.move(5, 5)
    expect(bar).to_have_css("opacity", "0")
    shot(page, "narrow-window-hover", "narrow")


def test_arrow_keys_swipe_the_last_reply_and_escape_stops_a_streaming_one(tab, fake_llm, size):
    page = tab
    open_room(page, group_room(fake_llm))
    fake_llm.script(
        Reply("Another take on the evening."),
        Reply(" ".join(f"slow{i}" for i in range(300)), token_delay=0.05),
    )
    last = page.locator("#messages > .message").last
    expect(last.locator(".swipe-count")).to_have_text("1/1")
    expect(last.get_by_role("button", name="Next swipe")).to_be_visible()
    page.get_by_label("Your message").focus()
    page.keyboard.press("ArrowRight")  # past the last swipe: a new one is written
    expect(last.locator(".swipe-count")).to_have_text("2/2", timeout=20000)
    expect(page.locator("#messages > .message").last).to_contain_text("Another take on the evening.")
    page.keyboard.press("ArrowLeft")
    expect(page.locator("#messages > .message").last.locator(".swipe-count")).to_have_text("1/2")
    expect(page.locator("#messages > .message").last).to_contain_text("Teague nods.")

    page.keyboard.press("ArrowRight")
    expect(page.locator("#messages > .message").last.locator(".swipe-count")).to_have_text("2/2")
    page.keyboard.press("ArrowRight")  # a third, slow one
    streaming = page.locator(".message.streaming")
    expect(streaming).to_contain_text("slow3", timeout=20000)
    page.keyboard.press("Escape")
    expect(streaming).to_have_count(0, timeout=10000)
    last = page.locator("#messages > .message").last
    expect(last).to_contain_text("stopped")
    expect(last).not_to_contain_text("slow299")


def test_arrow_up_edits_your_last_message_and_escape_or_cancel_puts_it_back(tab, fake_llm, size):
    page = tab
    open_room(page, group_room(fake_llm))
    mine = page.locator(".message.mine").last
    composer = page.get_by_label("Your message")
    composer.focus()
    page.keyboard.press("ArrowUp")
    box = mine.locator("textarea.edit-box")
    expect(box).to_be_focused()
    expect(box).to_have_value("Good evening, both of you.")
    box.fill("Changed my mind.")
    page.keyboard.press("Escape")
    expect(box).to_have_count(0)
    expect(mine.locator(".text")).to_have_text("Good evening, both of you.")
    expect(composer).to_be_focused()

    page.keyboard.press("ArrowUp")
    mine.locator("textarea.edit-box").fill("Changed my mind.")
    mine.get_by_role("button", name="Cancel").click()
    expect(mine.locator(".text")).to_have_text("Good evening, both of you.")

    page.keyboard.press("ArrowUp")
    mine.locator("textarea.edit-box").fill("Good evening, Maren.")
    mine.get_by_role("button", name="Save edit").click()
    expect(page.locator(".message.mine").last.locator(".text")).to_have_text("Good evening, Maren.")


def test_on_a_phone_enter_makes_a_new_line_unless_the_setting_says_it_sends(tab, fake_llm, size):
    if size == "desktop":
        pytest.skip("the phone's Enter key")
    page = tab
    room = group_room(fake_llm)
    fake_llm.script(Reply("Noted."), Reply("Noted again."))
    open_room(page, room)
    composer = page.get_by_label("Your message")
    composer.fill("First line")
    composer.press("Enter")
    composer.type("second line")
    expect(composer).to_have_value("First line\nsecond line")
    expect(page.locator(".message.mine")).to_have_count(1)
    composer.press("Control+Enter")
    expect(page.locator(".message.mine")).to_have_count(2)
    expect(page.locator(".message.mine").last).to_contain_text("second line")

    page.goto("/settings/")
    page.get_by_label("Enter sends on a phone").check()
    page.get_by_role("button", name="Save appearance").click()
    expect(page.get_by_text("Appearance saved.")).to_be_visible()
    open_room(page, room)
    page.get_by_label("Your message").fill("Sent by Enter")
    page.get_by_label("Your message").press("Enter")
    expect(page.locator(".message.mine").last).to_contain_text("Sent by Enter")


def test_theme_and_text_size_follow_the_accounts_settings(tab, fake_llm, size):
    page = tab
    page.goto("/settings/")
    html = page.locator("html")
    expect(html).to_have_attribute("data-theme", "system")
    dark_bg = page.evaluate("() => getComputedStyle(document.body).backgroundColor")
    normal = page.evaluate("() => parseFloat(getComputedStyle(document.documentElement).fontSize)")
    page.get_by_label("Theme").select_option("light")
    page.get_by_label("Text size").select_option("larger")
    page.get_by_role("button", name="Save appearance").click()
    expect(page.get_by_text("Appearance saved.")).to_be_visible()
    expect(html).to_have_attribute("data-theme", "light")
    expect(html).to_have_attribute("data-text-size", "larger")
    assert page.evaluate("() => getComputedStyle(document.body).backgroundColor") != dark_bg
    assert (
        page.evaluate("() => parseFloat(getComputedStyle(document.documentElement).fontSize)") > normal * 1.2
    )
    assert no_sideways_scroll(page)
    open_room(page, group_room(fake_llm))
    shot(page, "chat-light", size)
    page.goto("/settings/")
    page.get_by_label("Theme").select_option("dark")
    page.get_by_label("Text size").select_option("normal")
    page.get_by_role("button", name="Save appearance").click()
    expect(html).to_have_attribute("data-theme", "dark")


def test_the_recall_panel_fits_the_window(tab, fake_llm, size):
    page = tab
    room = group_room(fake_llm)
    fake_llm.script(Reply("*Maren nods.* Welcome."), Reply("*Teague shrugs.*"))
    open_room(page, room)
    send(page, "Tell me about the light, " + "and the long winter nights " * 6)
    expect(page.locator("#memory-icon")).to_have_attribute("data-state", "done", timeout=20000)
    expect(page.locator(".message.streaming")).to_have_count(0, timeout=20000)
    page.locator("#memory-icon").click()
    panel = page.get_by_role("dialog", name="Memory")
    expect(panel).to_contain_text("Nothing recalled")
    box = panel.bounding_box()
    view = SIZES[size]
    assert box["x"] >= 0 and box["y"] >= 0
    assert box["x"] + box["width"] <= view["width"] and box["y"] + box["height"] <= view["height"]
    assert no_sideways_scroll(page)
    shot(page, "recall-panel", size)
    page.keyboard.press("Escape")
    expect(panel).to_be_hidden()
    page.locator("#memory-icon").click()
    panel.get_by_role("button", name="Close").click()
    expect(panel).to_be_hidden()


PAGES = {
    "chat-list": "/",
    "characters": "/characters/",
    "personas": "/personas/",
    "presets": "/presets/",
    "world-books": "/worldbooks/",
    "corpus": "/corpus/",
    "settings": "/settings/",
    "connections": "/settings/models/",
}


def test_no_page_scrolls_sideways_and_each_is_photographed(tab, fake_llm, size):
    page = tab
    room = group_room(fake_llm)
    character = User.objects.get(username="owner").characters.order_by("pk").first()
    failures = []
    paths = {**PAGES, "character": f"/characters/{character.pk}/"}
    paths.update(
        {
            "chat": f"/chats/{room.pk}/",
            "people": f"/chats/{room.pk}/people/",
            "memory": f"/chats/{room.pk}/memory/",
        }
    )
    for name, path in paths.items():
        response = page.goto(path, timeout=45000)
        assert response.ok, (path, response.status)
        page.wait_for_load_state("networkidle")
        if not no_sideways_scroll(page):
            failures.append(path)
        shot(page, f"page-{name}", size)
    assert failures == [], f"pages wider than the window at {size}: {failures}"
