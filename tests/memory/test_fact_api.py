"""The facts of the Memory API (/api/v1/), through the real services, the database, Chroma and the
built-in embedder: the same rights as the memory endpoints, and the same error shapes."""

from __future__ import annotations

import pytest

from memory.models import Fact, seat_scope
from memory.services import facts as fact_services
from orbchat.api import NOT_FOUND
from rooms import members
from rooms import services as room_services
from tests.factories import join, make_user
from tests.memory.conftest import story_room
from tests.memory.test_api import caller, let_members_read, send, token_for

pytestmark = pytest.mark.django_db(transaction=True)

KEY = "Maren buried the silver astrolabe beneath the ruined chapel."
LEMONS = "Tobin sells lemons at the harbour market."


@pytest.fixture
def people(host, room):
    member = make_user(actor=host, username="member")
    join(room, member)
    return {"member": member, "outsider": make_user(actor=host, username="outsider")}


@pytest.fixture
def story(room):
    """20 messages and four facts: one corrected, one forgotten, one a character's own."""
    story_room(room, 20)
    key = fact_services.fact_create(
        room=room, text=KEY, category="discovery", subjects=["Maren"], first_seq=3, last_seq=5, source="model"
    ).fact
    old = fact_services.fact_create(
        room=room, text="Tobin sells fish.", category="trait", first_seq=8, last_seq=9, source="extractor"
    ).fact
    lemons = fact_services.fact_correct(fact=old, text=LEMONS, source="model").fact
    gone = fact_services.fact_create(
        room=room, text="The lamp is broken.", category="condition", source="model"
    ).fact
    fact_services.fact_forget(fact=gone)
    own = fact_services.fact_create(
        room=room,
        scope=seat_scope(room.seats.first().pk),
        text="Maren fears bells.",
        category="trait",
        source="model",
    ).fact
    return {"room": room, "key": key, "old": old, "lemons": lemons, "gone": gone, "own": own}


def operations(story) -> list[tuple[str, str, dict | None]]:
    room, fact = story["room"], story["key"]
    return [
        ("GET", f"/rooms/{room.pk}/facts", None),
        ("GET", f"/rooms/{room.pk}/facts/search?q=astrolabe", None),
        ("GET", f"/rooms/{room.pk}/facts/stats", None),
        ("GET", f"/facts/{fact.pk}", None),
        ("POST", f"/rooms/{room.pk}/facts", {"text": "A new fact.", "category": "goal"}),
        ("PATCH", f"/facts/{fact.pk}", {"pinned": True}),
        ("PUT", f"/facts/{fact.pk}/pin", None),
        ("DELETE", f"/facts/{fact.pk}/pin", None),
        ("DELETE", f"/facts/{fact.pk}", None),
        ("POST", f"/facts/{story['gone'].pk}/restore", None),
    ]


def texts(client, path: str) -> list[str]:
    return [item["text"] for item in send(client, "GET", path).json()["items"]]


# Who may do what ------------------------------------------------------------------------------------


def test_the_host_may_do_everything(host, story):
    client = caller(token=token_for(host))
    for method, path, body in operations(story):
        expected = {"POST": 201 if body else 200, "DELETE": 200 if path.endswith("/pin") else 204}.get(
            method, 200
        )
        assert send(client, method, path, body).status_code == expected, (method, path)


def test_anonymous_callers_get_401(story):
    for method, path, body in operations(story):
        assert send(caller(), method, path, body).status_code == 401, (method, path)


def test_a_member_reads_shared_facts_only_once_allowed_and_never_writes(story, people):
    client = caller(user=people["member"])
    room = story["room"]
    for method, path, _ in operations(story)[:4]:
        response = send(client, method, path)
        assert response.status_code == 403 and "private" in response.json()["detail"], path
    let_members_read(room)
    assert sorted(texts(client, f"/rooms/{room.pk}/facts")) == sorted([KEY, LEMONS])
    assert send(client, "GET", f"/facts/{story['own'].pk}").status_code == 404  # a character's own
    assert send(client, "GET", f"/rooms/{room.pk}/facts/stats").json()["total"] == 4  # of the shared ones
    before = list(Fact.objects.filter(room=room).values_list("pk", "text", "status", "pinned"))
    for method, path, body in operations(story)[4:]:
        response = send(client, method, path, body)
        assert response.status_code == 403 and response.json()["detail"] == "Only the host can do that."
    assert list(Fact.objects.filter(room=room).values_list("pk", "text", "status", "pinned")) == before


def test_another_users_room_and_facts_are_404(story, people):
    let_members_read(story["room"])
    client = caller(token=token_for(people["outsider"]))
    for method, path, body in operations(story):
        response = send(client, method, path, body)
        assert response.status_code == 404 and response.json() == {"detail": NOT_FOUND}, (method, path)
    assert send(caller(user=story["room"].host), "GET", "/facts/999999").status_code == 404


def test_an_archived_room_keeps_its_facts_readable_but_not_changed(host, story):
    members.room_leave(room=story["room"], user=host)
    client = caller(user=host)
    for method, path, body in operations(story):
        response = send(client, method, path, body)
        if method == "GET":
            assert response.status_code == 200, path
        else:
            assert response.status_code == 403 and "archived" in response.json()["detail"], (method, path)


# Reading ---------------------------------------------------------------------------------------------


def test_a_fact_has_every_documented_field_and_its_history(host, story):
    body = send(caller(user=host), "GET", f"/facts/{story['lemons'].pk}").json()
    assert body | {"id": 0, "created_at": "", "updated_at": "", "history": []} == {
        "id": 0,
        "room": story["room"].pk,
        "scope": "shared",
        "text": LEMONS,
        "category": "trait",
        "subjects": [],
        "confidence": 1.0,
        "first_seq": 8,
        "last_seq": 9,
        "status": "active",
        "superseded_by": None,
        "source": "model",
        "yours": False,
        "pinned": False,
        "heat": 1.0,
        "hot": True,
        "access_count": 0,
        "last_used_at": None,
        "created_at": "",
        "updated_at": "",
        "history": [],
    }
    assert [(v["text"], v["status"], v["superseded_by"]) for v in body["history"]] == [
        ("Tobin sells fish.", "superseded", story["lemons"].pk),
        (LEMONS, "active", None),
    ]


def test_the_list_filters_by_category_status_scope_heat_and_words(host, story):
    client = caller(user=host)
    room = story["room"].pk
    assert sorted(texts(client, f"/rooms/{room}/facts")) == sorted([KEY, LEMONS, "Maren fears bells."])
    assert texts(client, f"/rooms/{room}/facts?category=discovery") == [KEY]
    assert texts(client, f"/rooms/{room}/facts?status=superseded") == ["Tobin sells fish."]
    assert texts(client, f"/rooms/{room}/facts?status=forgotten") == ["The lamp is broken."]
    assert len(texts(client, f"/rooms/{room}/facts?status=all")) == 5
    assert texts(client, f"/rooms/{room}/facts?scope={story['own'].scope}") == ["Maren fears bells."]
    assert texts(client, f"/rooms/{room}/facts?q=silver+chapel") == [KEY]
    fact_services.facts_set_heat(heats={story["key"].pk: 0.1})
    assert texts(client, f"/rooms/{room}/facts?heat=cold") == [KEY]
    assert KEY not in texts(client, f"/rooms/{room}/facts?heat=hot")


def test_facts_come_in_pages(host, story):
    client = caller(user=host)
    room = story["room"].pk
    whole = send(client, "GET", f"/rooms/{room}/facts?status=all").json()
    pages = [
        send(client, "GET", f"/rooms/{room}/facts?status=all&offset={o}&limit=2").json() for o in (0, 2, 4)
    ]
    assert [p["count"] for p in pages] == [5, 5, 5]
    assert [i["id"] for p in pages for i in p["items"]] == [i["id"] for i in whole["items"]]


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("limit=0", "limit"),
        ("offset=-1", "offset"),
        ("status=old", "status"),
        ("heat=warm", "heat"),
        ("category=x", "category"),
    ],
)
def test_bad_filters_are_422_naming_the_parameter(host, story, query, field):
    response = send(caller(user=host), "GET", f"/rooms/{story['room'].pk}/facts?{query}")
    assert response.status_code == 422 and response.json()["detail"][0]["loc"] == ["query", field]


def test_search_finds_the_nearest_fact_with_its_score(host, story):
    found = send(
        caller(user=host), "GET", f"/rooms/{story['room'].pk}/facts/search?q=where+is+the+astrolabe"
    ).json()
    assert found["items"][0]["text"] == KEY and 0 < found["items"][0]["score"] <= 1
    assert "The lamp is broken." not in [i["text"] for i in found["items"]]  # forgotten: not searched


def test_a_members_search_never_finds_a_characters_own_fact(story, people):
    let_members_read(story["room"])
    found = send(
        caller(user=people["member"]), "GET", f"/rooms/{story['room'].pk}/facts/search?q=fears+bells"
    )
    assert "Maren fears bells." not in [i["text"] for i in found.json()["items"]]


def test_search_says_503_when_the_index_cannot_be_reached(host, story, settings):
    settings.CHROMA_URL = "http://127.0.0.1:9"
    response = send(caller(user=host), "GET", f"/rooms/{story['room'].pk}/facts/search?q=astrolabe")
    assert response.status_code == 503
    assert response.json()["detail"].startswith("The memory index could not be searched")


def test_stats_count_the_facts_by_status_and_category(host, story):
    stats = send(caller(user=host), "GET", f"/rooms/{story['room'].pk}/facts/stats").json()
    assert stats["total"] == 5 and stats["pinned"] == 0
    assert stats["by_status"] == {"active": 3, "superseded": 1, "forgotten": 1}
    assert stats["by_category"]["trait"] == 3 and stats["by_category"]["goal"] == 0


# Writing ----------------------------------------------------------------------------------------------


def test_the_host_adds_a_fact_that_is_theirs_and_searchable(host, story):
    client = caller(token=token_for(host))
    room = story["room"]
    body = {
        "text": "Kira owes Aoi a wish.",
        "category": "promise",
        "subjects": ["Kira", "Aoi"],
        "first_seq": 10,
        "last_seq": 12,
        "pinned": True,
    }
    response = send(client, "POST", f"/rooms/{room.pk}/facts", body)
    assert response.status_code == 201
    made = response.json()
    assert (made["source"], made["yours"], made["pinned"], made["subjects"], made["notice"]) == (
        "person",
        True,
        True,
        ["Kira", "Aoi"],
        "",
    )
    again = send(client, "POST", f"/rooms/{room.pk}/facts", body)
    assert again.status_code == 200 and again.json()["id"] == made["id"]
    found = send(client, "GET", f"/rooms/{room.pk}/facts/search?q=a+wish+owed&limit=1").json()
    assert found["items"][0]["id"] == made["id"]


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        ({"text": "x" * 301, "category": "goal"}, "text", "300"),
        ({"text": "   ", "category": "goal"}, "text", "needs some text"),
        ({"text": "Half.", "category": "goal", "first_seq": 3}, "first_seq", "or neither"),
        ({"text": "Far.", "category": "goal", "first_seq": 3, "last_seq": 40}, "last_seq", "up to #19"),
        (
            {"text": "Whose?", "category": "goal", "scope": "seat-999999"},
            "scope",
            "one of this chat's characters",
        ),
        ({"text": "Kind?", "category": "gossip"}, "category", ""),
        ({"text": "Sure?", "category": "goal", "confidence": 2}, "confidence", ""),
        ({"category": "goal"}, "text", ""),
    ],
)
def test_a_refused_fact_is_422_naming_the_field_and_nothing_is_saved(host, story, body, field, words):
    room = story["room"]
    response = send(caller(user=host), "POST", f"/rooms/{room.pk}/facts", body)
    assert response.status_code == 422
    error = response.json()["detail"][0]
    assert error["loc"] == ["body", "payload", field] and words in error["msg"]
    assert Fact.objects.filter(room=room).count() == 5


def test_editing_makes_a_fact_yours_and_pinning_alone_does_not(host, story):
    client = caller(user=host)
    fact = story["key"]
    pinned = send(client, "PATCH", f"/facts/{fact.pk}", {"pinned": True}).json()
    assert (pinned["pinned"], pinned["source"]) == (True, "model")
    edited = send(
        client, "PATCH", f"/facts/{fact.pk}", {"text": "Maren moved the astrolabe.", "subjects": ["Maren"]}
    ).json()
    assert (edited["text"], edited["source"], edited["yours"], edited["confidence"], edited["pinned"]) == (
        "Maren moved the astrolabe.",
        "person",
        True,
        1.0,
        True,
    )
    assert Fact.objects.get(pk=fact.pk).text == "Maren moved the astrolabe."


def test_editing_a_corrected_fact_is_409_and_an_empty_patch_422(host, story):
    client = caller(user=host)
    response = send(client, "PATCH", f"/facts/{story['old'].pk}", {"text": "Tobin sells eels."})
    assert response.status_code == 409 and "Restore" in response.json()["detail"]
    assert Fact.objects.get(pk=story["old"].pk).text == "Tobin sells fish."
    empty = send(client, "PATCH", f"/facts/{story['key'].pk}", {})
    assert empty.status_code == 422 and empty.json()["detail"][0]["loc"] == ["body", "payload"]


def test_delete_forgets_and_restore_brings_back(host, story):
    client = caller(user=host)
    fact = story["key"]
    assert send(client, "DELETE", f"/facts/{fact.pk}").status_code == 204
    assert send(client, "GET", f"/facts/{fact.pk}").json()["status"] == "forgotten"
    assert KEY not in texts(client, f"/rooms/{story['room'].pk}/facts")
    restored = send(client, "POST", f"/facts/{fact.pk}/restore")
    assert restored.status_code == 200 and restored.json()["status"] == "active"


def test_restoring_a_corrected_fact_corrects_the_active_one(host, story):
    client = caller(user=host)
    assert send(client, "POST", f"/facts/{story['old'].pk}/restore").json()["status"] == "active"
    assert send(client, "GET", f"/facts/{story['lemons'].pk}").json()["superseded_by"] == story["old"].pk


def test_pin_and_unpin(host, story):
    client = caller(user=host)
    fact = story["key"]
    assert send(client, "PUT", f"/facts/{fact.pk}/pin").json()["pinned"] is True
    assert Fact.objects.get(pk=fact.pk).pinned
    assert send(client, "DELETE", f"/facts/{fact.pk}/pin").json()["pinned"] is False
    assert not Fact.objects.get(pk=fact.pk).pinned


def test_stats_of_another_hosts_room_are_404(host, story, people):
    other = room_services.room_create_from_character(host=host, character=host.characters.get())
    response = send(caller(user=people["member"]), "GET", f"/rooms/{other.pk}/facts/stats")
    assert response.status_code == 404
