"""The chat controls where you chat: a drawer at the side on a desktop (1366×900), a sheet along
the bottom on a phone (390×844). A change applies at once, and the next reply is written with it;
Esc gives the composer back. Screenshots of the open drawer for a reviewer."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
from django.db import connection
from playwright.sync_api import expect

from orbchat.accounts.models import User
from orbchat.connections import services as connection_services
from orbchat.library import services as library_services
from rooms import services
from tests.browser.looks import SCREENSHOTS, SIZES
from tests.factories import PASSWORD, join, make_owner, make_user
from tests.fakes.llm import Reply

pytestmark = pytest.mark.browser

KEEPER = "Ilse Varga"
KEEPER_DESCRIPTION = "A lighthouse keeper who counts the ships that pass the point."


@pytest.fixture
def tab(browser, live_site, transactional_db, size):
    """The owner signed in, in a tab of `size`; a phone tab has a touch screen and no hover."""
    phone = size == "phone"
    context = browser.new_context(base_url=live_site, viewport=SIZES[size], has_touch=phone, is_mobile=phone)
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


def owner_room(fake_llm):
    """The owner's chat with the starter character on the fake provider, and a second persona.
    Made in a thread of its own: the services send their events through async code, which
    cannot run in the thread that drives the browser."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(_owner_room, fake_llm).result()


def _owner_room(fake_llm):
    try:
        owner = User.objects.get(username="owner")
        connection_services.connection_create(
            owner=owner, name="Fake", provider="local", model="fake-model", api_base=fake_llm.base_url
        )
        library_services.persona_create(owner=owner, name=KEEPER, description=KEEPER_DESCRIPTION)
        return services.room_create_from_character(host=owner, character=owner.characters.get())
    finally:
        connection.close()


def send(page, text: str) -> None:
    page.get_by_label("Your message").fill(text)
    page.get_by_role("button", name="Send").click()


def prompts(fake_llm) -> list[str]:
    """The text of every chat prompt the provider received, oldest first."""
    chats = [r for r in fake_llm.requests if r.path.rstrip("/").endswith("/chat/completions")]
    return ["\n".join(m["content"] for m in r.body["messages"]) for r in chats]


def inside_viewport(page, locator) -> bool:
    box, view = locator.bounding_box(), page.viewport_size
    return (
        box["x"] >= 0
        and box["y"] >= 0
        and box["x"] + box["width"] <= view["width"] + 0.5
        and (box["y"] + box["height"] <= view["height"] + 0.5)
    )


def test_the_persona_changed_mid_chat_writes_the_next_reply(tab, fake_llm, size):
    page = tab
    room = owner_room(fake_llm)
    fake_llm.script(Reply("*Maren nods.* Welcome."), Reply("*Maren squints.* The keeper, is it?"))
    page.goto(f"/chats/{room.pk}/")
    expect(page.locator(".room")).to_have_attribute("data-socket", "open")
    send(page, "Good evening.")
    expect(page.locator("#messages > .message").last).to_contain_text("Welcome.", timeout=20000)
    expect(page.locator(".message.streaming")).to_have_count(0, timeout=20000)
    assert KEEPER not in prompts(fake_llm)[-1]

    toggle = page.get_by_role("button", name="Chat controls", exact=True)
    toggle.click()
    drawer = page.locator("#controls-drawer")
    expect(drawer).to_be_visible()
    expect(toggle).to_have_attribute("aria-expanded", "true")
    assert inside_viewport(page, drawer)
    expect(drawer.get_by_role("link", name="Members and seats")).to_be_visible()
    persona = drawer.get_by_label("Persona")
    persona.select_option(label=KEEPER)
    expect(drawer.locator('[data-field="persona"] .control-status')).to_have_text("Saved")

    # A bad value is refused beside its field, and nothing of it is saved.
    depth = drawer.get_by_label("Author's note depth")
    depth.fill("-2")
    depth.press("Tab")
    expect(drawer.locator('[data-field="authors_note_depth"] .control-status')).to_have_text(
        "Ensure this value is greater than or equal to 0."
    )
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    drawer.get_by_label("Author's note depth").scroll_into_view_if_needed()
    page.screenshot(path=str(SCREENSHOTS / f"controls-drawer-{size}.png"))

    composer = page.locator("#composer")
    if size == "desktop":
        # The chat makes room for the drawer: the composer stays in sight and usable.
        assert composer.bounding_box()["x"] + composer.bounding_box()["width"] <= drawer.bounding_box()["x"]
    page.keyboard.press("Escape")
    expect(drawer).to_be_hidden()
    expect(toggle).to_have_attribute("aria-expanded", "false")
    expect(composer).to_be_visible()
    assert inside_viewport(page, composer)

    send(page, "Do you know who I am?")
    expect(page.locator(".message.human").last.locator(".speaker")).to_have_text(KEEPER)
    expect(page.locator("#messages > .message").last).to_contain_text("The keeper, is it?", timeout=20000)
    prompt = prompts(fake_llm)[-1]
    assert KEEPER in prompt and KEEPER_DESCRIPTION in prompt
    room.refresh_from_db()
    assert room.authors_note_depth == 4  # the refused depth was never saved

    page.reload()  # the change was saved, not only shown
    toggle.click()
    expect(page.locator("#controls-drawer").get_by_label("Persona")).to_have_value(str(room.persona_id))


def _member_joins(room, *, username: str, persona: str) -> None:
    try:
        member = make_user(actor=room.host, username=username)
        library_services.persona_create(owner=member, name=username, is_default=True)
        library_services.persona_create(owner=member, name=persona)
        join(room, member)
    finally:
        connection.close()


def test_a_member_picks_the_persona_they_write_as_and_sees_no_host_controls(
    browser, live_site, tab, fake_llm, size
):
    room = owner_room(fake_llm)
    with ThreadPoolExecutor(1) as pool:
        pool.submit(_member_joins, room, username="wren", persona="Wren the Cartographer").result()
    phone = size == "phone"
    context = browser.new_context(base_url=live_site, viewport=SIZES[size], has_touch=phone, is_mobile=phone)
    context.set_default_timeout(15000)
    try:
        page = context.new_page()
        page.goto("/login/")
        page.get_by_label("Username").fill("wren")
        page.get_by_label("Password").fill(PASSWORD)
        page.get_by_role("button", name="Sign in").click()
        page.goto(f"/chats/{room.pk}/")
        expect(page.locator(".room")).to_have_attribute("data-socket", "open")
        page.get_by_role("button", name="Chat controls", exact=True).click()
        drawer = page.locator("#controls-drawer")
        expect(drawer).to_be_visible()
        assert inside_viewport(page, drawer)
        expect(drawer.get_by_label("Preset")).to_have_count(0)
        expect(drawer.get_by_label("Author's note")).to_have_count(0)
        drawer.get_by_label("Write as").select_option(label="Wren the Cartographer")
        expect(drawer.locator('[data-field="persona"] .control-status')).to_have_text("Saved")
        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        page.screenshot(path=str(SCREENSHOTS / f"controls-drawer-member-{size}.png"))
        drawer.get_by_role("button", name="Close chat controls").click()
        expect(drawer).to_be_hidden()
        send(page, "Morning, all.")
        expect(page.locator(".message.human").last.locator(".speaker")).to_have_text("Wren the Cartographer")
    finally:
        context.close()
