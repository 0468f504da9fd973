"""The path of a turn: what it reads, when room events go out, and that nothing goes stale."""

from __future__ import annotations

import asyncio
import time

import pytest
from asgiref.sync import sync_to_async
from channels.layers import get_channel_layer
from django.db import connection
from django.test.utils import CaptureQueriesContext

from orbchat.library import services as library_services
from orbchat.library.models import Persona
from rooms import events, members, prompting, relay, services, turns
from rooms.models import Message, Room, Variant
from rooms.turns import rounds, stop
from tests.factories import join, make_user
from tests.fakes.llm import Reply
from tests.rooms.test_turns import open_socket, settle, until


def contents(plan) -> str:
    return "\n".join(m["content"] for m in plan.prompt.messages)


def plan_for_turn(room):
    fresh = prompting.TurnContext.read(room.pk)
    return prompting.plan_turn(turn=fresh, seat=fresh.room.seats.get())


def selects_from(queries, table: str) -> int:
    return sum(1 for q in queries if q["sql"].startswith("SELECT") and f'FROM "{table}"' in q["sql"])


@pytest.mark.django_db
def test_opening_a_round_reads_the_room_its_host_and_the_default_persona_once(room, host, connected):
    def say_hello(turn) -> None:
        services.message_create(room=turn.room, author=host, text="Hello, keeper.", writer=turn.writer(host))

    with CaptureQueriesContext(connection) as queries:
        order, _, opened = rounds.open_round(room.pk, from_human=True, picked=[], before=say_hello)
    variant, plan = opened
    assert order == [room.seats.get().pk] and variant.message.seq == 2
    assert selects_from(queries, "rooms_room") == 1
    assert selects_from(queries, "accounts_user") == 0  # read with the room
    assert selects_from(queries, "connections_modelroles") == 0  # read with the room
    assert selects_from(queries, "library_persona") == 1  # the speaker's name and the prompt
    persona = host.personas.get(is_default=True)
    assert Message.objects.get(room=room, seq=1).speaker_name == persona.name
    assert persona.description[:30] in contents(plan)


@pytest.mark.django_db
def test_a_reply_takes_the_next_seq_and_stamps_the_room(room, host):
    before = Room.objects.get(pk=room.pk)
    first = services.message_create(room=room, author=host, text="One")
    second = services.message_create(room=room, author=host, text="Two")
    after = Room.objects.get(pk=room.pk)
    assert (first.seq, second.seq) == (before.next_seq, before.next_seq + 1)
    assert after.next_seq == before.next_seq + 2 and after.last_activity > before.last_activity


@pytest.mark.django_db
def test_each_turn_sees_the_hosts_latest_card_persona_preset_and_model(room, host, connected, character):
    services.message_create(room=room, author=host, text="Tell me about the harbour.")
    first = plan_for_turn(room)
    assert "Lighthouse of salt" not in contents(first)

    character.description = "Lighthouse of salt and iron."
    character.save()
    library_services.persona_create(
        owner=host, name="Wren", description="A cartographer with inky hands.", is_default=True
    )
    preset = room.preset
    preset.temperature = 0.25
    preset.save()
    later = plan_for_turn(room)
    text = contents(later)
    assert "Lighthouse of salt and iron." in text and "A cartographer with inky hands." in text
    assert later.params["temperature"] == 0.25


@pytest.mark.django_db
def test_a_room_with_members_prefixes_names_and_one_without_does_not(room, host, connected):
    services.message_create(room=room, author=host, text="Alone for now.")
    alone = plan_for_turn(room)
    join(room, make_user(actor=host, username="guest"))
    together = plan_for_turn(room)
    assert contents(alone) != contents(together)


# Room events ---------------------------------------------------------------------------------


async def listen(room_id: int) -> str:
    layer = get_channel_layer()
    channel = await layer.new_channel()
    await layer.group_add(events.room_group(room_id), channel)
    return channel


async def receive(channel: str, timeout: float = 2.0) -> dict:
    return await asyncio.wait_for(get_channel_layer().receive(channel), timeout)


@pytest.mark.asyncio
async def test_held_room_events_go_out_in_order_once_released():
    events.bind_loop()
    channel = await listen(9001)
    release = events.hold()
    for n in (1, 2):
        await sync_to_async(events.to_room)(
            9001, lambda n=n: {"type": "room.people", "text": str(n)}, on_commit=False
        )
    with pytest.raises(TimeoutError):
        await receive(channel, timeout=0.05)
    release()
    release()  # twice is harmless
    assert [(await receive(channel))["text"] for _ in range(2)] == ["1", "2"]


@pytest.mark.asyncio
async def test_a_hold_never_keeps_an_event_longer_than_its_limit():
    events.bind_loop()
    channel = await listen(9002)
    events.hold()  # never released
    started = time.monotonic()
    await sync_to_async(events.to_room)(
        9002, lambda: {"type": "room.people", "text": "late"}, on_commit=False
    )
    assert (await receive(channel))["text"] == "late"
    assert time.monotonic() - started < events.HOLD_MAX + 1.0


@pytest.mark.asyncio
async def test_recall_news_from_the_database_thread_is_sent_in_order_without_waiting():
    events.bind_loop()
    channel = await listen(9003)

    def from_the_database_thread() -> None:
        events.memory_recall(9003, state="recalling")
        events.memory_recall(9003, state="done", count=2)

    await sync_to_async(from_the_database_thread)()
    await events.direct_sent()
    first, second = await receive(channel), await receive(channel)
    assert (first["state"], second["state"], second["count"]) == ("recalling", "done", 2)


# Over the socket ----------------------------------------------------------------------------


@pytest.mark.django_db(transaction=True)
@pytest.mark.asyncio
async def test_the_reply_streams_after_the_room_hears_the_message_and_what_recall_found(
    room, host, connected, fake_llm
):
    fake_llm.script(Reply("The tide is out.", token_delay=0.0))
    socket = await open_socket(host, room.pk)
    await socket.send_json_to({"type": "send", "text": "Is the tide in?"})
    frame, seen = await until(
        socket,
        lambda f: f["type"] == "message" and "The tide is out." in f["html"] and "streaming" not in f["html"],
    )
    kinds = [f["type"] for f in seen if f["type"] in ("recall", "token")]
    assert "recall" in kinds and "token" in kinds
    # Nothing is written yet in this young chat: no "recalling", just the count (none).
    assert [(f["state"], f["count"]) for f in seen if f["type"] == "recall"] == [("done", 0)]
    assert max(i for i, k in enumerate(kinds) if k == "recall") < kinds.index("token")
    assert any(f["type"] == "message" and "Is the tide in?" in f["html"] for f in seen)
    await settle()
    await socket.disconnect()


@pytest.mark.django_db(transaction=True)
@pytest.mark.asyncio
async def test_an_archived_room_refuses_a_send_and_saves_nothing(room, host, connected):
    guest = await sync_to_async(make_user)(actor=host, username="guest")
    await sync_to_async(join)(room, guest)
    await sync_to_async(members.room_leave)(room=room, user=host)
    count = await sync_to_async(Message.objects.filter(room=room).count)()
    socket = await open_socket(guest, room.pk)
    await socket.send_json_to({"type": "send", "text": "Anyone here?"})
    notice, _ = await until(socket, lambda f: f["type"] == "notice")
    assert notice["status"] == 403 and "archived" in notice["text"]
    await settle()
    assert await sync_to_async(Message.objects.filter(room=room).count)() == count
    await socket.disconnect()


@pytest.mark.django_db(transaction=True)
@pytest.mark.asyncio
async def test_an_empty_send_is_refused_to_the_sender_alone(room, host, connected, fake_llm):
    socket = await open_socket(host, room.pk)
    await socket.send_json_to({"type": "send", "text": "   "})
    notice, _ = await until(socket, lambda f: f["type"] == "notice")
    assert "empty" in notice["text"] and "status" not in notice
    await settle()
    assert fake_llm.requests == []
    await socket.disconnect()


@pytest.mark.django_db(transaction=True)
@pytest.mark.asyncio
async def test_a_send_while_a_reply_streams_is_saved_and_answered_after_it(room, host, connected, fake_llm):
    fake_llm.script(Reply("slow " * 20, token_delay=0.02), Reply("Second answer."))
    socket = await open_socket(host, room.pk)
    await socket.send_json_to({"type": "send", "text": "First question"})
    await until(socket, lambda f: f["type"] == "token")
    await socket.send_json_to({"type": "send", "text": "Second question"})
    await until(socket, lambda f: f["type"] == "message" and "Second answer." in f["html"], timeout=15)
    await settle()
    texts = await sync_to_async(
        lambda: [m.variants.get(index=m.active_index).text for m in room.messages.order_by("seq")][1:]
    )()
    assert texts[0] == "First question" and texts[2] == "Second question" and texts[3] == "Second answer."
    await socket.disconnect()


@pytest.mark.django_db
def test_a_turn_keeps_the_persona_it_read_and_the_next_turn_reads_it_again(room, host):
    default = Persona.objects.get(owner=host, is_default=True)
    turn = prompting.TurnContext.read(room.pk)
    Persona.objects.filter(owner=host).update(is_default=False)
    assert turn.persona == default and turn.writer(host).name == default.name
    assert prompting.TurnContext.read(room.pk).persona is None
    assert services.room_persona(Room.objects.get(pk=room.pk)) is None


@pytest.mark.django_db(transaction=True)
@pytest.mark.asyncio
async def test_a_request_that_comes_as_a_round_ends_gets_a_round_of_its_own(
    room, host, connected, fake_llm, monkeypatch
):
    fake_llm.script(Reply("First answer."), Reply("Second answer."))
    socket = await open_socket(host, room.pk)
    asked = []
    stop_requested = stop.requested

    async def meanwhile(room_id, since):
        streaming = await sync_to_async(Variant.objects.filter(room_id=room_id, state="streaming").exists)()
        if not asked and not streaming:  # the round has spoken and is ending: a person writes just then
            asked.append(True)
            await sync_to_async(services.message_create)(room=room, author=host, text="And another thing.")
            await turns.start_turn(room_id, "reply")
        return await stop_requested(room_id, since)

    monkeypatch.setattr(stop, "requested", meanwhile)
    await socket.send_json_to({"type": "send", "text": "First question"})
    await until(
        socket,
        lambda f: f["type"] == "message" and "Second answer." in f["html"] and "streaming" not in f["html"],
        timeout=15,
    )
    await settle()
    assert asked and len(fake_llm.requests) == 2
    await socket.disconnect()


# One process's tabs --------------------------------------------------------------------------

TOKEN = {"type": "room.token", "message": 1, "variant": 1}


async def tokens_within(socket, seconds: float) -> list[str]:
    """The token deltas a socket has received after `seconds`."""
    await asyncio.sleep(seconds)
    deltas = []
    while not await socket.receive_nothing(timeout=0.05):
        frame = await socket.receive_json_from()
        if frame["type"] == "token":
            deltas.append(frame["delta"])
    return deltas


@pytest.mark.django_db(transaction=True)
@pytest.mark.asyncio
async def test_what_this_process_publishes_reaches_its_tabs_once_and_in_order(room, host):
    first, second = await open_socket(host, room.pk), await open_socket(host, room.pk)
    for delta in ("one ", "two ", "three"):
        await events.ato_tokens(room.pk, {**TOKEN, "delta": delta})
    # Handed over in memory at once; the copy that crosses Redis for other processes is not shown again.
    for tab in (first, second):
        assert await tokens_within(tab, 1.0) == ["one ", "two ", "three"]
        await tab.disconnect()


@pytest.mark.django_db(transaction=True)
@pytest.mark.asyncio
async def test_room_events_from_another_process_reach_the_tabs(room, host):
    socket = await open_socket(host, room.pk)
    layer, group = get_channel_layer(), events.room_group(room.pk)
    await layer.group_send(group, {**TOKEN, "delta": "from another process", "origin": "elsewhere"})
    await layer.group_send(group, {**TOKEN, "delta": "unmarked"})
    await layer.group_send(group, {**TOKEN, "delta": "this process's echo", "origin": relay.PROCESS})
    assert await tokens_within(socket, 1.0) == ["from another process", "unmarked"]
    await socket.disconnect()
