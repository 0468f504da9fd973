"""The brain icon in a shared room: the same count for host and member, the detail for the host."""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.db import connection
from playwright.sync_api import expect

from memory.services import catch_up as passes
from orbchat.connections import services as connection_services
from rooms import members
from rooms import services as room_services
from rooms.models import Invite
from tests.browser.looks import SCREENSHOTS
from tests.browser.test_rooms import contexts, send, sign_in, socket_open  # noqa: F401 - fixtures
from tests.factories import make_owner, make_user
from tests.fakes.llm import Reply
from tests.memory.conftest import story_room
from tests.memory.test_recaller import PLANT_AT, PLANTED, varied

pytestmark = pytest.mark.browser


def shared_room_with_memory(fake_llm):
    """A 450-message room whose memory is built, shared by its host "owner" and a "member"."""
    try:
        owner = make_owner(username="owner")
        member_user = make_user(actor=owner, username="member")
        connection_services.connection_create(
            owner=owner,
            name="Fake",
            provider="local",
            model="fake-model",
            api_base=fake_llm.base_url,
            context_size=4000,
        )
        room = room_services.room_create_from_character(host=owner, character=owner.characters.get())
        story_room(room, 450, plant={seq: varied(seq) for seq in range(450)} | {PLANT_AT: PLANTED})
        passes.catch_up(room.pk)
        invite, token = members.invite_link_create(room=room, by=owner)
        members.invite_accept(
            invite=Invite.objects.get(token_hash=members.token_hash(token)), user=member_user
        )
        return room
    finally:
        connection.close()


def test_host_and_member_see_the_same_count_and_only_the_host_sees_scores(contexts, fake_llm):  # noqa: F811
    # Set up in a plain thread: Playwright's loop owns this one, and the services send room events.
    with ThreadPoolExecutor(1) as pool:
        room = pool.submit(shared_room_with_memory, fake_llm).result()
    fake_llm.script(Reply("*Maren glances at the chapel ruins.* Not here.", token_delay=0.01))

    host = sign_in(contexts(), "owner")
    member = sign_in(contexts(), "member")
    for page in (host, member):
        page.goto(f"/chats/{room.pk}/")
        socket_open(page)
        icon = page.get_by_role("button", name="Memory")
        expect(icon).to_have_attribute("data-state", "idle")  # dimmed: no reply since the page opened

    send(member, "Tell me again about Quillon.")
    counts = []
    for page in (host, member):
        icon = page.locator("#memory-icon")
        expect(icon).to_have_attribute("data-state", "done", timeout=20000)
        counts.append(page.locator("#memory-count").inner_text())
    assert counts[0] == counts[1] and int(counts[0]) >= 1
    expect(host.locator("#messages > .message").last).to_contain_text("Not here.")

    member.locator("#memory-icon").click()
    popover = member.get_by_role("dialog", name="Memory")
    expect(popover).to_contain_text(re.compile(rf"{counts[0]} memor(y|ies) recalled for the last reply"))
    expect(popover).not_to_contain_text("match")
    assert member.locator("#memory-detail").count() == 0  # not even hidden in the page

    host.locator("#memory-icon").click()
    popover = host.get_by_role("dialog", name="Memory")
    expect(popover).to_contain_text("A fresh check with this room's current settings")
    # The count on the icon is summaries and quotes together; the host's detail lists both.
    expect(popover.locator(".memory-kept li, .memory-quotes li")).to_have_count(int(counts[0]))
    expect(popover.locator(".memory-kept li").first).to_contain_text(
        re.compile(r"Tier \d · block \d+ · .* match \d+%")
    )
    expect(popover).to_contain_text("Query: “")
    expect(popover).to_contain_text("Quotes from the past")
    expect(popover.locator(".memory-quotes li").first).to_contain_text(re.compile(r"found by .*, score"))
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    host.screenshot(path=str(SCREENSHOTS / "memory-popover-host-desktop.png"))
