from __future__ import annotations

import pytest

from rooms import services
from rooms.models import Message, Room, Variant

pytestmark = pytest.mark.django_db


def texts(room):
    return [m.variants.get(index=m.active_index).text for m in room.messages.order_by("seq")]


def test_starting_a_chat_makes_the_greeting_message_zero_with_alternates_as_swipes(room, character, host):
    greeting = room.messages.get()
    assert greeting.seq == 0 and greeting.speaker_name == character.name
    assert greeting.variants.count() == 1 + len(character.alternate_greetings)
    persona = host.personas.get(is_default=True)
    assert "{{user}}" not in greeting.variants.get(index=0).text
    assert persona.name in "".join(v.text for v in greeting.variants.all())
    seat = room.seats.get()
    assert seat.presences.get().joined_seq == 0 and seat.presences.get().left_seq is None


def test_messages_take_increasing_seq_numbers_never_reused(room, host):
    first = services.message_create(room=room, author=host, text="Hello")
    services.message_delete(message=first)
    second = services.message_create(room=room, author=host, text="Again")
    assert (first.seq, second.seq) == (1, 2)


def test_an_empty_message_is_refused(room, host):
    with pytest.raises(services.ActionRefused, match="empty"):
        services.message_create(room=room, author=host, text="   ")


def test_one_generation_per_room(room, host):
    services.message_create(room=room, author=host, text="Hi")
    services.turn_begin(room=room, mode="reply")
    with pytest.raises(services.TurnBusy, match="already being written"):
        services.turn_begin(room=room, mode="reply")
    assert Variant.objects.filter(room=room, state="streaming").count() == 1


def test_a_dead_generation_does_not_block_the_room_forever(room, host):
    services.message_create(room=room, author=host, text="Hi")
    stuck = services.turn_begin(room=room, mode="reply")
    Variant.objects.filter(pk=stuck.pk).update(updated_at=stuck.updated_at - services.STALE_GENERATION * 2)
    services.turn_begin(room=room, mode="regenerate")
    stuck.refresh_from_db()
    assert stuck.state == "stopped" and "interrupted" in stuck.error


def test_greetings_swipe_only_before_the_first_send(room, host):
    greeting = room.messages.get()
    services.swipe(message=greeting, direction=1)
    assert Message.objects.get(pk=greeting.pk).active_index == 1
    services.message_create(room=room, author=host, text="Hi")
    with pytest.raises(services.ActionRefused, match="before the first message"):
        services.swipe(message=Message.objects.get(pk=greeting.pk), direction=-1)


def test_a_failed_reply_that_wrote_nothing_leaves_no_empty_message(room, host):
    services.message_create(room=room, author=host, text="Hi")
    variant = services.turn_begin(room=room, mode="reply")
    services.turn_finish(variant_id=variant.pk, text="", state="error", error="refused")
    assert [m.kind for m in room.messages.order_by("seq")] == ["character", "human"]


def test_edit_hide_and_delete_from_here(room, host):
    one = services.message_create(room=room, author=host, text="One")
    services.message_create(room=room, author=host, text="Two")
    services.message_create(room=room, author=host, text="Three")
    services.message_edit(message=one, text="One, edited")
    services.message_set_hidden(message=one, hidden=True)
    assert Message.objects.get(pk=one.pk).hidden
    two = room.messages.get(seq=2)
    services.message_delete(message=two, and_after=True)
    assert texts(room)[1:] == ["One, edited"]


def test_fork_copies_up_to_the_message_and_leaves_the_parent(room, host):
    for text in ("A", "B", "C"):
        services.message_create(room=room, author=host, text=text)
    fork = services.room_fork(room=room, at_seq=2)
    assert texts(fork)[1:] == ["A", "B"]
    assert texts(Room.objects.get(pk=room.pk))[1:] == ["A", "B", "C"]
    assert fork.parent == room and fork.forked_at_seq == 2
    assert services.message_create(room=fork, author=host, text="D").seq == 3
