"""Speakers' pictures: everyone in a room sees the seated characters' and the people's avatars;
nobody else does; a speaker without a picture gets a transparent image over their initial."""

from __future__ import annotations

import pytest
from django.core.files.base import ContentFile

from orbchat.library import services as library_services
from orbchat.library.starter import AVATAR_PATH
from rooms import presenters
from rooms.models import Seat
from tests.factories import join, make_user

pytestmark = pytest.mark.django_db


def test_a_member_sees_the_seated_characters_card_picture(client, host, room):
    member = make_user(actor=host, username="member")
    join(room, member)
    client.force_login(member)
    seat = room.seats.get()
    response = client.get(f"/chats/{room.pk}/seats/{seat.pk}/avatar/")
    assert response.status_code == 200
    assert b"".join(response.streaming_content) == AVATAR_PATH.read_bytes()


def test_someone_outside_the_room_gets_no_picture(client, host, room):
    client.force_login(make_user(actor=host, username="stranger"))
    seat = room.seats.get()
    assert client.get(f"/chats/{room.pk}/seats/{seat.pk}/avatar/").status_code == 404
    assert client.get(f"/chats/{room.pk}/people/{host.pk}/avatar/").status_code == 404


def test_a_speaker_without_a_picture_gets_a_transparent_image(client, host, room):
    client.force_login(host)
    bare = Seat.objects.create(room=room, name="Teague")
    response = client.get(f"/chats/{room.pk}/seats/{bare.pk}/avatar/")
    assert response.status_code == 200
    assert response["Content-Type"] == "image/svg+xml"
    assert b"<text" not in response.content and b"<script" not in response.content


def test_a_persons_avatar_is_the_persona_they_write_as_in_the_room(client, host, room):
    member = make_user(actor=host, username="member")
    persona = library_services.persona_create(owner=member, name="Wren", is_default=True)
    persona.avatar.save("wren.png", ContentFile(AVATAR_PATH.read_bytes()))
    join(room, member)
    client.force_login(host)
    response = client.get(f"/chats/{room.pk}/people/{member.pk}/avatar/")
    assert response.status_code == 200 and response["Content-Type"] == "image/png"
    assert client.get(f"/chats/{room.pk}/people/{host.pk}/avatar/")["Content-Type"] == "image/svg+xml"


def test_a_speakers_colour_is_the_same_for_a_name_everywhere():
    assert presenters.speaker_colour("Maren") == presenters.speaker_colour(" maren ")
    colours = {presenters.speaker_colour(name) for name in ["Maren", "Teague", "Wren", "Ann", "Ivo", "Sel"]}
    assert len(colours) > 1 and all(0 <= c < presenters.SPEAKER_COLOURS for c in colours)
