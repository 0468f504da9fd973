"""An outsider asking for something of someone else's gets exactly what a missing id gets."""

from __future__ import annotations

import re

import pytest
from django.urls import reverse

from memory.services import person
from orbchat.api import NOT_FOUND
from rooms import services as room_services
from tests.factories import client_for, make_owner, make_user

pytestmark = pytest.mark.django_db

MISSING = 999999
SENTENCE = "Not found. It may have been deleted, or you may not have access."


@pytest.fixture
def owned():
    """Someone's chat, memory and library, and an outsider signed in beside them."""
    owner = make_owner(username="host")
    room = room_services.room_create_from_character(host=owner, character=owner.characters.get())
    summary, _ = person.memory_add(room=room, text="The ferry left at dawn.")
    outsider = make_user(actor=owner, username="outsider")
    return {
        "room": room.pk,
        "summary": summary.pk,
        "character": owner.characters.get().pk,
        "worldbook": owner.world_books.first().pk,
        "preset": owner.presets.first().pk,
        "persona": owner.personas.first().pk,
        "client": client_for(outsider),
    }


def without_tokens(html: str) -> str:
    """The page minus its CSRF tokens, which differ on every response."""
    return re.sub(r"[A-Za-z0-9]{64}", "TOKEN", html)


PAGES = {
    "room": lambda ids: reverse("rooms:room", args=[ids["room"]]),
    "room settings": lambda ids: reverse("rooms:settings", args=[ids["room"]]),
    "room export": lambda ids: reverse("rooms:export", args=[ids["room"], "jsonl"]),
    "memory panel": lambda ids: reverse("memory:panel", args=[ids["room"]]),
    "memory": lambda ids: reverse("memory:summary", args=[ids["room"], ids["summary"]]),
    "character": lambda ids: reverse("library:character", args=[ids["character"]]),
    "character export": lambda ids: reverse("library:character_export", args=[ids["character"], "json"]),
    "world book": lambda ids: reverse("library:worldbook", args=[ids["worldbook"]]),
    "preset": lambda ids: reverse("library:preset", args=[ids["preset"]]),
    "persona": lambda ids: reverse("library:persona", args=[ids["persona"]]),
    "corpus scene": lambda ids: reverse("corpus:scene", args=[ids["room"], 0]),
    "corpus memory": lambda ids: reverse("corpus:memory", args=[ids["summary"]]),
}


@pytest.mark.parametrize("kind", PAGES)
def test_a_page_of_someone_elses_reads_exactly_like_a_missing_one(owned, kind):
    client = owned["client"]
    foreign = client.get(PAGES[kind](owned))
    missing = client.get(PAGES[kind]({key: MISSING for key in owned}))
    assert foreign.status_code == missing.status_code == 404
    assert without_tokens(foreign.content.decode()) == without_tokens(missing.content.decode())
    assert SENTENCE in foreign.content.decode()


def test_the_not_found_page_keeps_the_site_navigation(owned):
    page = owned["client"].get(reverse("rooms:room", args=[owned["room"]])).content.decode()
    assert 'aria-label="Main"' in page and reverse("library:characters") in page


API = {
    "chat's memories": lambda ids: f"/api/v1/rooms/{ids['room']}/memories",
    "memory": lambda ids: f"/api/v1/memories/{ids['summary']}",
}


@pytest.mark.parametrize("kind", API)
def test_the_api_answers_someone_elses_and_missing_ids_alike(owned, kind):
    client = owned["client"]
    foreign = client.get(API[kind](owned))
    missing = client.get(API[kind]({key: MISSING for key in owned}))
    assert foreign.status_code == missing.status_code == 404
    assert foreign.json() == missing.json() == {"detail": NOT_FOUND}
