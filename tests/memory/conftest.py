from __future__ import annotations

import datetime as dt

import pytest
from django.db.models import F
from django.utils import timezone

from orbchat.connections import services as connection_services
from rooms import services as room_services
from rooms.models import Message, Room, Variant
from tests.factories import make_owner

LINES = [
    "*She trims the lamp wick.* The light must burn until the ferry comes.",
    "I brought the brass key from the customs house, the one with the anchor.",
    "Old Harrow said the storm would break before the bells of Inchfallow rang twelve.",
    "We should check the cellar; the tide ledger is missing its last page.",
    "Hello again.",
    "The map shows a second stair behind the fog bell, near the seal rocks.",
    "Thanks!",
    "If the ferryman lies about the cargo, Maren will refuse him the light.",
]


@pytest.fixture
def host(db):
    return make_owner(username="host")


@pytest.fixture
def room(host):
    return room_services.room_create_from_character(host=host, character=host.characters.get())


def add_story(
    room: Room, count: int, *, start: dt.datetime | None = None, plant: dict[int, str] | None = None
):
    """Append `count` messages (alternating person and character) after what the room has."""
    plant = plant or {}
    start = start or timezone.now() - dt.timedelta(days=3)
    room.refresh_from_db()
    seat = room.seats.first()
    first = room.next_seq
    messages = []
    for i in range(count):
        seq = first + i
        human = seq % 2 == 1
        messages.append(
            Message(
                room=room,
                seq=seq,
                kind=Message.Kind.HUMAN if human else Message.Kind.CHARACTER,
                author=room.host if human else None,
                seat=None if human else seat,
                speaker_name="Traveller" if human else seat.name,
            )
        )
    Message.objects.bulk_create(messages)
    created = {m.seq: m for m in Message.objects.filter(room=room, seq__gte=first)}
    Message.objects.filter(pk__in=[m.pk for m in created.values()]).update(created_at=start)
    for seq, message in created.items():
        Message.objects.filter(pk=message.pk).update(created_at=start + dt.timedelta(minutes=seq))
    Variant.objects.bulk_create(
        [
            Variant(
                message=m,
                room=room,
                index=0,
                text=plant.get(seq, f"{LINES[seq % len(LINES)]} (#{seq})"),
                tokens=20,
            )
            for seq, m in created.items()
        ]
    )
    Room.objects.filter(pk=room.pk).update(next_seq=F("next_seq") + count)
    room.refresh_from_db()
    return room


def story_room(room: Room, total: int, **kwargs) -> Room:
    """Make the room hold exactly `total` messages (its greeting is message 0)."""
    return add_story(room, total - room.messages.count(), **kwargs)


def rerank_from_nowhere(host, path: str = "nonexistent/cross-encoder") -> None:
    """Point the host's Rerank role at a CrossEncoder folder that does not exist (it will fail).

    Inside LOCAL_MODELS_DIR, the only place a local model may be loaded from.
    """
    from orbchat.connections import selectors as connection_selectors
    from orbchat.connections import services as connection_services

    roles = connection_selectors.model_roles_get(user=host)
    connection_services.model_roles_update(
        user=host, chat=roles.chat, utility=None, embedding=None, rerank_kind="local", rerank_local_path=path
    )


@pytest.fixture
def chat(host, fake_llm):
    """The host's Chat model: the fake provider, with a small context (a few dozen messages fit)."""
    return connection_services.connection_create(
        owner=host,
        name="Fake",
        provider="local",
        model="fake-model",
        api_base=fake_llm.base_url,
        context_size=4000,
    )


def tuning_data(**changes) -> dict:
    """What the Memory tuning page posts with every setting at its default, then `changes`
    (a checkbox: True or False; a value of None leaves the field out)."""
    from django import forms

    from memory.forms import MemoryTuningForm
    from memory.models import MemoryTuning

    form = MemoryTuningForm(instance=MemoryTuning())
    values = {name: form[name].value() for name in form.fields if not name.startswith("prompt_")}
    values.update(changes)
    data = {}
    for name, value in values.items():
        if isinstance(form.fields.get(name), forms.BooleanField):
            if value:
                data[name] = "on"
        elif value is not None:
            data[name] = value
    return data
