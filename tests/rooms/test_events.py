"""The event bus: which events may reach a room's group, and that they do."""

from __future__ import annotations

import asyncio

import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer

from orbchat.consumers import user_group
from rooms import events


async def listen(group: str) -> str:
    layer = get_channel_layer()
    channel = await layer.new_channel()
    await layer.group_add(group, channel)
    return channel


async def receive(channel: str, timeout: float = 2.0) -> dict:
    return await asyncio.wait_for(get_channel_layer().receive(channel), timeout)


@pytest.mark.parametrize("kind", sorted(events.USER_EVENTS))
def test_a_host_only_event_sent_to_a_room_is_refused(kind):
    with pytest.raises(events.EventRefused, match="one person alone"):
        events.to_room(9101, {"type": kind, "text": "secret"}, on_commit=False)
    with pytest.raises(events.EventRefused):
        events.to_room_direct(9101, {"type": kind, "text": "secret"})


@pytest.mark.asyncio
async def test_a_host_only_event_sent_to_a_room_from_the_event_loop_is_refused():
    with pytest.raises(events.EventRefused):
        await events.ato_room(9102, {"type": "user.recall", "room": 9102, "detail": {}})
    with pytest.raises(events.EventRefused):
        await events.ato_tokens(9102, {"type": "user.notice", "text": "The reply failed. Bad key."})


def test_an_unknown_event_is_refused_by_either_kind_of_group():
    with pytest.raises(events.EventRefused, match="not an event a room group carries"):
        events.to_room(9103, {"type": "room.preview", "prompt": "…"}, on_commit=False)
    with pytest.raises(events.EventRefused, match="not an event a user group carries"):
        events.to_user(1, {"type": "room.message", "html": ""}, on_commit=False)
    with pytest.raises(events.EventRefused):
        events.to_room(9103, {"text": "no type at all"}, on_commit=False)


def test_an_event_built_later_is_checked_when_built():
    with pytest.raises(events.EventRefused):
        events.to_room(9104, lambda: {"type": "user.recall", "room": 9104, "detail": {}}, on_commit=False)


@pytest.mark.asyncio
@pytest.mark.parametrize("kind", sorted(events.ROOM_EVENTS))
async def test_every_room_event_reaches_the_room_group(kind):
    channel = await listen(events.room_group(9105))
    await sync_to_async(events.to_room)(9105, {"type": kind, "n": 1}, on_commit=False)
    await events.ato_room(9105, {"type": kind, "n": 2})
    assert [(await receive(channel))["n"] for _ in range(2)] == [1, 2]


@pytest.mark.asyncio
async def test_a_person_s_event_reaches_their_group_and_not_the_room():
    room, mine = await listen(events.room_group(9106)), await listen(user_group(77))
    await sync_to_async(events.to_user)(77, {"type": "user.notice", "text": "for you"}, on_commit=False)
    await events.ato_user(77, {"type": "user.notice", "text": "and now"})
    assert [(await receive(mine))["text"] for _ in range(2)] == ["for you", "and now"]
    with pytest.raises(TimeoutError):
        await receive(room, timeout=0.1)


@pytest.mark.asyncio
async def test_a_refused_event_in_the_outbox_does_not_stop_the_ones_after_it():
    events.bind_loop()
    channel = await listen(events.room_group(9107))

    def from_the_database_thread() -> None:
        events.to_room(9107, lambda: {"type": "user.recall", "room": 9107, "detail": {}}, on_commit=False)
        events.to_room(9107, {"type": "room.people", "text": "after"}, on_commit=False)

    await sync_to_async(from_the_database_thread)()
    event = await receive(channel)
    assert (event["type"], event["text"]) == ("room.people", "after")
