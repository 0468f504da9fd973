"""Handing a room to another host moves the room, not the old host's private things."""

from __future__ import annotations

import pytest
from django.urls import reverse

from orbchat.connections import services as connection_services
from orbchat.library import services as library_services
from rooms import members, selectors, services
from rooms.prompting import TurnContext, plan_turn
from rooms.turns.context import begin
from tests.factories import client_for, join, make_user

pytestmark = pytest.mark.django_db

CARD_SECRET = "SECRET-CARD-Veyra-was-born-in-the-salt-mines"
BOOK_SECRET = "SECRET-LORE-the-lighthouse-key-is-under-the-third-stone"
ROOM_BOOK_SECRET = "SECRET-ROOM-LORE-the-ferryman-is-a-spy"


def reply(room) -> None:
    variant, _ = begin(room.pk, "reply", room.seats.get().pk)
    services.turn_finish(
        variant_id=variant.pk,
        text="The lamp turns.",
        state=variant.State.DONE,
        finish_reason="stop",
        error="",
        prompt_tokens=None,
        completion_tokens=None,
        first_token_at=None,
    )


@pytest.fixture
def handed_off(host, fake_llm):
    """A room whose old host ran a turn with a private card and books, then handed it to `heir`."""
    connection_services.connection_create(
        owner=host, name="Fake", provider="local", model="fake-model", api_base=fake_llm.base_url
    )
    character = library_services.character_create(
        owner=host,
        card={
            "name": "Veyra",
            "description": CARD_SECRET,
            "character_book": {
                "entries": [{"keys": ["lighthouse"], "content": BOOK_SECRET, "enabled": True}]
            },
        },
    )
    room = services.room_create_from_character(host=host, character=character)
    room_book = library_services.worldbook_create_from_data(
        owner=host,
        data={"name": "Harbour", "entries": [{"uid": 0, "keys": ["ferry"], "content": ROOM_BOOK_SECRET}]},
    )
    room.world_books.add(room_book)
    services.message_create(room=room, author=host, text="Tell me about the lighthouse and the ferry.")
    reply(room)  # the old host's turn: its prompt is recorded
    assert CARD_SECRET in str(selectors.last_prompt(room))
    heir = make_user(actor=host, username="heir")
    connection_services.connection_create(
        owner=heir, name="Fake", provider="local", model="fake-model", api_base=fake_llm.base_url
    )
    join(room, heir)
    members.host_offer(room=room, user_id=heir.pk)
    members.host_accept(room=room, user=heir)
    room.refresh_from_db()
    return room, heir


def test_the_new_hosts_preview_shows_nothing_of_the_old_hosts_card_books_or_prompts(handed_off):
    room, heir = handed_off
    page = client_for(heir).get(reverse("rooms:preview", args=[room.pk]))
    assert page.status_code == 200
    text = page.content.decode()
    assert "Veyra" in text  # the character keeps its seat and its name
    for secret in (CARD_SECRET, BOOK_SECRET, ROOM_BOOK_SECRET):
        assert secret not in text
    assert "No AI turn yet." in text  # the last turn sent was the old host's


def test_the_new_hosts_turn_sends_only_what_is_theirs(handed_off):
    room, heir = handed_off
    plan = plan_turn(turn=TurnContext.of(room), seat=room.seats.get())
    sent = str(plan.prompt.messages)
    assert "Veyra" in sent and "lighthouse" in sent  # the transcript moves with the room
    for secret in (CARD_SECRET, BOOK_SECRET, ROOM_BOOK_SECRET):
        assert secret not in sent


def test_the_old_host_keeps_their_card_and_books(handed_off, host):
    room, _ = handed_off
    assert host.characters.get(name="Veyra").description == CARD_SECRET
    assert set(host.world_books.values_list("name", flat=True)) >= {"Harbour", "Veyra's lorebook"}
    assert not room.world_books.exists()


def test_a_new_hosts_own_turn_shows_in_their_preview(handed_off):
    room, heir = handed_off
    reply(room)
    text = client_for(heir).get(reverse("rooms:preview", args=[room.pk])).content.decode()
    assert "No AI turn yet." not in text and CARD_SECRET not in text
