"""Continue and New chat on the character list."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from orbchat.library import services as library_services
from rooms import services
from rooms.models import Room
from tests.factories import make_user

pytestmark = pytest.mark.django_db


def continue_href(client) -> str | None:
    page = client.get(reverse("library:characters")).content.decode()
    found = re.search(r'<a class="button primary" href="([^"]+)">Continue</a>', page)
    return found[1] if found else None


def test_no_continue_without_a_chat(signed_in):
    page = signed_in.get(reverse("library:characters")).content.decode()
    assert "New chat" in page and "Continue" not in page


def test_continue_opens_the_latest_chat_alone_with_the_character(signed_in, owner):
    maren = owner.characters.get()
    older = services.room_create_from_character(host=owner, character=maren)
    newer = services.room_create_from_character(host=owner, character=maren)
    services.message_create(room=older, author=owner, text="Back again.")  # most recent activity
    assert continue_href(signed_in) == reverse("rooms:room", args=[older.pk])
    services.message_create(room=newer, author=owner, text="And here.")
    assert continue_href(signed_in) == reverse("rooms:room", args=[newer.pk])


def test_continue_skips_group_chats_and_chats_hosted_by_others(signed_in, owner):
    maren = owner.characters.get()
    solo = services.room_create_from_character(host=owner, character=maren)
    group = services.room_create_from_character(host=owner, character=maren)
    tobin = library_services.character_create(owner=owner, card={"name": "Tobin"})
    services.seat_add(room=group, character=tobin)
    services.message_create(room=group, author=owner, text="Both of you.")
    other = make_user(actor=owner, username="other")
    services.room_create_from_character(host=other, character=other.characters.get())
    assert continue_href(signed_in) == reverse("rooms:room", args=[solo.pk])


def test_new_chat_makes_another_chat_even_when_one_exists(signed_in, owner):
    maren = owner.characters.get()
    first = services.room_create_from_character(host=owner, character=maren)
    response = signed_in.post(reverse("rooms:start", args=[maren.pk]))
    second = Room.objects.exclude(pk=first.pk).get(host=owner)
    assert response.status_code == 302 and response["Location"] == reverse("rooms:room", args=[second.pk])
    assert continue_href(signed_in) == reverse("rooms:room", args=[second.pk])


def test_the_character_page_offers_continue_and_new_chat(signed_in, owner):
    maren = owner.characters.get()
    page = signed_in.get(reverse("library:character", args=[maren.pk])).content.decode()
    assert "New chat" in page and ">Continue<" not in page
    room = services.room_create_from_character(host=owner, character=maren)
    page = signed_in.get(reverse("library:character", args=[maren.pk])).content.decode()
    assert f'href="{reverse("rooms:room", args=[room.pk])}">Continue</a>' in page
