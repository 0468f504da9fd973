"""Finding and starting chats: the chat list's last lines and the New group chat page."""

from __future__ import annotations

import pytest
from django.urls import reverse

from orbchat.library import services as library_services
from rooms import selectors, services
from rooms.models import Message, Room
from rooms.options import room_options
from rooms.rendering import plain_excerpt
from tests.factories import make_user

pytestmark = pytest.mark.django_db


def make_character(owner, name: str, greeting: str = ""):
    return library_services.character_create(owner=owner, card={"name": name, "first_mes": greeting})


# The chat list's last line ---------------------------------------------------------------------


def test_a_plain_excerpt_drops_macros_and_markup_and_cuts_at_a_word():
    text = "{{random:a,b}}*She smiles* and **waves**. <b>Hello</b> [there](https://x.test) " + "word " * 40
    excerpt = plain_excerpt(text, limit=60)
    assert excerpt.startswith("She smiles and waves. Hello there word")
    assert "{{" not in excerpt and "*" not in excerpt and "<" not in excerpt and "https" not in excerpt
    assert len(excerpt) <= 60 and excerpt.endswith("word…")


def test_each_chat_shows_its_last_visible_line_and_time(signed_in, room, host):
    services.message_create(room=room, author=host, text="The lantern went out at **midnight**")
    hidden = services.message_create(room=room, author=host, text="an aside nobody should read here")
    Message.objects.filter(pk=hidden.pk).update(hidden=True)
    page = signed_in.get(reverse("home")).content.decode()
    assert "The lantern went out at midnight" in page
    assert "an aside nobody should read" not in page
    assert 'class="chat-last-speaker">' in page
    assert "<time" in page


def test_the_last_line_is_escaped(signed_in, room, host):
    services.message_create(room=room, author=host, text="1 &lt; 2 and `<script>alert(1)</script>`")
    page = signed_in.get(reverse("home")).content.decode()
    assert "<script>alert(1)" not in page
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page


def test_the_last_line_is_the_shown_swipe(room, host):
    greeting = room.messages.get()
    index = greeting.variants.count()
    greeting.variants.create(room=room, index=index, text="A second greeting")
    Message.objects.filter(pk=greeting.pk).update(active_index=index)
    rooms = list(selectors.chat_list(user=host))
    assert selectors.chat_last_lines(rooms)[room.pk].text == "A second greeting"


def test_the_chat_list_reads_last_lines_in_a_flat_number_of_queries(
    signed_in, host, character, django_assert_max_num_queries
):
    def count_queries() -> int:
        from django.db import connection
        from django.test.utils import CaptureQueriesContext

        with CaptureQueriesContext(connection) as queries:
            assert signed_in.get(reverse("home")).status_code == 200
        return len(queries)

    room = services.room_create_from_character(host=host, character=character)
    services.message_create(room=room, author=host, text="first room")
    one = count_queries()
    for n in range(19):
        room = services.room_create_from_character(host=host, character=character)
        services.message_create(room=room, author=host, text=f"room {n}")
    with django_assert_max_num_queries(one):
        page = signed_in.get(reverse("home")).content.decode()
    assert page.count('class="chat-last small"') == 20


def test_a_member_sees_the_last_line_of_a_chat_they_joined(room, host):
    from tests.factories import client_for, join

    guest = make_user(actor=host, username="guest")
    join(room, guest)
    services.message_create(room=room, author=host, text="Welcome aboard")
    assert "Welcome aboard" in client_for(guest).get(reverse("home")).content.decode()


# New group chat --------------------------------------------------------------------------------


def test_the_chat_list_links_to_new_group_chat(signed_in):
    page = signed_in.get(reverse("home")).content.decode()
    assert f'href="{reverse("rooms:new")}"' in page and "New group chat" in page


def test_a_group_chat_seats_the_picked_characters_and_each_greets(signed_in, host):
    ann = make_character(host, "Ann", "Hi, I am Ann.")
    bob = make_character(host, "Bob", "Bob here.")
    response = signed_in.post(
        reverse("rooms:new"),
        {"characters": [ann.pk, bob.pk], "title": "", "reply_mode": "narrator", "turn_order": "round_robin"},
    )
    room = Room.objects.get(seats__character=ann)
    assert response["Location"] == reverse("rooms:room", args=[room.pk])
    assert sorted(room.seats.values_list("name", flat=True)) == ["Ann", "Bob"]
    assert room.title == "Ann, Bob"
    greetings = [m.variants.get().text for m in room.messages.order_by("seq")]
    assert greetings == ["Hi, I am Ann.", "Bob here."]
    options = room_options(room)
    assert options.reply_mode == "narrator" and options.turn_order == "round_robin"
    page = signed_in.get(response["Location"]).content.decode()
    assert "Ann" in page and "Bob" in page


def test_a_group_chat_takes_a_title(signed_in, host):
    ann, bob = make_character(host, "Ann"), make_character(host, "Bob")
    signed_in.post(
        reverse("rooms:new"),
        {
            "characters": [ann.pk, bob.pk],
            "title": "Tavern night",
            "reply_mode": "per_speaker",
            "turn_order": "natural",
        },
    )
    assert Room.objects.get(seats__character=ann).title == "Tavern night"


def test_a_group_chat_needs_two_characters(signed_in, host):
    before = Room.objects.count()
    ann = make_character(host, "Ann")
    response = signed_in.post(
        reverse("rooms:new"), {"characters": [ann.pk], "reply_mode": "per_speaker", "turn_order": "natural"}
    )
    assert response.status_code == 200
    assert "Pick at least two characters" in response.content.decode()
    assert Room.objects.count() == before


def test_a_group_chat_refuses_someone_elses_character(signed_in, host):
    before = Room.objects.count()
    other = make_user(actor=host, username="other")
    theirs = make_character(other, "Theirs")
    mine = make_character(host, "Mine")
    response = signed_in.post(
        reverse("rooms:new"),
        {"characters": [mine.pk, theirs.pk], "reply_mode": "per_speaker", "turn_order": "natural"},
    )
    assert response.status_code == 200
    assert "Pick only characters from your own library" in response.content.decode()
    assert Room.objects.count() == before


def test_the_group_chat_service_refuses_a_character_not_owned(host):
    other = make_user(actor=host, username="other")
    with pytest.raises(services.ActionRefused):
        services.room_create_group(
            host=host, characters=[make_character(host, "Mine"), make_character(other, "Theirs")]
        )
    assert not Room.objects.filter(title__contains="Theirs").exists()


def test_the_new_group_chat_page_lists_only_my_characters(signed_in, host):
    other = make_user(actor=host, username="other")
    make_character(other, "Stranger")
    make_character(host, "Mine")
    page = signed_in.get(reverse("rooms:new")).content.decode()
    assert "Mine" in page and "Stranger" not in page


def test_the_new_group_chat_page_needs_a_sign_in(client, host):
    response = client.get(reverse("rooms:new"))
    assert response.status_code == 302 and reverse("accounts:login") in response["Location"]


def test_a_group_chat_with_no_character_picked_says_so(signed_in):
    response = signed_in.post(reverse("rooms:new"), {"reply_mode": "per_speaker", "turn_order": "natural"})
    assert "Pick at least two characters" in response.content.decode()
