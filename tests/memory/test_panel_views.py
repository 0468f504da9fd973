"""The Memory panel through the Django test client: what the host and members see and may do.

One long chat (`saga`, 600 messages) is built once for the module: the tests run in a transaction
that is rolled back, so each leaves it as it was. Tests that need memory of their own use small
rooms of the same host.
"""

from __future__ import annotations

import re

import pytest
from django.conf import settings
from django.shortcuts import resolve_url
from django.test import Client
from django.urls import reverse

from memory.models import SHARED, Summary
from memory.recall import recaller
from memory.services import catch_up as passes
from memory.services import person, recall_log
from orbchat.prompting.assemble import default_count_tokens
from rooms import services as room_services
from rooms.models import Room
from tests.factories import client_for, join, make_owner, make_user
from tests.memory.conftest import story_room

pytestmark = pytest.mark.django_db

# The saga's messages 16–23 (tier-0 block 2) all mention the astrolabe.
ASTROLABE = {seq: f"Maren polished the silver astrolabe, turn {seq}." for seq in range(16, 24)}

GETS = ("memory:panel", "memory:summary", "memory:map")
POSTS = ("memory:edit", "memory:pin", "memory:add", "memory:generate", "memory:rebuild", "memory:forget")


def built(room, total: int, **kwargs):
    story_room(room, total, **kwargs)
    passes.catch_up(room.pk)
    return room


def at(room, tier: int, block: int) -> Summary:
    return Summary.objects.get(room=room, scope=SHARED, tier=tier, block=block)


def url(name: str, room, summary: Summary | None = None) -> str:
    if name in ("memory:summary", "memory:edit", "memory:pin", "memory:forget"):
        return reverse(name, args=[room.pk, summary.pk])
    return reverse(name, args=[room.pk])


POST_DATA = {
    "memory:edit": {"text": "Maren hid the astrolabe."},
    "memory:pin": {"pinned": "1"},
    "memory:add": {"text": "The Traveller owes Maren three coins."},
    "memory:generate": {},
    "memory:rebuild": {"seq_from": "0"},
    "memory:forget": {},
}


def statuses(client: Client, room, summary: Summary) -> dict[str, int]:
    """Every Memory panel URL as `client` gets it (the forget last: it deletes the memory)."""
    got = {name: client.get(url(name, room, summary)).status_code for name in GETS}
    for name in POSTS:
        got[name] = client.post(url(name, room, summary), POST_DATA[name]).status_code
    return got


def cards(html: str) -> list[str]:
    """The memory ids of the cards on a page, in order."""
    return re.findall(r'<article class="card memory-card[^"]*" id="memory-(\d+)"', html)


def card(html: str, summary: Summary) -> str:
    start = html.index(f'id="memory-{summary.pk}"')
    return html[start : html.index("</article>", start)]


def page(client: Client, path: str, **params) -> str:
    response = client.get(path, params)
    assert response.status_code == 200
    return response.content.decode()


def flashes(response) -> list[str]:
    return [str(m) for m in response.context["messages"]]


@pytest.fixture(scope="module")
def saga(django_db_setup, django_db_blocker):
    """A 600-message chat with its memory written and indexed, shared by this module's tests."""
    with django_db_blocker.unblock():
        owner = make_owner(username="host")
        room = room_services.room_create_from_character(host=owner, character=owner.characters.get())
        built(room, 600, plant=ASTROLABE)
    yield room
    with django_db_blocker.unblock():
        owner.delete()


@pytest.fixture
def host(db, saga):
    """The saga's host, who also hosts every other room of this module (one owner per site)."""
    return saga.host


@pytest.fixture
def people(host, room):
    member = make_user(actor=host, username="member")
    join(room, member)
    return {"member": member, "outsider": make_user(actor=host, username="outsider")}


@pytest.fixture
def remembered(room):
    """A room with one memory (the host added it) and messages to summarise."""
    story_room(room, 13)
    summary, _ = person.memory_add(room=room, text="Maren fears the fog bell.")
    return room, summary


def share_memory(room) -> None:
    """The host lets members read the room's memory (on a fresh copy: the saga object is shared)."""
    room = Room.objects.get(pk=room.pk)
    room_services.room_update(room=room, settings={**room.settings, "members_see_memory": True})


# The list ---------------------------------------------------------------------------------------


def test_the_panel_lists_each_memory_with_its_label(host, saga):
    html = page(client_for(host), url("memory:panel", saga))
    assert "Tier 3 · block 0 · messages 0–511" in html
    assert "Tier 0 · block 73 · messages 584–591" in html
    assert "Built-in extractive" in card(html, at(saga, 0, 73))


def test_a_memory_the_host_edited_is_labelled_yours(host, room):
    built(room, 24)
    summary = at(room, 0, 1)
    response = client_for(host).post(
        url("memory:edit", room, summary), {"text": "Maren hid the astrolabe."}, follow=True
    )
    assert "Tier 0 · block 1 · messages 8–15 is now yours" in " ".join(flashes(response))
    html = response.content.decode()
    assert '<span class="tag yours">Yours</span>' in card(html, summary)
    assert "Yours" not in card(html, at(room, 0, 0))


def test_searching_the_panel_narrows_the_list_to_matching_memories(host, saga):
    shown = cards(page(client_for(host), url("memory:panel", saga), q="astrolabe"))
    assert str(at(saga, 0, 2).pk) in shown
    assert str(at(saga, 0, 1).pk) not in shown and str(at(saga, 0, 3).pk) not in shown
    assert len(shown) < 10


def test_the_tier_filter_shows_only_that_tier(host, saga):
    shown = cards(page(client_for(host), url("memory:panel", saga), tier=2))
    assert shown == [str(at(saga, 2, block).pk) for block in (3, 2, 1, 0)]


def test_more_than_fifty_memories_continue_on_a_second_page(host, saga):
    client = client_for(host)
    first = page(client, url("memory:panel", saga))
    second = page(client, url("memory:panel", saga), page=2)
    assert len(cards(first)) == 50 and len(cards(second)) == 47
    assert "Page 1 of 2" in first and ">Older</a>" in first
    assert "Tier 0 · block 3 · messages 24–31" in second
    assert "Tier 0 · block 3 · messages 24–31" not in first


# Who may do what --------------------------------------------------------------------------------


def test_the_host_may_open_and_use_every_memory_page(host, remembered):
    room, summary = remembered
    got = statuses(client_for(host), room, summary)
    assert got == {name: 200 for name in GETS} | {name: 302 for name in POSTS}


def test_a_member_is_refused_every_memory_page_while_the_host_keeps_memory_private(people, remembered):
    room, summary = remembered
    got = statuses(client_for(people["member"]), room, summary)
    assert got == {name: 403 for name in GETS + POSTS}


def test_a_member_reads_shared_memory_but_cannot_change_it(people, remembered):
    room, summary = remembered
    share_memory(room)
    got = statuses(client_for(people["member"]), room, summary)
    assert got == {name: 200 for name in GETS} | {name: 403 for name in POSTS}
    summary.refresh_from_db()
    assert summary.text == "Maren fears the fog bell." and not summary.pinned
    assert Summary.objects.filter(room=room).count() == 1


def test_members_see_shared_memory_without_any_editing_controls(host, people, remembered):
    room, summary = remembered
    share_memory(room)
    member = client_for(people["member"])
    for path in (url("memory:panel", room), url("memory:summary", room, summary)):
        html = page(member, path)
        assert "Maren fears the fog bell." in html
        assert f'action="/chats/{room.pk}/memory/' not in html  # not one form that changes memory
        for host_only in (
            "Edit",
            "Pin",
            "Forget",
            "Rebuild from here",
            "Generate next memory now",
            "Not covered",
        ):
            assert f">{host_only}<" not in html, (path, host_only)
    assert "Read only" in page(member, url("memory:panel", room))
    host_sees = page(client_for(host), url("memory:panel", room))
    assert f'action="/chats/{room.pk}/memory/{summary.pk}/forget/"' in host_sees  # the host has them


def test_an_outsider_learns_nothing_of_the_memory_pages(people, remembered):
    room, summary = remembered
    share_memory(room)
    got = statuses(client_for(people["outsider"]), room, summary)
    assert got == {name: 404 for name in GETS + POSTS}


def test_a_visitor_who_is_not_logged_in_is_sent_to_log_in(remembered):
    room, summary = remembered
    visitor = Client()
    login = resolve_url(settings.LOGIN_URL)
    for name in GETS + POSTS:
        response = (visitor.get if name in GETS else visitor.post)(url(name, room, summary))
        assert response.status_code == 302 and response["Location"].startswith(login), name
    assert Summary.objects.filter(room=room).count() == 1


# One memory -------------------------------------------------------------------------------------


def test_a_memory_page_shows_the_messages_it_covers(host, saga):
    html = page(client_for(host), url("memory:summary", saga, at(saga, 0, 1)))
    covered = re.findall(r'<li value="(\d+)">', html)
    assert covered == [str(seq) for seq in range(8, 16)]
    assert "(#8)" in html and "(#15)" in html


def test_an_added_memory_with_no_messages_says_it_is_about_the_whole_story(host, remembered):
    room, summary = remembered
    html = page(client_for(host), url("memory:summary", room, summary))
    assert "Added · the whole story" in html
    assert "about the whole story, not particular messages" in html
    assert '<li value="' not in html


# Refused input ----------------------------------------------------------------------------------


def test_adding_a_memory_over_2000_characters_is_refused_naming_the_limit(host, room):
    response = client_for(host).post(url("memory:add", room), {"text": "x" * 2001}, follow=True)
    assert any("at most 2,000 characters" in text for text in flashes(response))
    assert not Summary.objects.filter(room=room).exists()


def test_saving_an_edit_with_no_text_is_refused_and_keeps_the_text(host, remembered):
    room, summary = remembered
    response = client_for(host).post(url("memory:edit", room, summary), {"text": "   "}, follow=True)
    assert response.status_code == 200
    assert [m.level_tag for m in response.context["messages"]] == ["error"]
    summary.refresh_from_db()
    assert summary.text == "Maren fears the fog bell."


# Forget, rebuild, generate ----------------------------------------------------------------------


def test_a_forgotten_memory_is_listed_under_not_covered_with_a_rebuild_button(host, saga):
    response = client_for(host).post(url("memory:forget", saga, at(saga, 0, 1)), follow=True)
    assert "Forgotten: messages 8–15 now have no tier-0 memory." in " ".join(flashes(response))
    html = response.content.decode()
    start = html.index('<section class="card memory-gaps"')
    gaps = html[start : html.index("</section>", start)]
    assert "Tier 0 · block 1 · messages 8–15: forgotten." in gaps
    assert re.search(
        r'action="/chats/\d+/memory/rebuild/".*name="seq_from" value="8".*name="seq_to" value="15"'
        r".*<button type=\"submit\">Rebuild</button>",
        gaps,
    )


def test_pressing_rebuild_under_not_covered_brings_the_memory_back(host, room):
    built(room, 16)
    client = client_for(host)
    client.post(url("memory:forget", room, at(room, 0, 0)))
    response = client.post(url("memory:rebuild", room), {"seq_from": "0", "seq_to": "7"}, follow=True)
    assert "Rebuilding 1 memory in the background" in " ".join(flashes(response))
    passes.catch_up(room.pk)  # what the worker does next
    html = page(client, url("memory:panel", room))
    assert "Tier 0 · block 0 · messages 0–7" in html and ": forgotten." not in html


def test_generate_next_makes_a_memory_and_asks_to_press_again(host, room):
    story_room(room, 13)
    client = client_for(host)
    response = client.post(url("memory:generate", room), follow=True)
    assert flashes(response) == ["New memory: Tier 0 · block 0 · messages 0–7. Press again to continue."]
    assert cards(response.content.decode()) == [str(at(room, 0, 0).pk)]
    response = client.post(url("memory:generate", room), follow=True)
    assert "Tier 0 · block 1 · messages 8–11" in flashes(response)[0]
    response = client.post(url("memory:generate", room), follow=True)
    assert flashes(response) == ["Every message before the newest already has a memory."]


# The tier map -----------------------------------------------------------------------------------


def bars(html: str) -> dict[int, tuple[str, str]]:
    """Each bar of the map: memory id -> (link, classes)."""
    return {
        int(pk): (href, classes)
        for href, pk, classes in re.findall(
            r'<a href="([^"]+)" data-memory="(\d+)"><rect class="([^"]+)"', html
        )
    }


def test_the_tier_map_of_a_long_chat_draws_a_bar_linking_to_each_shared_memory(host, saga):
    drawn = bars(page(client_for(host), url("memory:map", saga)))
    shared = list(Summary.objects.filter(room=saga, scope=SHARED))
    assert len(shared) == 97 and len(drawn) == 97
    assert {pk: href for pk, (href, _) in drawn.items()} == {
        s.pk: reverse("memory:summary", args=[saga.pk, s.pk]) for s in shared
    }


def last_reply_recalled(room) -> recaller.Outcome:
    """Recall for a reply in the saga and log it, as a turn does."""
    outcome = recaller.recall_for(
        room=room,
        seat=None,
        query_texts=["Where is the silver astrolabe Maren polished?"],
        live_start=592,
        budget=100_000,
        count=default_count_tokens,
    )
    recall_log.log_save(room_id=room.pk, variant_id=None, speaker="Maren Tallis", outcome=outcome)
    return outcome


def test_the_tier_map_marks_what_the_last_reply_recalled(host, saga):
    room = saga
    outcome = last_reply_recalled(room)
    recalled = {
        Summary.objects.get(room=room, scope=s.item.scope, tier=s.item.tier, block=s.item.block).pk
        for s in outcome.kept
    }
    drawn = bars(page(client_for(host), url("memory:map", room)))
    assert recalled
    assert {pk for pk, (_, classes) in drawn.items() if "recalled" in classes.split()} == recalled


def test_a_members_tier_map_shows_no_recall_detail_of_the_last_reply(host, saga):
    member = make_user(actor=host, username="member")
    join(saga, member)
    share_memory(saga)
    assert last_reply_recalled(saga).kept
    html = page(client_for(member), url("memory:map", saga))
    assert bars(html)  # the member does see the memories
    assert not any("recalled" in classes.split() for _, classes in bars(html).values())
    assert '<rect class="live"' not in html


def test_the_tier_map_marks_a_memory_the_host_edited_as_yours(host, room):
    built(room, 24)
    client = client_for(host)
    edited = at(room, 0, 1)
    client.post(url("memory:edit", room, edited), {"text": "Maren hid the astrolabe."})
    drawn = bars(page(client, url("memory:map", room)))
    assert {pk for pk, (_, classes) in drawn.items() if "yours" in classes.split()} == {edited.pk}
