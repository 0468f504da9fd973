"""Each person in a room writes as their own persona, with its picture: the host sees a member's
message under the member's persona name and avatar, and a message keeps both when the member
switches to another persona later. At desktop and phone width, with screenshots for a reviewer."""

from __future__ import annotations

import io
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.core.files.base import ContentFile
from django.db import connection
from PIL import Image, ImageDraw
from playwright.sync_api import expect

from orbchat.connections import services as connection_services
from orbchat.library import services as library_services
from rooms import services
from tests.browser.looks import SCREENSHOTS, SIZES
from tests.browser.test_rooms import send, sign_in, socket_open
from tests.factories import join, make_owner, make_user
from tests.fakes.llm import Reply

pytestmark = pytest.mark.browser

STREAM_TIMEOUT = 20000


def portrait(colour: str) -> bytes:
    """A small PNG portrait: a light face on `colour`, so two personas are told apart at a glance."""
    image = Image.new("RGB", (96, 96), colour)
    draw = ImageDraw.Draw(image)
    draw.ellipse((28, 14, 68, 54), fill="#f3d9c4")
    draw.rectangle((22, 58, 74, 96), fill="#f3d9c4")
    out = io.BytesIO()
    image.save(out, format="PNG")
    return out.getvalue()


def persona_with_picture(owner, name: str, colour: str, *, is_default: bool = False):
    persona = library_services.persona_create(owner=owner, name=name, is_default=is_default)
    persona.avatar.save(f"{name.lower()}.png", ContentFile(portrait(colour)))
    return persona


def picture_loaded(message) -> None:
    """The message's avatar is an <img> whose picture loaded (not the initial alone)."""
    img = message.locator(".avatar img")
    expect(img).to_have_count(1)
    img.scroll_into_view_if_needed()
    img.element_handle().wait_for_element_state("visible")
    message.page.wait_for_function("(img) => img.complete && img.naturalWidth > 0", arg=img.element_handle())


def shared_room(fake_llm):
    """The owner's chat with Maren, joined by a member who writes as Wren (and also has Sable).
    Made in a thread of its own: the services send their events through async code, which
    cannot run in the thread that drives the browser."""
    with ThreadPoolExecutor(1) as pool:
        return pool.submit(_shared_room, fake_llm).result()


def _shared_room(fake_llm):
    try:
        owner = make_owner(username="owner")
        connection_services.connection_create(
            owner=owner, name="Fake", provider="local", model="fake-model", api_base=fake_llm.base_url
        )
        member = make_user(actor=owner, username="member")
        persona_with_picture(member, "Wren", "#b0413e", is_default=True)
        persona_with_picture(member, "Sable", "#2f5d8a")
        room = services.room_create_from_character(host=owner, character=owner.characters.get())
        join(room, member)
        return room
    finally:
        connection.close()


def test_the_host_sees_a_members_persona_name_and_picture_and_each_message_keeps_its_own(
    browser, live_site, transactional_db, fake_llm, size
):
    room = shared_room(fake_llm)
    fake_llm.script(Reply('*Maren nods.* "Welcome, Wren."'), Reply('*Maren squints.* "Sable, is it?"'))

    opened = []
    for _ in range(2):
        context = browser.new_context(base_url=live_site, viewport=SIZES[size])
        context.set_default_timeout(15000)
        opened.append(context)
    try:
        host, member = sign_in(opened[0], "owner"), sign_in(opened[1], "member")
        for page in (host, member):
            page.goto(f"/chats/{room.pk}/")
            socket_open(page)

        # The member writes as Wren: the host's page shows Wren's name and picture.
        send(member, "Wren rows in out of the fog.")
        wren = host.locator(".message.human", has_text="Wren rows in out of the fog.")
        expect(wren.locator(".speaker")).to_have_text("Wren")
        picture_loaded(wren)
        expect(host.locator(".message.streaming")).to_have_count(0, timeout=STREAM_TIMEOUT)

        # The member switches to Sable; the next message is Sable's, the earlier one stays Wren's.
        member.get_by_role("link", name="People & seats").click()
        member.get_by_label("Write as").select_option(label="Sable")
        member.get_by_role("button", name="Save", exact=True).click()
        expect(member.get_by_text("Your persona in this room is saved.")).to_be_visible()
        member.goto(f"/chats/{room.pk}/")
        socket_open(member)
        send(member, "Sable steps off the boat.")
        sable = host.locator(".message.human", has_text="Sable steps off the boat.")
        expect(sable.locator(".speaker")).to_have_text("Sable")
        picture_loaded(sable)
        expect(host.locator(".message.streaming")).to_have_count(0, timeout=STREAM_TIMEOUT)

        host.reload()  # what the server renders says the same as what the socket pushed
        socket_open(host)
        wren = host.locator(".message.human", has_text="Wren rows in out of the fog.")
        sable = host.locator(".message.human", has_text="Sable steps off the boat.")
        expect(wren.locator(".speaker")).to_have_text("Wren")
        expect(sable.locator(".speaker")).to_have_text("Sable")
        picture_loaded(wren)
        picture_loaded(sable)
        sources = {m.locator(".avatar img").get_attribute("src") for m in (wren, sable)}
        assert len(sources) == 2  # each message shows the picture of the persona it was written as

        SCREENSHOTS.mkdir(parents=True, exist_ok=True)
        wren.scroll_into_view_if_needed()
        host.screenshot(path=str(SCREENSHOTS / f"personas-host-{size}.png"))
        member.screenshot(path=str(SCREENSHOTS / f"personas-member-{size}.png"))

        # The member has no model of their own: their chat list says the room they joined works.
        member.goto("/")
        notice = member.locator(".notice[role=status]")
        expect(notice).to_contain_text("You can play in the rooms you joined")
        expect(member.locator(".chat-row", has_text="Maren Tallis")).to_contain_text("hosted by owner")
        member.screenshot(path=str(SCREENSHOTS / f"personas-guest-chat-list-{size}.png"))
    finally:
        for context in opened:
            context.close()
