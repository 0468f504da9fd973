"""Rounds in a room of several characters and several people, over the real socket."""

from __future__ import annotations

import asyncio

import pytest
from asgiref.sync import sync_to_async

from orbchat.interop.cards import parse_card_json
from orbchat.library import services as library_services
from rooms import members, services
from rooms.models import Message
from tests.factories import make_user
from tests.fakes.llm import Reply
from tests.library.cards import v2_card
from tests.rooms.test_turns import done_message, open_socket, settle, until

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.asyncio]


@pytest.fixture
def duo(room, host):
    """The room with Maren and Tobin seated, both quiet unless named; options as given."""
    tobin = library_services.character_create(
        owner=host,
        card=parse_card_json(
            v2_card(name="Tobin", description="A ferryman.", first_mes="", alternate_greetings=[])
        ),
    )
    services.seat_add(room=room, character=tobin)
    for seat in room.seats.all():
        services.seat_update(seat=seat, talkativeness=0.0)
    return room


def set_options(room, **options):
    services.room_update(room=room, settings={**room.settings, **options})


@sync_to_async
def speakers_after(room, seq):
    return list(
        Message.objects.filter(room=room, seq__gt=seq, kind="character").values_list(
            "speaker_name", flat=True
        )
    )


def prompt_text(request) -> str:
    return "\n".join(m["content"] for m in request.body["messages"])


async def wait_for_replies(room, seq, count, timeout=15):
    for _ in range(int(timeout / 0.05)):
        names = await speakers_after(room, seq)
        if len(names) >= count and not await sync_to_async(_streaming)(room):
            return names
        await asyncio.sleep(0.05)
    raise AssertionError(f"expected {count} replies, got {await speakers_after(room, seq)}")


def _streaming(room) -> bool:
    return room.messages.filter(variants__state="streaming").exists()


async def test_a_named_character_answers_in_natural_order(duo, host, connected, fake_llm):
    socket = await open_socket(host, duo.pk)
    await socket.send_json_to({"type": "send", "text": "Tobin, is the ferry running?"})
    assert await wait_for_replies(duo, 1, 1) == ["Tobin"]
    await settle()
    await socket.disconnect()


async def test_everyone_in_order_and_each_sees_the_previous_reply(duo, host, connected, fake_llm):
    await sync_to_async(set_options)(duo, turn_order="everyone")
    fake_llm.script(Reply("Maren says the lamp is lit."), Reply("Tobin nods."))
    socket = await open_socket(host, duo.pk)
    await socket.send_json_to({"type": "send", "text": "Evening, both."})
    assert await wait_for_replies(duo, 1, 2) == ["Maren Tallis", "Tobin"]
    second = fake_llm.requests[-1]
    assert "Maren says the lamp is lit." in prompt_text(second)
    assert "only as Tobin" in second.body["messages"][-1]["content"]
    await settle()
    await socket.disconnect()


async def test_round_robin_starts_after_the_last_speaker(duo, host, connected, fake_llm):
    await sync_to_async(set_options)(duo, turn_order="round_robin")
    socket = await open_socket(host, duo.pk)
    await socket.send_json_to({"type": "send", "text": "One."})
    assert await wait_for_replies(duo, 1, 1) == ["Tobin"]  # Maren spoke the greeting
    await socket.send_json_to({"type": "send", "text": "Two."})
    assert (await wait_for_replies(duo, 1, 2))[-1] == "Maren Tallis"
    await settle()
    await socket.disconnect()


async def test_narrator_mode_voices_everyone_in_one_message(duo, host, connected, fake_llm):
    await sync_to_async(set_options)(duo, reply_mode="narrator")
    socket = await open_socket(host, duo.pk)
    await socket.send_json_to({"type": "send", "text": "Tobin and Maren, both of you: talk."})
    assert await wait_for_replies(duo, 1, 1) == [services.NARRATOR]
    prompt = prompt_text(fake_llm.requests[-1])
    assert "A ferryman." in prompt and "Maren" in prompt
    assert "narrator" in fake_llm.requests[-1].body["messages"][-1]["content"]
    await settle()
    await socket.disconnect()


async def test_own_card_only_keeps_the_others_cards_out(duo, host, connected, fake_llm):
    await sync_to_async(set_options)(duo, own_card_only=True)
    socket = await open_socket(host, duo.pk)
    await socket.send_json_to({"type": "send", "text": "Maren?"})
    await wait_for_replies(duo, 1, 1)
    maren_prompt = prompt_text(fake_llm.requests[-1])
    assert "A ferryman." not in maren_prompt
    assert "Also in the scene: Tobin" in maren_prompt
    await sync_to_async(set_options)(duo, own_card_only=False)
    await socket.send_json_to({"type": "send", "text": "Maren, again?"})
    await wait_for_replies(duo, 1, 2)
    assert "A ferryman." in prompt_text(fake_llm.requests[-1])
    await settle()
    await socket.disconnect()


async def test_auto_mode_keeps_going_then_a_person_ends_it(duo, host, connected, fake_llm):
    await sync_to_async(set_options)(duo, turn_order="round_robin", auto_turns=2, auto_delay=0.05)
    socket = await open_socket(host, duo.pk)
    await socket.send_json_to({"type": "send", "text": "Talk among yourselves."})
    # One answer to the person, then two auto rounds, then it stops by itself.
    assert await wait_for_replies(duo, 1, 3) == ["Tobin", "Maren Tallis", "Tobin"]
    await asyncio.sleep(0.5)
    assert len(await speakers_after(duo, 1)) == 3
    await sync_to_async(set_options)(duo, auto_turns=50, auto_delay=0.3)
    await socket.send_json_to({"type": "send", "text": "Go on."})
    await wait_for_replies(duo, 1, 5)
    await socket.send_json_to({"type": "send", "text": "Enough, thank you."})
    await asyncio.sleep(1.5)
    await settle()
    names = await speakers_after(duo, 1)
    assert len(names) < 10  # the chain ended long before its 50 rounds
    last = await sync_to_async(lambda: duo.messages.order_by("-seq").first())()
    assert last.kind == "character"  # the person's message still got its answer
    await socket.disconnect()


async def test_the_speak_button_makes_even_a_muted_character_answer(duo, host, connected, fake_llm):
    tobin = await sync_to_async(lambda: duo.seats.get(name="Tobin"))()
    await sync_to_async(services.seat_update)(seat=tobin, muted=True)
    socket = await open_socket(host, duo.pk)
    await socket.send_json_to({"type": "send", "text": "Tobin?"})  # muted: never picked by name
    assert await wait_for_replies(duo, 1, 1) == ["Maren Tallis"]
    await socket.send_json_to({"type": "speak", "seat": tobin.pk})
    assert (await wait_for_replies(duo, 1, 2))[-1] == "Tobin"
    await settle()
    await socket.disconnect()


async def test_speak_next_goes_first_once(duo, host, connected, fake_llm):
    tobin = await sync_to_async(lambda: duo.seats.get(name="Tobin"))()
    socket = await open_socket(host, duo.pk)
    await socket.send_json_to({"type": "speak_next", "seat": tobin.pk})
    await socket.send_json_to({"type": "send", "text": "Maren, hello."})
    assert await wait_for_replies(duo, 1, 2) == ["Tobin", "Maren Tallis"]
    await sync_to_async(tobin.refresh_from_db)()
    assert not tobin.speak_next
    await settle()
    await socket.disconnect()


@pytest.fixture
def guest(room, host):
    guest = make_user(actor=host, username="guest")
    invite, _ = members.invite_link_create(room=room, by=host)
    members.invite_accept(invite=invite, user=guest)
    return guest


async def test_two_people_sending_at_once_both_land_in_one_order(room, host, guest, connected, fake_llm):
    fake_llm.script(Reply("slow " * 10, token_delay=0.02))
    host_socket, guest_socket = await open_socket(host, room.pk), await open_socket(guest, room.pk)
    await asyncio.gather(
        host_socket.send_json_to({"type": "send", "text": "From the host."}),
        guest_socket.send_json_to({"type": "send", "text": "From the guest."}),
    )
    seen = []
    for socket in (host_socket, guest_socket):
        order = []
        while len(order) < 2:
            frame = await socket.receive_json_from(timeout=10)
            if frame["type"] == "message" and 'data-kind="human"' in frame["html"]:
                order.append(frame["seq"])
        seen.append(order)
    assert seen[0] == seen[1] and len(set(seen[0])) == 2
    await until(host_socket, done_message)
    await settle()
    humans = await sync_to_async(
        lambda: list(room.messages.filter(kind="human").values_list("speaker_name", flat=True))
    )()
    assert sorted(humans) == ["guest", "host"]
    for socket in (host_socket, guest_socket):
        await socket.disconnect()


async def test_a_member_may_post_but_not_take_host_actions(room, host, guest, connected, fake_llm):
    socket = await open_socket(guest, room.pk)
    await socket.send_json_to({"type": "send", "text": "Hello from a member."})
    reply, _ = await until(socket, done_message)
    assert "Maren" in reply["html"]
    await settle()
    await socket.send_json_to({"type": "regenerate"})
    refusal, _ = await until(socket, lambda f: f["type"] == "notice")
    assert refusal["status"] == 403
    await socket.disconnect()
