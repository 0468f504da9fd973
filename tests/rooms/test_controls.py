"""The chat page's controls: the host changes a setting or a few at once, each validated as on
the settings page; a member may change only the persona they write as; bad input changes nothing."""

from __future__ import annotations

import pytest
from django.urls import reverse

from orbchat.library import services as library_services
from rooms import services
from rooms.models import Member, Room
from rooms.options import room_options
from tests.factories import client_for, join, make_user

pytestmark = pytest.mark.django_db


@pytest.fixture
def member(host, room):
    user = make_user(actor=host, username="wren")
    join(room, user)
    return user


def controls(client, room, **fields):
    """Post `fields` to the room's controls, each named in a `field` entry, as the drawer does."""
    data = {"field": list(fields), **fields}
    return client.post(reverse("rooms:controls", args=[room.pk]), data)


def fresh(room) -> Room:
    return Room.objects.get(pk=room.pk)


def test_the_host_changes_the_persona_the_chat_writes_as(host, room):
    keeper = library_services.persona_create(owner=host, name="Ilse", description="A lighthouse keeper.")
    response = controls(client_for(host), room, persona=keeper.pk)
    assert response.status_code == 200 and response.json() == {"saved": ["persona"]}
    assert services.room_persona(fresh(room)) == keeper


def test_the_host_changes_preset_note_and_world_books_in_one_post(host, room):
    preset = library_services.preset_create(owner=host, name="Terse")
    book = library_services.worldbook_create(owner=host, name="Harbour lore")
    response = controls(
        client_for(host),
        room,
        preset=preset.pk,
        world_books=book.pk,
        authors_note="Keep it short.",
        authors_note_depth="2",
        authors_note_role="user",
    )
    assert response.status_code == 200
    room = fresh(room)
    assert room.preset == preset and list(room.world_books.all()) == [book]
    note = (room.authors_note, room.authors_note_depth, room.authors_note_role)
    assert note == ("Keep it short.", 2, "user")


def test_world_books_posted_empty_take_every_book_off_the_chat(host, room):
    room.world_books.set([library_services.worldbook_create(owner=host, name="Harbour lore")])
    response = client_for(host).post(reverse("rooms:controls", args=[room.pk]), {"field": "world_books"})
    assert response.status_code == 200 and not fresh(room).world_books.exists()


def test_the_host_changes_reply_mode_and_turn_order_and_the_other_options_stay(host, room):
    room.settings = {**room.settings, "auto_turns": 3}
    room.save(update_fields=["settings"])
    response = controls(client_for(host), room, reply_mode="narrator", turn_order="round_robin")
    assert response.status_code == 200
    options = room_options(fresh(room))
    assert (options.reply_mode, options.turn_order, options.auto_turns) == ("narrator", "round_robin", 3)


def test_an_invalid_value_says_what_is_wrong_and_changes_nothing(host, room):
    preset = library_services.preset_create(owner=host, name="Terse")
    before = fresh(room)
    response = controls(
        client_for(host), room, preset=preset.pk, authors_note_depth="-3", reply_mode="shouting"
    )
    assert response.status_code == 400
    errors = response.json()["errors"]
    assert set(errors) == {"authors_note_depth", "reply_mode"}
    assert "greater than or equal to 0" in errors["authors_note_depth"]
    assert "shouting is not one of the available choices" in errors["reply_mode"]
    after = fresh(room)
    assert (after.preset_id, after.authors_note_depth, after.settings) == (
        before.preset_id,
        before.authors_note_depth,
        before.settings,
    )


def test_another_users_persona_is_refused(host, room, member):
    theirs = member.personas.get()
    response = controls(client_for(host), room, persona=theirs.pk)
    assert response.status_code == 400
    assert "not one of the available choices" in response.json()["errors"]["persona"]
    assert fresh(room).persona_id is None


@pytest.mark.parametrize("data", [{}, {"field": "title", "title": "Renamed"}, {"field": "host_id"}])
def test_a_setting_the_controls_do_not_offer_is_refused_in_words(host, room, data):
    response = client_for(host).post(reverse("rooms:controls", args=[room.pk]), data)
    assert response.status_code == 400
    assert response.json()["errors"]["__all__"] == "That setting cannot be changed here."
    assert fresh(room).title == room.title


def test_a_member_gets_403_and_changes_nothing(room, member):
    response = controls(client_for(member), room, persona=member.personas.get().pk, turn_order="everyone")
    assert response.status_code == 403
    after = fresh(room)
    assert after.persona_id is None and room_options(after).turn_order == "natural"


def test_an_archived_room_refuses_its_controls(host, room):
    Room.objects.filter(pk=room.pk).update(archived_at="2026-01-01T00:00Z")
    response = controls(client_for(host), room, turn_order="everyone")
    assert response.status_code == 403 and room_options(fresh(room)).turn_order == "natural"


def test_the_room_page_gives_the_host_the_controls_and_a_member_only_their_persona(host, room, member):
    host_page = client_for(host).get(reverse("rooms:room", args=[room.pk])).content.decode()
    assert 'id="controls-drawer"' in host_page
    assert reverse("rooms:controls", args=[room.pk]) in host_page
    assert 'name="authors_note"' in host_page and 'name="world_books"' in host_page
    member_page = client_for(member).get(reverse("rooms:room", args=[room.pk])).content.decode()
    assert 'id="controls-drawer"' in member_page
    assert reverse("rooms:controls", args=[room.pk]) not in member_page
    assert reverse("rooms:member_persona", args=[room.pk]) in member_page
    for host_only in ('name="preset"', 'name="authors_note"', 'name="reply_mode"', 'name="world_books"'):
        assert host_only not in member_page


def test_a_member_sets_their_persona_from_the_drawer(room, member):
    mine = library_services.persona_create(owner=member, name="Wren the cartographer")
    url = reverse("rooms:member_persona", args=[room.pk])
    client = client_for(member)
    response = client.post(url, {"persona": mine.pk}, headers={"Accept": "application/json"})
    assert response.status_code == 200 and response.json() == {"saved": ["persona"]}
    assert Member.objects.get(room=room, user=member).persona == mine
    response = client.post(url, {"persona": "999999"}, headers={"Accept": "application/json"})
    assert response.status_code == 400
    assert response.json()["errors"]["persona"] == "Choose one of your personas."
    assert Member.objects.get(room=room, user=member).persona == mine
