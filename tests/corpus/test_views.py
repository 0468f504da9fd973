"""The Corpus pages around search: transcript windows, the way back into a chat, readiness."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from memory.models import Scene
from memory.services import catch_up as passes
from memory.services import person
from rooms import services as room_services
from rooms.models import Message
from tests.factories import client_for, join, make_user
from tests.memory.conftest import story_room


@pytest.fixture
def people(host, room):
    member = make_user(actor=host, username="member")
    join(room, member)
    return {"member": member, "outsider": make_user(actor=host, username="outsider")}


@pytest.fixture
def built(room):
    story_room(room, 40)
    passes.catch_up(room.pk)
    return room


def test_a_scene_window_shows_its_messages_and_a_few_around_with_numbers_and_speakers(host, built):
    scene = Scene.objects.get(room=built, block=2)
    page = client_for(host).get(reverse("corpus:scene", args=[built.pk, 2]))
    assert page.status_code == 200
    lines = page.context["window"]["lines"]
    assert [line["seq"] for line in lines] == list(range(scene.seq_from - 3, scene.seq_to + 4))
    assert [line["seq"] for line in lines if line["inside"]] == list(range(16, 24))
    html = page.content.decode()
    assert "#16</span> <strong>Maren Tallis</strong>" in html
    assert (
        f'href="/chats/{built.pk}/?at=16"' in html
    )  # Open in chat at this moment (the first, with no query)


def test_open_in_chat_lands_on_the_message_that_best_matches_the_search(host, built):
    page = client_for(host).get(reverse("corpus:scene", args=[built.pk, 2]), {"q": "the missing tide ledger"})
    assert page.context["window"]["moment"] == 19  # "…the tide ledger is missing its last page."
    assert f'href="/chats/{built.pk}/?at=19"' in page.content.decode()


def test_the_corpus_never_shows_a_room_one_does_not_host(host, built, people):
    for who in (people["member"], people["outsider"]):
        assert client_for(who).get(reverse("corpus:scene", args=[built.pk, 2])).status_code == 404
        summary = built.summaries.first()
        assert client_for(who).get(reverse("corpus:memory", args=[summary.pk])).status_code == 404
        form = client_for(who).get(reverse("corpus:explore")).context["form"]
        assert built not in form.fields["room"].queryset


def test_a_scene_whose_messages_were_rewound_says_so_and_offers_the_chat(host, built):
    room_services.message_delete(message=Message.objects.get(room=built, seq=16), and_after=True)
    page = client_for(host).get(reverse("corpus:scene", args=[built.pk, 2]))
    assert page.status_code == 200
    html = page.content.decode()
    assert "These messages no longer exist in the chat" in html
    assert f'href="/chats/{built.pk}/"' in html and "?at=" not in html


def test_a_forgotten_memory_says_so_and_offers_the_chat(host, built):
    summary = built.summaries.filter(tier=0).first()
    person.memory_forget(room=built, summary_id=summary.pk)
    page = client_for(host).get(reverse("corpus:memory", args=[summary.pk]) + f"?room={built.pk}")
    assert page.status_code == 200
    assert "This memory no longer exists" in page.content.decode()


def test_a_memory_page_shows_its_text_tier_block_and_transcript(host, built):
    summary = built.summaries.get(tier=0, block=1)
    page = client_for(host).get(reverse("corpus:memory", args=[summary.pk]))
    html = page.content.decode()
    assert "Tier 0 · block 1 · messages 8–15" in html and summary.text.splitlines()[0] in html
    assert [line["seq"] for line in page.context["window"]["lines"] if line["inside"]] == list(range(8, 16))


def test_open_in_chat_lands_on_that_message_with_later_ones_left_for_later(host, room):
    story_room(room, 400)
    page = client_for(host).get(reverse("rooms:room", args=[room.pk]) + "?at=50")
    html = page.content.decode()
    seqs = [int(seq) for seq in re.findall(r'<li id="m-\d+"[^>]*data-seq="(\d+)"', html)]
    assert seqs[0] == 40 and 50 in seqs
    assert 'data-at="50"' in html
    assert seqs[-1] < 399
    assert 'data-earlier="1"' in html and 'data-later="1"' in html  # both load as the reader scrolls
    assert "You are reading the past" in html


def test_open_in_chat_at_a_deleted_message_says_it_is_gone(host, room):
    story_room(room, 40)
    Message.objects.filter(room=room, seq=20).delete()
    html = client_for(host).get(reverse("rooms:room", args=[room.pk]) + "?at=20").content.decode()
    assert "Message #20 no longer exists" in html
    assert "data-at=" not in html


def test_a_room_never_indexed_is_listed_with_a_build_button(host, room):
    story_room(room, 40)  # memory never ran: imported, or memory was off
    page = client_for(host).get(reverse("corpus:explore"))
    waiting = page.context["waiting"]
    assert [(r.room, r.state) for r in waiting] == [(room, "not indexed")]
    html = page.content.decode()
    assert "not indexed yet" in html
    assert reverse("memory:backfill", args=[room.pk]) in html


def test_an_indexed_room_is_not_listed_as_waiting(host, built):
    assert client_for(host).get(reverse("corpus:explore")).context["waiting"] == []


def test_dates_in_the_wrong_order_are_refused_with_a_message(host, built):
    page = client_for(host).get(
        reverse("corpus:explore"), {"q": "key", "date_from": "2026-05-02", "date_to": "2026-05-01"}
    )
    assert "The end date comes before the start date." in page.content.decode()
    assert page.context["results"] is None
