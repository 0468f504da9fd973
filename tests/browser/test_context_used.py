"""Context used: the icon on a reply opens what memory sent with it; the host reads the facts and
why each was picked, a member only the counts."""

from __future__ import annotations

from concurrent.futures import ThreadPoolExecutor

import pytest
from django.db import connection
from playwright.sync_api import expect

from memory.models import Fact
from memory.services import catch_up as passes
from memory.services import facts as fact_services
from memory.services import scene
from orbchat.connections import services as connection_services
from rooms import members
from rooms import services as room_services
from rooms.models import Invite
from tests.browser.looks import SCREENSHOTS, SIZES
from tests.browser.test_rooms import contexts, send, sign_in, socket_open  # noqa: F401 - fixtures
from tests.factories import make_owner, make_user
from tests.fakes.llm import Reply
from tests.memory.conftest import story_room
from tests.memory.test_recall_facts import KEY_FACT, SCENE

pytestmark = pytest.mark.browser


def room_with_a_fact(fake_llm):
    """An 80-message story, most of it scrolled out, with a fact and a scene note; shared."""
    try:
        owner = make_owner(username="owner")
        member_user = make_user(actor=owner, username="member")
        connection_services.connection_create(
            owner=owner,
            name="Fake",
            provider="local",
            model="fake-model",
            api_base=fake_llm.base_url,
            context_size=1500,
        )
        room = room_services.room_create_from_character(host=owner, character=owner.characters.get())
        story_room(room, 80)
        passes.catch_up(room.pk)
        fact_services.fact_create(
            room=room,
            text=KEY_FACT,
            category=Fact.Category.DISCOVERY,
            subjects=["brass key"],
            confidence=0.9,
            first_seq=10,
            last_seq=12,
            source=Fact.Source.MODEL,
        )
        scene.scene_note_update(room=room, note=SCENE, source=scene.READER, upto_seq=79)
        invite, token = members.invite_link_create(room=room, by=owner)
        members.invite_accept(
            invite=Invite.objects.get(token_hash=members.token_hash(token)), user=member_user
        )
        return room
    finally:
        connection.close()


def test_the_icon_on_a_reply_shows_the_host_the_fact_sent_and_a_member_the_counts(contexts, fake_llm):  # noqa: F811
    with ThreadPoolExecutor(1) as pool:
        room = pool.submit(room_with_a_fact, fake_llm).result()
    fake_llm.script(Reply("*Maren taps the fog bell.* In here.", token_delay=0.01))
    host = sign_in(contexts(), "owner")
    host.goto(f"/chats/{room.pk}/")
    socket_open(host)
    send(host, "Where did she put the brass key?")
    expect(host.locator("#memory-icon")).to_have_attribute("data-state", "done", timeout=20000)
    reply = host.locator("#messages > .message").last
    expect(reply).to_contain_text("In here.")
    expect(reply).not_to_have_class("streaming", timeout=20000)

    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    for size, viewport in SIZES.items():
        host.set_viewport_size(viewport)
        reply = host.locator("#messages > .message").last
        reply.hover()
        reply.get_by_role("button", name="Context used").click()
        panel = reply.get_by_role("region", name="Context used")
        expect(panel).to_contain_text(KEY_FACT)
        expect(panel).to_contain_text("subject “brass key”")
        expect(panel).to_contain_text("Where: the lighthouse gallery")
        box = panel.bounding_box()
        assert box["x"] >= 0 and box["x"] + box["width"] <= viewport["width"]
        panel.scroll_into_view_if_needed()
        host.screenshot(path=str(SCREENSHOTS / f"context-used-{size}.png"))
        panel.get_by_role("button", name="Close").click()
        expect(panel).to_have_count(0)

    member = sign_in(contexts(), "member")
    member.goto(f"/chats/{room.pk}/")
    socket_open(member)
    reply = member.locator("#messages > .message").last
    reply.hover()
    reply.get_by_role("button", name="Context used").click()
    panel = reply.get_by_role("region", name="Context used")
    expect(panel).to_contain_text("1 fact")
    expect(panel).not_to_contain_text(KEY_FACT)
    expect(panel).not_to_contain_text("score")
