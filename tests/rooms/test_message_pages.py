"""Earlier (and later) messages load a page at a time: /chats/<id>/messages/?before=N or ?after=N."""

from __future__ import annotations

import re

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.urls import reverse

from bench import kit
from rooms.models import Variant
from rooms.views import MESSAGES_PAGE
from tests.factories import client_for, join, make_user

pytestmark = pytest.mark.django_db


def fill(room, count: int) -> None:
    kit.bulk_history(room, range(1, count + 1), text_for=lambda seq: f"Line {seq}.", tokens=5)


def seqs(html: str) -> list[int]:
    return [int(seq) for seq in re.findall(r'<li id="m-\d+"[^>]*data-seq="(\d+)"', html)]


def untokened(response) -> str:
    """The page without its CSRF tokens, which are masked afresh for every response."""
    html = re.sub(r'"X-CSRFToken": "[^"]*"', "", response.content.decode())
    return re.sub(r'name="csrfmiddlewaretoken" value="[^"]*"', "", html)


def messages(client, room, **query):
    return client.get(reverse("rooms:messages", args=[room.pk]), query)


def test_a_page_is_the_fifty_messages_before_n_oldest_first(room, host):
    fill(room, 120)
    response = messages(client_for(host), room, before=100)
    assert response.status_code == 200
    assert seqs(response.content.decode()) == list(range(100 - MESSAGES_PAGE, 100))
    assert (response["X-Earlier"], response["X-Later"]) == ("1", "1")


def test_the_first_page_ends_at_message_zero_and_says_nothing_is_earlier(room, host):
    fill(room, 120)
    response = messages(client_for(host), room, before=30)
    assert seqs(response.content.decode()) == list(range(30))
    assert response["X-Earlier"] == "0"


def test_after_n_gives_the_next_page_and_says_when_it_reaches_the_newest(room, host):
    fill(room, 120)
    client = client_for(host)
    middle = messages(client, room, after=10)
    assert seqs(middle.content.decode()) == list(range(11, 11 + MESSAGES_PAGE))
    assert middle["X-Later"] == "1"
    last = messages(client, room, after=100)
    assert seqs(last.content.decode()) == list(range(101, 121))
    assert last["X-Later"] == "0"


def test_without_a_seq_it_is_the_newest_page(room, host):
    fill(room, 120)
    response = messages(client_for(host), room)
    assert seqs(response.content.decode()) == list(range(121 - MESSAGES_PAGE, 121))
    assert (response["X-Earlier"], response["X-Later"]) == ("1", "0")


def test_gaps_left_by_deleted_messages_still_give_a_full_page(room, host):
    fill(room, 120)
    room.messages.filter(seq__range=(60, 79)).delete()
    got = seqs(messages(client_for(host), room, before=100).content.decode())
    assert got == list(range(30, 60)) + list(range(80, 100))


def test_an_outsider_gets_the_same_404_as_for_the_room_page(client, room, host):
    fill(room, 10)
    client.force_login(make_user(actor=host, username="outsider"))
    refused = messages(client, room, before=5)
    page = client.get(reverse("rooms:room", args=[room.pk]))
    missing = messages(client, type(room)(pk=room.pk + 1000), before=5)
    assert refused.status_code == page.status_code == missing.status_code == 404
    assert untokened(refused) == untokened(page) == untokened(missing)


def test_a_member_gets_what_the_room_page_gives_them_and_no_recorded_prompt(room, host):
    fill(room, 120)
    Variant.objects.filter(room=room).update(prompt=[{"role": "system", "content": "HOST-ONLY PROMPT"}])
    member = make_user(actor=host, username="member")
    join(room, member)
    client = client_for(member)
    html = untokened(messages(client, room, before=100))
    assert "HOST-ONLY PROMPT" not in html
    page = untokened(client.get(reverse("rooms:room", args=[room.pk]) + "?at=60"))
    # The same partials, in the same form, as the room page shows this member for those messages.
    first = page.index('<li id="m-', page.index('id="messages"'))
    ours = html.strip()
    assert ours.split('<li id="m-')[1:40] == page[first:].split('<li id="m-')[1:40]


def test_a_page_of_a_long_chat_reads_by_seq_range_without_offset(room, host):
    fill(room, 10_000)
    client = client_for(host)
    messages(client, room, before=9_000)  # the session's first request does more: not measured
    with CaptureQueriesContext(connection) as queries:
        response = messages(client, room, before=5_000)
    assert seqs(response.content.decode()) == list(range(5_000 - MESSAGES_PAGE, 5_000))
    reads = [q["sql"] for q in queries.captured_queries if "rooms_message" in q["sql"]]
    assert reads and not any("OFFSET" in sql.upper() for sql in reads)
    assert len(queries) <= 12
