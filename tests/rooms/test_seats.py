"""Seats: presence intervals in seq numbers, and the timeline drawn from them."""

from __future__ import annotations

import pytest

from orbchat.interop.cards import parse_card_json
from orbchat.library import services as library_services
from rooms import selectors, services
from rooms.timeline import timeline
from tests.library.cards import v2_card


@pytest.fixture
def second(host):
    return library_services.character_create(
        owner=host, card=parse_card_json(v2_card(name="Tobin", first_mes="", alternate_greetings=[]))
    )


def intervals(seat):
    return [(p.joined_seq, p.left_seq) for p in seat.presences.order_by("joined_seq")]


def say(room, host, n):
    for i in range(n):
        services.message_create(room=room, author=host, text=f"line {i}")


def test_a_seat_added_mid_story_is_present_from_the_next_message(room, host, second):
    say(room, host, 3)  # greeting is #0, so these are #1..#3
    seat = services.seat_add(room=room, character=second)
    assert intervals(seat) == [(4, None)]
    assert [s.name for s in services.seated(room)] == ["Maren Tallis", "Tobin"]


def test_removing_closes_the_interval_and_re_adding_opens_a_new_one(room, host, second):
    seat = services.seat_add(room=room, character=second)
    say(room, host, 5)
    services.seat_remove(seat=seat)
    say(room, host, 2)
    again = services.seat_add(room=room, character=second)
    assert again.pk == seat.pk  # the same seat: its past stays its own
    assert intervals(seat) == [(1, 6), (8, None)]


def test_a_character_cannot_be_seated_twice(room, host, second):
    services.seat_add(room=room, character=second)
    with pytest.raises(services.ActionRefused, match="already seated"):
        services.seat_add(room=room, character=second)


def test_removed_with_no_message_in_between_leaves_no_trace(room, host, second):
    seat = services.seat_add(room=room, character=second)
    services.seat_remove(seat=seat)
    assert intervals(seat) == []


def test_talkativeness_is_checked(room):
    seat = room.seats.get()
    with pytest.raises(services.ActionRefused, match="between 0 and 1"):
        services.seat_update(seat=seat, talkativeness=1.5)


def test_the_people_view_draws_a_closed_bar_for_a_removed_character(room, host, second):
    seat = services.seat_add(room=room, character=second)
    say(room, host, 4)
    services.seat_remove(seat=seat)
    say(room, host, 5)
    people = selectors.room_people(room)
    rows = {row.name: row for row in people["timeline"]}
    (bar,) = rows["Tobin"].bars
    assert (bar.start, bar.end, bar.seated) == (1, 5, False)
    assert rows["Maren Tallis"].bars[0].seated
    assert [s.name for s in people["unseated"]] == ["Tobin"]


def test_timeline_bars_are_placed_in_proportion():
    (row,) = timeline([("Ann", [(25, 75)])], length=100)
    assert (row.bars[0].x, row.bars[0].width) == (25.0, 50.0)


def test_a_one_message_stay_in_a_long_story_stays_visible():
    (row,) = timeline([("Ann", [(5000, 5001)])], length=10000)
    assert row.bars[0].width >= 0.5
