"""The Memory API (/api/v1/) through the real services, the database, Chroma and the built-in embedder.

Who may do what follows the Memory panel: the host reads and writes; a member reads only when the
host lets members read the chat's memory (403 otherwise); anyone else gets 404; anonymous callers
get 401. A personal access token acts as its user, with exactly that user's rights.
"""

from __future__ import annotations

import json

import pytest
import schemathesis
import schemathesis.checks as checks
from django.core.wsgi import get_wsgi_application
from django.test import Client
from hypothesis import HealthCheck, settings

from memory.models import Fact, Summary
from memory.services import catch_up as passes
from memory.services import facts as fact_services
from memory.services import person
from orbchat.accounts import services as account_services
from orbchat.api import NOT_FOUND, api
from rooms import members
from rooms import services as room_services
from tests.factories import join, make_user
from tests.memory.conftest import story_room

pytestmark = pytest.mark.django_db(transaction=True)

API = "/api/v1"
ASTROLABE = "Maren buried the silver astrolabe beneath the ruined chapel of Saint Quillon."
LEMONS = "Tobin sold a crate of lemons at the harbour market."


def caller(*, user=None, token: str | None = None, **kwargs) -> Client:
    client = Client(headers={"Authorization": f"Bearer {token}"} if token else None, **kwargs)
    if user is not None:
        client.force_login(user)
    return client


def send(client: Client, method: str, path: str, body: dict | None = None):
    """Call the API with a JSON body (if any) and return the response."""
    call = getattr(client, method.lower())
    if body is None:
        return call(API + path)
    return call(API + path, data=json.dumps(body), content_type="application/json")


def token_for(user) -> str:
    return account_services.token_create(user=user, name="script")[1]


def let_members_read(room, on: bool = True) -> None:
    room.refresh_from_db()
    room_services.room_update(room=room, settings={**room.settings, "members_see_memory": on})


@pytest.fixture
def people(host, room):
    member = make_user(actor=host, username="member")
    join(room, member)
    return {"member": member, "outsider": make_user(actor=host, username="outsider")}


@pytest.fixture
def story(room):
    """40 messages summarised (four tier-0 summaries, one roll-up) and indexed, and two added memories."""
    story_room(room, 40)
    passes.catch_up(room.pk)
    person.memory_add(room=room, text=ASTROLABE, seq_from=3, seq_to=5)
    person.memory_add(room=room, text=LEMONS, pinned=True)
    return room


def a_summary(room) -> Summary:
    return Summary.objects.filter(room=room, tier=0).order_by("block").first()


def an_added(room) -> Summary:
    return Summary.objects.get(room=room, text=ASTROLABE)


def every_operation(room, memory) -> list[tuple[str, str, dict | None]]:
    return [
        ("GET", f"/rooms/{room.pk}/memories", None),
        ("GET", f"/rooms/{room.pk}/memories/search?q=astrolabe", None),
        ("GET", "/memories/stats", None),
        ("GET", f"/memories/{memory.pk}", None),
        ("POST", f"/rooms/{room.pk}/memories", {"text": "A new memory."}),
        ("PATCH", f"/memories/{memory.pk}", {"pinned": True}),
        ("PUT", f"/memories/{memory.pk}/pin", None),
        ("DELETE", f"/memories/{memory.pk}/pin", None),
        ("DELETE", f"/memories/{memory.pk}", None),
    ]


# Signing in -------------------------------------------------------------------------------------


def test_anonymous_callers_get_401_with_a_message_on_every_operation(story):
    for method, path, body in every_operation(story, a_summary(story)):
        response = send(caller(), method, path, body)
        assert response.status_code == 401, (method, path)
        assert "Bearer" in response.json()["detail"]
        assert response["WWW-Authenticate"].startswith("Bearer")
    assert Summary.objects.filter(room=story).count() == 7  # nothing changed


def test_a_token_acts_as_its_user(host, story):
    response = send(caller(token=token_for(host)), "GET", f"/rooms/{story.pk}/memories")
    assert response.status_code == 200 and response.json()["count"] == 7


def test_a_revoked_or_unknown_token_gets_401(host, story):
    row, token = account_services.token_create(user=host, name="old")
    account_services.token_revoke(user=host, token_id=row.pk)
    for bad in (token, token[:-1] + ("A" if token[-1] != "A" else "B"), "not-a-token"):
        response = send(caller(token=bad), "GET", f"/rooms/{story.pk}/memories")
        assert response.status_code == 401
        assert "not valid" in response.json()["detail"]


def test_a_wrong_token_is_refused_even_beside_a_valid_session(host, story):
    response = send(caller(user=host, token="not-a-token"), "GET", f"/rooms/{story.pk}/memories")
    assert response.status_code == 401


def test_the_token_of_a_deactivated_account_gets_401(host, story, people):
    token = token_for(people["member"])
    account_services.user_set_active(actor=host, user=people["member"], active=False)
    let_members_read(story)
    assert send(caller(token=token), "GET", f"/rooms/{story.pk}/memories").status_code == 401


def test_a_token_records_when_it_was_last_used(host, story):
    row, token = account_services.token_create(user=host, name="script")
    assert row.last_used_at is None
    send(caller(token=token), "GET", f"/rooms/{story.pk}/memories")
    row.refresh_from_db()
    assert row.last_used_at is not None


def test_a_session_write_needs_the_csrf_token_and_a_token_write_does_not(host, story):
    browser = caller(user=host, enforce_csrf_checks=True)
    refused = send(browser, "POST", f"/rooms/{story.pk}/memories", {"text": "Without CSRF."})
    assert refused.status_code == 403 and "CSRF" in refused.json()["detail"]
    browser.get("/settings/")  # sets the csrftoken cookie, as any page does
    csrf = browser.cookies["csrftoken"].value
    path = f"{API}/rooms/{story.pk}/memories"
    accepted = browser.post(
        path, data=json.dumps({"text": "With CSRF."}), content_type="application/json", HTTP_X_CSRFTOKEN=csrf
    )
    assert accepted.status_code == 201
    script = caller(token=token_for(host), enforce_csrf_checks=True)
    assert send(script, "POST", f"/rooms/{story.pk}/memories", {"text": "From a script."}).status_code == 201


def test_the_schema_and_docs_are_for_signed_in_callers(host):
    assert caller().get(f"{API}/openapi.json").status_code == 401
    schema = caller(token=token_for(host)).get(f"{API}/openapi.json").json()
    assert set(schema["paths"]) == {
        f"{API}/rooms/{{room_id}}/memories",
        f"{API}/rooms/{{room_id}}/memories/search",
        f"{API}/memories/stats",
        f"{API}/memories/{{memory_id}}",
        f"{API}/memories/{{memory_id}}/pin",
        f"{API}/rooms/{{room_id}}/facts",
        f"{API}/rooms/{{room_id}}/facts/search",
        f"{API}/rooms/{{room_id}}/facts/stats",
        f"{API}/facts/{{fact_id}}",
        f"{API}/facts/{{fact_id}}/restore",
        f"{API}/facts/{{fact_id}}/pin",
    }
    for operations in schema["paths"].values():
        for operation in operations.values():
            assert operation["summary"] and operation["description"]
            assert "401" in operation["responses"]
    docs = caller(user=host).get(f"{API}/docs")
    assert docs.status_code == 200 and b"swagger" in docs.content.lower()


# Who may read and write -------------------------------------------------------------------------


def test_the_host_may_do_everything(host, story):
    client = caller(user=host)
    for method, path, body in every_operation(story, a_summary(story)):
        expected = (
            201 if method == "POST" else 204 if (method, path.endswith("/pin")) == ("DELETE", False) else 200
        )
        assert send(client, method, path, body).status_code == expected, (method, path)


def test_a_member_reads_nothing_until_the_host_allows_it(story, people):
    client = caller(token=token_for(people["member"]))
    memory = a_summary(story)
    reads = [
        f"/rooms/{story.pk}/memories",
        f"/rooms/{story.pk}/memories/search?q=key",
        f"/memories/{memory.pk}",
    ]
    for path in reads:
        response = send(client, "GET", path)
        assert response.status_code == 403 and "private" in response.json()["detail"]
    let_members_read(story)
    for path in reads:
        assert send(client, "GET", path).status_code == 200


def test_a_member_never_writes_even_when_allowed_to_read(story, people):
    let_members_read(story)
    client = caller(user=people["member"])
    memory = a_summary(story)
    before = list(Summary.objects.filter(room=story).values_list("pk", "text", "pinned"))
    for method, path, body in every_operation(story, memory):
        if method == "GET":
            continue
        response = send(client, method, path, body)
        assert response.status_code == 403, (method, path)
        assert response.json()["detail"] == "Only the host can do that."
    assert list(Summary.objects.filter(room=story).values_list("pk", "text", "pinned")) == before


def test_an_outsider_learns_nothing(story, people):
    let_members_read(story)
    client = caller(token=token_for(people["outsider"]))
    for method, path, body in every_operation(story, a_summary(story)):
        response = send(client, method, path, body)
        if path == "/memories/stats":
            assert response.json()["total"] == 0  # over the rooms they host: none
        else:
            assert response.status_code == 404, (method, path)
            assert response.json()["detail"] == NOT_FOUND
    assert Summary.objects.filter(room=story).count() == 7


def test_a_missing_room_or_memory_is_404(host):
    client = caller(user=host)
    assert send(client, "GET", "/rooms/999999/memories").status_code == 404
    assert send(client, "GET", "/memories/999999").json() == {"detail": NOT_FOUND}
    assert send(client, "PATCH", "/memories/999999", {"pinned": True}).status_code == 404


def test_an_archived_room_is_read_but_not_changed(host, story):
    memory = a_summary(story)
    members.room_leave(room=story, user=host)
    client = caller(user=host)
    assert send(client, "GET", f"/rooms/{story.pk}/memories").status_code == 200
    assert send(client, "GET", f"/memories/{memory.pk}").status_code == 200
    for method, path, body in every_operation(story, memory):
        if method != "GET":
            response = send(client, method, path, body)
            assert response.status_code == 403 and "archived" in response.json()["detail"]


# Listing ----------------------------------------------------------------------------------------


def test_a_memory_has_every_documented_field(host, story):
    items = send(caller(user=host), "GET", f"/rooms/{story.pk}/memories").json()["items"]
    added = next(i for i in items if i["text"] == LEMONS)
    assert added | {"id": 0, "created_at": "", "updated_at": "", "keywords": []} == {
        "id": 0,
        "room": story.pk,
        "scope": "shared",
        "tier": 255,
        "kind": "added",
        "block": 1,
        "seq_from": None,
        "seq_to": None,
        "label": "Added · the whole story",
        "text": LEMONS,
        "keywords": [],
        "source": "person",
        "yours": True,
        "pinned": True,
        "stale": False,
        "model": "",
        "last_recalled_at": None,
        "created_at": "",
        "updated_at": "",
    }
    summary = next(i for i in items if i["tier"] == 0)
    assert summary["kind"] == "summary" and summary["source"] == "extractive" and not summary["yours"]
    assert isinstance(summary["seq_from"], int) and isinstance(summary["keywords"], list)


def test_memories_come_in_pages_in_the_panels_order(host, story):
    client = caller(user=host)
    whole = send(client, "GET", f"/rooms/{story.pk}/memories?limit=100").json()
    assert whole["count"] == 7
    assert [i["tier"] for i in whole["items"]] == [255, 255, 1, 0, 0, 0, 0]
    pages = [send(client, "GET", f"/rooms/{story.pk}/memories?offset={o}&limit=3").json() for o in (0, 3, 6)]
    assert [p["count"] for p in pages] == [7, 7, 7]
    assert [i["id"] for p in pages for i in p["items"]] == [i["id"] for i in whole["items"]]
    assert send(client, "GET", f"/rooms/{story.pk}/memories?offset=50").json() == {"count": 7, "items": []}


def test_the_default_page_holds_twenty(host, room):
    for n in range(21):
        person.memory_add(room=room, text=f"Memory number {n}.")
    page = send(caller(user=host), "GET", f"/rooms/{room.pk}/memories").json()
    assert page["count"] == 21 and len(page["items"]) == 20


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("limit=0", "limit"),
        ("limit=101", "limit"),
        ("offset=-1", "offset"),
        ("show=everything", "show"),
        ("tier=-1", "tier"),
        ("tier=x", "tier"),
        ("q=" + "a" * 501, "q"),
    ],
)
def test_bad_paging_or_filters_are_422_naming_the_parameter(host, story, query, field):
    response = send(caller(user=host), "GET", f"/rooms/{story.pk}/memories?{query}")
    assert response.status_code == 422
    assert response.json()["detail"][0]["loc"] == ["query", field]


def test_filters_by_tier_kind_and_words(host, story):
    client = caller(user=host)

    def texts(query: str) -> list[str]:
        return [i["text"] for i in send(client, "GET", f"/rooms/{story.pk}/memories?{query}").json()["items"]]

    assert len(texts("tier=0")) == 4 and len(texts("tier=1")) == 1
    assert sorted(texts("show=added")) == sorted([ASTROLABE, LEMONS])
    assert texts("show=pinned") == [LEMONS]
    assert sorted(texts("show=yours")) == sorted([ASTROLABE, LEMONS])
    assert texts("show=stale") == []
    assert texts("q=silver+astrolabe") == [ASTROLABE]
    assert texts("q=astrolabe&show=pinned") == []


# Search -----------------------------------------------------------------------------------------


def test_search_finds_the_nearest_memory_with_its_score(host, story):
    found = send(
        caller(user=host), "GET", f"/rooms/{story.pk}/memories/search?q=where+is+the+astrolabe"
    ).json()
    assert found["count"] == len(found["items"]) >= 1
    best = found["items"][0]
    assert best["text"] == ASTROLABE and 0 < best["score"] <= 1
    scores = [i["score"] for i in found["items"]]
    assert scores == sorted(scores, reverse=True)


def test_search_keeps_to_limit_and_min_score(host, story):
    client = caller(user=host)
    path = f"/rooms/{story.pk}/memories/search?q=the+silver+astrolabe"
    assert len(send(client, "GET", path + "&limit=2").json()["items"]) == 2
    best = send(client, "GET", path + "&limit=1").json()["items"][0]["score"]
    kept = send(client, "GET", path + f"&min_score={best - 0.0001}").json()["items"]
    assert [i["text"] for i in kept] == [ASTROLABE]


@pytest.mark.parametrize(
    ("query", "field"),
    [
        ("", "q"),
        ("q=", "q"),
        ("q=" + "a" * 501, "q"),
        ("q=x&limit=51", "limit"),
        ("q=x&min_score=1.5", "min_score"),
    ],
)
def test_bad_search_parameters_are_422(host, story, query, field):
    response = send(caller(user=host), "GET", f"/rooms/{story.pk}/memories/search?{query}")
    assert response.status_code == 422 and response.json()["detail"][0]["loc"] == ["query", field]


def test_search_says_503_when_the_index_cannot_be_reached(host, story, settings):
    settings.CHROMA_URL = "http://127.0.0.1:9"  # nothing listens there
    response = send(caller(user=host), "GET", f"/rooms/{story.pk}/memories/search?q=astrolabe")
    assert response.status_code == 503
    assert response.json()["detail"].startswith("The memory index could not be searched")


def test_search_of_a_room_with_no_index_yet_finds_nothing(host, room):
    response = send(caller(user=host), "GET", f"/rooms/{room.pk}/memories/search?q=anything")
    assert response.json() == {"count": 0, "items": []}


# Writing ----------------------------------------------------------------------------------------


def test_the_host_adds_a_memory_tied_to_messages(host, story):
    response = send(
        caller(token=token_for(host)),
        "POST",
        f"/rooms/{story.pk}/memories",
        {"text": "  The cellar door sticks in wet weather.  ", "seq_from": 10, "seq_to": 12, "pinned": True},
    )
    assert response.status_code == 201
    body = response.json()
    assert body["kind"] == "added" and body["tier"] == 255 and body["source"] == "person"
    assert (body["seq_from"], body["seq_to"], body["pinned"], body["notice"]) == (10, 12, True, "")
    assert Summary.objects.get(pk=body["id"]).text == "The cellar door sticks in wet weather."
    found = send(caller(user=host), "GET", f"/rooms/{story.pk}/memories/search?q=cellar+door&limit=1").json()
    assert found["items"][0]["id"] == body["id"]  # indexed at once


def test_a_memory_over_2000_characters_is_422_naming_the_field_and_the_limit(host, story):
    client = caller(user=host)
    for method, path in (
        ("POST", f"/rooms/{story.pk}/memories"),
        ("PATCH", f"/memories/{a_summary(story).pk}"),
    ):
        response = send(client, method, path, {"text": "x" * 2001})
        assert response.status_code == 422
        error = response.json()["detail"][0]
        assert error["loc"] == ["body", "payload", "text"]
        assert "2000" in error["msg"]
    assert send(client, "POST", f"/rooms/{story.pk}/memories", {"text": "x" * 2000}).status_code == 201


@pytest.mark.parametrize(
    ("body", "field", "words"),
    [
        ({"text": "Backwards.", "seq_from": 12, "seq_to": 10}, "seq_from", "not after the last"),
        ({"text": "One end.", "seq_from": 3}, "seq_from", "or neither"),
        ({"text": "Too far.", "seq_from": 3, "seq_to": 40}, "seq_to", "up to #39"),
        ({"text": "   "}, "text", "needs some text"),
    ],
)
def test_a_bad_range_or_empty_text_is_422_naming_the_field(host, story, body, field, words):
    response = send(caller(user=host), "POST", f"/rooms/{story.pk}/memories", body)
    assert response.status_code == 422
    error = response.json()["detail"][0]
    assert error["loc"] == ["body", "payload", field] and words in error["msg"]
    assert Summary.objects.filter(room=story).count() == 7


@pytest.mark.parametrize(
    ("body", "field"),
    [
        ({"text": "Negative.", "seq_from": -1, "seq_to": 2}, "seq_from"),
        ({}, "text"),
        ({"text": "a\x00b"}, "text"),
    ],
)
def test_input_outside_the_schema_is_422(host, story, body, field):
    response = send(caller(user=host), "POST", f"/rooms/{story.pk}/memories", body)
    assert response.status_code == 422 and response.json()["detail"][0]["loc"] == ["body", "payload", field]


def test_a_body_that_is_not_json_is_400(host, story):
    response = caller(user=host).post(
        f"{API}/rooms/{story.pk}/memories", data="{not json", content_type="application/json"
    )
    assert response.status_code == 400 and response.json()["detail"]


def test_editing_makes_a_memory_yours(host, story):
    memory = a_summary(story)
    response = send(caller(user=host), "PATCH", f"/memories/{memory.pk}", {"text": "Maren keeps the key."})
    assert response.status_code == 200
    body = response.json()
    assert (body["text"], body["source"], body["yours"], body["pinned"]) == (
        "Maren keeps the key.",
        "person",
        True,
        False,
    )
    memory.refresh_from_db()
    assert memory.text == "Maren keeps the key." and memory.yours


def test_editing_and_pinning_at_once(host, story):
    memory = a_summary(story)
    body = send(
        caller(user=host), "PATCH", f"/memories/{memory.pk}", {"text": "Both.", "pinned": True}
    ).json()
    assert (body["text"], body["pinned"]) == ("Both.", True)


def test_a_patch_with_nothing_to_change_is_422(host, story):
    response = send(caller(user=host), "PATCH", f"/memories/{a_summary(story).pk}", {})
    assert response.status_code == 422 and "text, pinned" in response.json()["detail"][0]["msg"]


def test_pin_and_unpin(host, story):
    client = caller(user=host)
    memory = a_summary(story)
    assert send(client, "PUT", f"/memories/{memory.pk}/pin").json()["pinned"] is True
    memory.refresh_from_db()
    assert memory.pinned
    assert send(client, "DELETE", f"/memories/{memory.pk}/pin").json()["pinned"] is False
    memory.refresh_from_db()
    assert not memory.pinned


def test_deleting_forgets_a_memory(host, story):
    client = caller(user=host)
    memory = an_added(story)
    response = send(client, "DELETE", f"/memories/{memory.pk}")
    assert response.status_code == 204 and response.content == b""
    assert send(client, "GET", f"/memories/{memory.pk}").status_code == 404
    assert send(client, "DELETE", f"/memories/{memory.pk}").status_code == 404


# Stats ------------------------------------------------------------------------------------------


def test_stats_count_the_memories_of_the_rooms_the_caller_hosts(host, story, people):
    other = room_services.room_create_from_character(host=host, character=host.characters.get())
    person.memory_add(room=other, text="Another chat's memory.", pinned=True)
    stats = send(caller(token=token_for(host)), "GET", "/memories/stats").json()
    assert stats == {
        "total": 8,
        "by_tier": {"0": 4, "1": 1, "added": 3},
        "by_room": {str(story.pk): 7, str(other.pk): 1},
        "stale": 0,
        "person_written": 3,
        "pinned": 2,
    }
    let_members_read(story)
    mine = send(caller(user=people["member"]), "GET", "/memories/stats").json()
    assert mine["total"] == 0 and mine["by_room"] == {}


# Fuzzing ----------------------------------------------------------------------------------------


@pytest.fixture
def fuzz_room(host, room):
    """A room with messages and a few memories; the host's token."""
    story_room(room, 20)
    person.memory_add(room=room, text=ASTROLABE, seq_from=3, seq_to=5)
    person.memory_add(room=room, text=LEMONS, pinned=True)
    person.memory_add(room=room, text="The ferry runs twice a week.", seq_from=10, seq_to=19)
    fact = fact_services.fact_create(
        room=room,
        text="Maren keeps the lamp lit.",
        category="promise",
        first_seq=2,
        last_seq=4,
        source="model",
    ).fact
    fact_services.fact_correct(fact=fact, text="Maren let the lamp go dark.", source="model")
    fact_services.fact_create(room=room, text="Tobin sells lemons.", category="trait", source="extractor")
    return room, token_for(host)


ANSWER_CHECKS = [
    checks.not_a_server_error,
    checks.status_code_conformance,
    checks.content_type_conformance,
    checks.response_headers_conformance,
    checks.response_schema_conformance,
    checks.ignored_auth,
]

# Loaded when the module is (the schema needs no database), served in-process through WSGI.
schema = schemathesis.openapi.from_dict(api.get_openapi_schema())
schema.app = get_wsgi_application()


@schema.parametrize()
@settings(max_examples=15, deadline=None, suppress_health_check=list(HealthCheck))
def test_the_api_never_answers_with_a_server_error(case, fuzz_room):
    room, token = fuzz_room
    # Mostly the real room and its memories and facts, so that the calls reach the services.
    params = case.path_parameters or {}
    if isinstance(params.get("room_id"), int) and params["room_id"] % 4:
        params["room_id"] = room.pk
    ids = list(Summary.objects.filter(room=room).values_list("pk", flat=True))
    if isinstance(params.get("memory_id"), int) and ids:
        params["memory_id"] = ids[params["memory_id"] % len(ids)]
    facts = list(Fact.objects.filter(room=room).values_list("pk", flat=True))
    if isinstance(params.get("fact_id"), int) and facts:
        params["fact_id"] = facts[params["fact_id"] % len(facts)]
    # The answers are checked, not whether the input was accepted: the case is rewritten above
    # (a valid token, the real ids), so schemathesis no longer knows whether it is valid.
    case.call_and_validate(headers={"Authorization": f"Bearer {token}"}, checks=ANSWER_CHECKS)
