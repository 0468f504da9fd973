"""Facts and the scene note in the Memory panel, through the Django test client: what the host sees
and changes, what members may read, and refused input shown beside its field with nothing saved."""

from __future__ import annotations

import html as html_lib
import re

import pytest
from django.urls import reverse

from memory.models import Fact, RoomMemory, seat_scope
from memory.services import facts as fact_services
from memory.services import scene
from rooms import members
from rooms import services as room_services
from rooms.models import Room
from tests.factories import client_for, join, make_user
from tests.memory.conftest import story_room

pytestmark = pytest.mark.django_db

KEY = "Maren keeps the brass key in the tide ledger."
PROMISE = "The Traveller promised Maren to return before the storm."
COLD = "Harrow distrusts the ferryman."


@pytest.fixture
def facts(room):
    """A room of 30 messages with facts from the Utility model and the built-in extractor, one
    corrected, one cold, one forgotten, one personal to the character."""
    story_room(room, 30)
    seat = room.seats.first()
    key = fact_services.fact_create(
        room=room,
        text=KEY,
        category="discovery",
        subjects=["Maren", "brass key"],
        confidence=0.7,
        first_seq=3,
        last_seq=5,
        source="model",
    ).fact
    promise = fact_services.fact_create(
        room=room,
        text="The Traveller promised Maren to return by dawn.",
        category="promise",
        subjects=["Traveller", "Maren"],
        confidence=0.5,
        first_seq=10,
        last_seq=10,
        source="extractor",
    ).fact
    corrected = fact_services.fact_correct(fact=promise, text=PROMISE, source="model").fact
    cold = fact_services.fact_create(
        room=room, text=COLD, category="relationship", first_seq=12, last_seq=14, source="model"
    ).fact
    fact_services.facts_set_heat(heats={cold.pk: 0.2})
    gone = fact_services.fact_create(
        room=room, text="The lamp is broken.", category="condition", first_seq=7, last_seq=8, source="model"
    ).fact
    fact_services.fact_forget(fact=gone)
    own = fact_services.fact_create(
        room=room,
        scope=seat_scope(seat.pk),
        text="Maren fears the fog bell.",
        category="trait",
        source="model",
    ).fact
    return {"key": key, "old": promise, "promise": corrected, "cold": cold, "gone": gone, "own": own}


@pytest.fixture
def people(host, room):
    member = make_user(actor=host, username="member")
    join(room, member)
    return {"member": member, "outsider": make_user(actor=host, username="outsider")}


def share_memory(room) -> None:
    room = Room.objects.get(pk=room.pk)
    room_services.room_update(room=room, settings={**room.settings, "members_see_memory": True})


def facts_url(room) -> str:
    return reverse("memory:facts", args=[room.pk])


def fact_url(name: str, room, fact: Fact) -> str:
    return reverse(name, args=[room.pk, fact.pk])


def page(client, path: str, **params) -> str:
    response = client.get(path, params)
    assert response.status_code == 200
    return response.content.decode()


def shown(html: str) -> list[int]:
    """The fact ids of the cards on a page, in order."""
    return [int(pk) for pk in re.findall(r'<article class="card fact-card[^"]*" id="fact-(\d+)"', html)]


def card(html: str, fact: Fact) -> str:
    start = html.index(f'id="fact-{fact.pk}"')
    return html[start : html.index("</article>", start)]


def flashes(response) -> list[str]:
    return [str(m) for m in response.context["messages"]]


def field_errors(html: str, form_action: str) -> dict[str, str]:
    """The errors shown beside each field of the form posting to `form_action`: name -> text."""
    start = html.index(f'action="{form_action}"')
    form = html[start : html.index("</form>", start)]
    errors = {}
    for name, error in re.findall(
        r'name="(\w+)"[^>]*>(?:[^<]|<(?!div class="field">))*?'
        r'<div class="field-errors" role="alert">(.*?)</div>',
        form,
        flags=re.S,
    ):
        errors[name] = html_lib.unescape(re.sub(r"<[^>]+>", "", error).strip())
    return errors


# What the host sees --------------------------------------------------------------------------------


def test_the_facts_tab_shows_each_active_fact_with_what_it_is_and_where_it_came_from(host, room, facts):
    html = page(client_for(host), facts_url(room))
    assert 'aria-current="page">Facts</a>' in html
    assert set(shown(html)) == {facts["key"].pk, facts["promise"].pk, facts["cold"].pk, facts["own"].pk}
    key = card(html, facts["key"])
    for words in (KEY, "Discovery", "Utility model", "About Maren, brass key", "Confidence 0.70", "Hot 1.00"):
        assert words in key, words
    assert f'<a href="/chats/{room.pk}/memory/facts/{facts["key"].pk}/">messages 3–5</a>' in key
    assert "Cold 0.20" in card(html, facts["cold"])
    assert "Personal (seat-" in card(html, facts["own"]) and "the whole story" in card(html, facts["own"])


def test_a_corrected_fact_shows_its_correction_chain_oldest_first(host, room, facts):
    html = card(page(client_for(host), facts_url(room)), facts["promise"])
    assert "Correction chain · 2 versions" in html
    chain = html[html.index("<ol>") : html.index("</ol>")]
    assert chain.index("return by dawn") < chain.index("return before the storm")
    assert "Corrected" in chain and "Built-in extractor" in chain


@pytest.mark.parametrize(
    ("params", "expected"),
    [
        ({"category": "promise"}, ["promise"]),
        ({"status": "superseded"}, ["old"]),
        ({"status": "forgotten"}, ["gone"]),
        ({"heat": "cold"}, ["cold"]),
        ({"heat": "hot", "category": "relationship"}, []),
        ({"q": "brass ledger"}, ["key"]),
    ],
)
def test_filters_narrow_the_facts(host, room, facts, params, expected):
    html = page(client_for(host), facts_url(room), **params)
    assert sorted(shown(html)) == sorted(facts[name].pk for name in expected)
    if not expected:
        assert "No fact matches." in html


def test_the_scope_filter_shows_one_characters_own_facts(host, room, facts):
    html = page(client_for(host), facts_url(room), scope=facts["own"].scope)
    assert shown(html) == [facts["own"].pk]
    assert shown(page(client_for(host), facts_url(room), scope="shared")) != []


def test_a_facts_page_lists_the_messages_it_came_from(host, room, facts):
    html = page(client_for(host), fact_url("memory:fact", room, facts["key"]))
    assert re.findall(r'<li value="(\d+)">', html) == ["3", "4", "5"]


# What the host changes ------------------------------------------------------------------------------


def test_editing_a_fact_makes_it_yours(host, room, facts):
    response = client_for(host).post(
        fact_url("memory:fact_edit", room, facts["key"]),
        {
            "text": "Maren hid the brass key under the lamp.",
            "category": "discovery",
            "subjects": "Maren, key",
        },
        follow=True,
    )
    assert "The fact is now yours" in " ".join(flashes(response))
    fact = Fact.objects.get(pk=facts["key"].pk)
    assert (fact.text, fact.source, fact.subjects, fact.confidence) == (
        "Maren hid the brass key under the lamp.",
        "person",
        ["Maren", "key"],
        1.0,
    )
    assert '<span class="tag yours">Yours</span>' in card(response.content.decode(), fact)


def test_pin_unpin_forget_and_restore(host, room, facts):
    client = client_for(host)
    fact = facts["key"]
    client.post(fact_url("memory:fact_pin", room, fact), {"pinned": "1"})
    assert Fact.objects.get(pk=fact.pk).pinned
    client.post(fact_url("memory:fact_pin", room, fact), {"pinned": "0"})
    assert not Fact.objects.get(pk=fact.pk).pinned
    response = client.post(fact_url("memory:fact_forget", room, fact), follow=True)
    assert "Fact forgotten" in flashes(response)[-1]
    assert Fact.objects.get(pk=fact.pk).status == "forgotten"
    assert fact.pk not in shown(response.content.decode())
    forgotten = page(client, facts_url(room), status="forgotten")
    assert f'action="/chats/{room.pk}/memory/facts/{fact.pk}/restore/"' in card(forgotten, fact)
    response = client.post(fact_url("memory:fact_restore", room, fact), follow=True)
    assert "Fact restored" in flashes(response)[-1]
    assert Fact.objects.get(pk=fact.pk).status == "active"


def test_restoring_a_corrected_fact_makes_it_the_active_version_again(host, room, facts):
    client_for(host).post(fact_url("memory:fact_restore", room, facts["old"]))
    assert Fact.objects.get(pk=facts["old"].pk).status == "active"
    assert Fact.objects.get(pk=facts["promise"].pk).status == "superseded"


def test_the_host_adds_a_fact_of_their_own(host, room, facts):
    response = client_for(host).post(
        reverse("memory:fact_add", args=[room.pk]),
        {
            "text": "Kira owes Aoi a wish.",
            "category": "promise",
            "subjects": "Kira, Aoi",
            "first_seq": "20",
            "last_seq": "22",
            "scope": "shared",
            "pinned": "on",
        },
        follow=True,
    )
    assert "Fact added" in flashes(response)[0]
    fact = Fact.objects.get(room=room, text="Kira owes Aoi a wish.")
    assert (fact.source, fact.pinned, fact.first_seq, fact.last_seq, fact.changed_by) == (
        "person",
        True,
        20,
        22,
        host,
    )
    assert fact.pk in shown(response.content.decode())


# Refused input ----------------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("changes", "field", "words"),
    [
        ({"text": "x" * 301}, "text", "at most 300 characters; this one has 301"),
        ({"text": "   "}, "text", "needs some text"),
        ({"first_seq": "5"}, "first_seq", "or neither"),
        ({"first_seq": "5", "last_seq": "99"}, "last_seq", "go up to #29"),
        ({"confidence": "1.5"}, "confidence", "from 0 to 1"),
    ],
)
def test_a_refused_fact_is_explained_beside_its_field_and_nothing_is_saved(
    host, room, facts, changes, field, words
):
    before = Fact.objects.filter(room=room).count()
    data = {"text": "Kira owes Aoi a wish.", "category": "promise", "scope": "shared"} | changes
    response = client_for(host).post(reverse("memory:fact_add", args=[room.pk]), data)
    assert response.status_code == 200
    html = response.content.decode()
    errors = field_errors(html, f"/chats/{room.pk}/memory/facts/add/")
    assert list(errors) == [field] and words in errors[field]
    assert '<details class="card memory-add fact-add" open>' in html
    assert Fact.objects.filter(room=room).count() == before


def test_an_edit_with_no_text_is_refused_beside_the_text_and_keeps_the_fact(host, room, facts):
    fact = facts["key"]
    response = client_for(host).post(
        fact_url("memory:fact_edit", room, fact), {"text": "", "category": "goal"}
    )
    assert response.status_code == 200
    errors = field_errors(response.content.decode(), f"/chats/{room.pk}/memory/facts/{fact.pk}/edit/")
    assert errors == {"text": "A fact needs some text."}
    fact.refresh_from_db()
    assert (fact.text, fact.category, fact.source) == (KEY, "discovery", "model")


def test_adding_the_text_of_a_forgotten_fact_again_asks_to_restore_it(host, room, facts):
    gone = facts["gone"]
    response = client_for(host).post(
        reverse("memory:fact_add", args=[room.pk]),
        {"text": gone.text, "category": "condition", "first_seq": "7", "last_seq": "8", "scope": "shared"},
    )
    errors = field_errors(response.content.decode(), f"/chats/{room.pk}/memory/facts/add/")
    assert f"is forgotten (#{gone.pk}): restore it instead" in errors["text"]


# Who may do what ----------------------------------------------------------------------------------------


def every_fact_post(room, fact: Fact) -> list[tuple[str, dict]]:
    return [
        (reverse("memory:fact_add", args=[room.pk]), {"text": "A member's fact.", "category": "goal"}),
        (fact_url("memory:fact_edit", room, fact), {"text": "Changed by a member.", "category": "goal"}),
        (fact_url("memory:fact_pin", room, fact), {"pinned": "1"}),
        (fact_url("memory:fact_forget", room, fact), {}),
        (fact_url("memory:fact_restore", room, fact), {}),
        (reverse("memory:scene", args=[room.pk]), {"where": "The member's choice"}),
    ]


def test_a_member_is_refused_the_facts_while_the_host_keeps_memory_private(room, facts, people):
    client = client_for(people["member"])
    assert client.get(facts_url(room)).status_code == 403
    assert client.get(fact_url("memory:fact", room, facts["key"])).status_code == 403


def test_a_member_reads_shared_facts_but_changes_nothing(host, room, facts, people):
    share_memory(room)
    client = client_for(people["member"])
    html = page(client, facts_url(room))
    assert facts["key"].pk in shown(html) and facts["own"].pk not in shown(html)  # not the character's own
    assert f'action="/chats/{room.pk}/memory/' not in html
    for host_only in ("Edit", "Pin", "Forget", "Restore", "Add a fact", "Edit the scene note"):
        assert f">{host_only}<" not in html, host_only
    assert client.get(fact_url("memory:fact", room, facts["own"])).status_code == 404
    before = list(Fact.objects.filter(room=room).values_list("pk", "text", "status", "pinned"))
    for path, data in every_fact_post(room, facts["gone"]):
        assert client.post(path, data).status_code == 403, path
    assert list(Fact.objects.filter(room=room).values_list("pk", "text", "status", "pinned")) == before
    assert not RoomMemory.objects.filter(room=room, scene_note_source="person").exists()


def test_an_outsider_learns_nothing_of_the_facts(room, facts, people):
    share_memory(room)
    client = client_for(people["outsider"])
    assert client.get(facts_url(room)).status_code == 404
    assert client.get(fact_url("memory:fact", room, facts["key"])).status_code == 404
    for path, data in every_fact_post(room, facts["key"]):
        assert client.post(path, data).status_code == 404, path


# The scene note -------------------------------------------------------------------------------------


def a_scene(room) -> None:
    note = scene.clean_note(
        where="the lighthouse", who="Maren, Traveller", when="dusk", open_threads="the missing page"
    )
    scene.scene_note_edit(room=room, note=note)


def test_the_scene_note_heads_both_tabs(host, room, facts):
    a_scene(room)
    for path in (reverse("memory:panel", args=[room.pk]), facts_url(room)):
        html = page(client_for(host), path)
        note = html[html.index('id="scene-note"') : html.index("</section>", html.index('id="scene-note"'))]
        for words in ("the lighthouse", "Maren, Traveller", "dusk", "<li>the missing page</li>"):
            assert words in note, (path, words)


def test_the_host_edits_the_scene_note(host, room):
    story_room(room, 6)
    response = client_for(host).post(
        reverse("memory:scene", args=[room.pk]),
        {
            "where": " the  cellar ",
            "who": "Maren, Harrow",
            "when": "midnight",
            "open_threads": "the key\nthe ledger",
        },
        follow=True,
    )
    assert "Scene note saved" in flashes(response)[0]
    state = RoomMemory.objects.get(room=room)
    assert state.scene_note == {
        "where": "the cellar",
        "who": ["Maren", "Harrow"],
        "when": "midnight",
        "open_threads": ["the key", "the ledger"],
    }
    assert state.scene_note_source == "person"
    assert "Yours: it stands until a later message" in response.content.decode()


def test_a_scene_note_field_too_long_is_refused_beside_it_and_nothing_is_saved(host, room):
    a_scene(room)
    response = client_for(host).post(
        reverse("memory:scene", args=[room.pk]), {"where": "x" * 81, "who": "Maren"}
    )
    assert response.status_code == 200
    errors = field_errors(response.content.decode(), f"/chats/{room.pk}/memory/scene/")
    assert errors == {"where": "The scene note's where is 81 characters; at most 80."}
    assert RoomMemory.objects.get(room=room).scene_note["where"] == "the lighthouse"


# The tier map's facts row --------------------------------------------------------------------------------


def test_the_tier_map_has_a_tick_for_each_active_shared_fact_with_pinned_ones_marked(host, room, facts):
    fact_services.fact_pin(fact=facts["key"], actor=host)
    html = page(client_for(host), reverse("memory:map", args=[room.pk]))
    ticks = dict(re.findall(r'data-fact="(\d+)"><rect class="([^"]+)"', html))
    assert {int(pk) for pk in ticks} == {facts["key"].pk, facts["promise"].pk, facts["cold"].pk}
    assert ticks[str(facts["key"].pk)] == "fact-tick pinned"
    assert ticks[str(facts["cold"].pk)] == "fact-tick"
    assert f'href="/chats/{room.pk}/memory/facts/{facts["key"].pk}/" data-fact=' in html
    assert ">Facts</li>" in html


def test_editing_a_corrected_fact_asks_to_restore_it_first_and_changes_nothing(host, room, facts):
    old = facts["old"]
    response = client_for(host).post(
        fact_url("memory:fact_edit", room, old), {"text": "Changed.", "category": "goal"}, follow=True
    )
    assert flashes(response) == ["Restore this fact before editing it."]
    old.refresh_from_db()
    assert (old.text, old.status) == ("The Traveller promised Maren to return by dawn.", "superseded")


def test_an_archived_chats_facts_are_read_but_not_changed(host, room, facts):
    members.room_leave(room=room, user=host)
    client = client_for(host)
    assert client.get(facts_url(room)).status_code == 200
    for path, data in every_fact_post(room, facts["key"]):
        assert client.post(path, data).status_code == 403, path
    assert Fact.objects.get(pk=facts["key"].pk).status == "active"
