"""The Corpus in the browser: search past scenes and memories of the rooms one hosts, open one,
jump into the chat at that moment; never a room one is only a member of."""

from __future__ import annotations

import re
from concurrent.futures import ThreadPoolExecutor

import pytest
from django.db import connection
from playwright.sync_api import expect

from memory.services import catch_up as passes
from rooms import services as room_services
from rooms.models import Message, Room
from tests.browser.test_rooms import contexts, sign_in  # noqa: F401 - fixtures
from tests.factories import join, make_owner, make_user
from tests.memory.conftest import story_room

pytestmark = pytest.mark.browser

LIE = "That night Maren lied to the customs officer about the brass key; she swore it was lost at sea."
QUERY = "the night she lied about the key"


def rooms_for_reader():
    """ "reader" hosts two rooms (the lie is told in the first) and is only a member of a third,
    hosted by "owner", where the same lie is told word for word."""
    try:
        owner = make_owner(username="owner")
        reader = make_user(actor=owner, username="reader")
        told = room_services.room_create_from_character(host=reader, character=reader.characters.get())
        other = room_services.room_create_from_character(host=reader, character=reader.characters.get())
        foreign = room_services.room_create_from_character(host=owner, character=owner.characters.get())
        for room, title in ((told, "Harbour nights"), (other, "Lighthouse days"), (foreign, "Owner's saga")):
            Room.objects.filter(pk=room.pk).update(title=title)
        story_room(told, 48, plant={21: LIE})
        story_room(other, 48)
        story_room(foreign, 48, plant={21: LIE})
        for room in (told, other, foreign):
            passes.catch_up(room.pk)
        join(foreign, reader)
        return told.pk, other.pk, foreign.pk
    finally:
        connection.close()


def rewind(room_id: int, seq: int) -> None:
    try:
        room_services.message_delete(message=Message.objects.get(room_id=room_id, seq=seq), and_after=True)
    finally:
        connection.close()


def test_reader_searches_both_targets_jumps_into_the_chat_and_never_sees_a_room_they_do_not_host(
    contexts,  # noqa: F811
):
    with ThreadPoolExecutor(1) as pool:
        told, other, foreign = pool.submit(rooms_for_reader).result()
    page = sign_in(contexts(), "reader")
    page.get_by_role("link", name="Corpus").click()
    expect(page.get_by_role("heading", name="Corpus")).to_be_visible()
    expect(page.get_by_role("combobox", name="Room")).not_to_contain_text("Owner's saga")

    # Scenes: the lie is found in the room the reader hosts, never in the one they only joined.
    page.get_by_label("Describe the moment").fill(QUERY)
    page.get_by_role("button", name="Search").click()
    hits = page.locator("ol.hits > li")
    expect(hits.first).to_contain_text("Harbour nights")
    expect(hits.first).to_contain_text("messages 16–23")
    expect(hits.first).to_contain_text(re.compile(r"match \d+%"))
    expect(hits.first.locator("mark").first).to_be_visible()
    expect(page.locator("ol.hits")).not_to_contain_text("Owner's saga")
    assert {int(r) for r in hits.evaluate_all("els => els.map(e => e.dataset.room)")} <= {told, other}

    # Memories: the summaries, the same scope.
    page.get_by_text("Memories", exact=True).click()
    page.get_by_role("button", name="Search").click()
    expect(page.get_by_role("heading", name="Memories")).to_be_visible()
    expect(page.locator("ol.hits > li").first).to_contain_text(re.compile(r"tier \d memory"))
    expect(page.locator("ol.hits")).not_to_contain_text("Owner's saga")
    memory_hits = page.locator("ol.hits > li")
    assert {int(r) for r in memory_hits.evaluate_all("els => els.map(e => e.dataset.room)")} <= {told, other}

    # Open the scene, then the chat at that very message.
    page.get_by_text("Scenes", exact=True).click()
    page.get_by_role("button", name="Search").click()
    results_url = page.url
    page.locator("ol.hits > li").first.get_by_role("link").click()
    expect(page.locator(".transcript li.moment")).to_contain_text("#21")
    expect(page.locator(".transcript li.moment")).to_contain_text("lied to the customs officer")
    page.get_by_role("link", name="Open in chat at this moment").click()
    moment = page.locator("li.message.at-moment")
    expect(moment).to_have_attribute("data-seq", "21")
    expect(moment).to_be_in_viewport()
    expect(moment).to_contain_text("lied to the customs officer")

    # The messages are rewound away while the results are open: the result now says so and
    # offers the chat.
    page.goto(results_url)
    with ThreadPoolExecutor(1) as pool:
        pool.submit(rewind, told, 16).result()
    page.locator("ol.hits > li").first.get_by_role("link").click()
    expect(page.get_by_text("These messages no longer exist in the chat")).to_be_visible()
    page.get_by_role("link", name="Open chat").click()
    expect(page.get_by_role("heading", name="Harbour nights")).to_be_visible()

    # Nor can the room they only joined be opened through the Corpus by address.
    assert page.goto(f"/corpus/scenes/{foreign}/2/").status == 404
