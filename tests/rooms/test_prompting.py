from __future__ import annotations

import pytest
from django.db import connection
from django.test.utils import CaptureQueriesContext

from bench import kit
from rooms import prompting, services
from rooms.models import Message, Room, Variant

pytestmark = pytest.mark.django_db


def plan(room):
    return prompting.plan_turn(turn=prompting.TurnContext.of(room), seat=room.seats.get())


def contents(prompt):
    return "\n".join(m["content"] for m in prompt.messages)


def test_the_prompt_holds_card_persona_world_info_and_authors_note(room, host, connected, character):
    services.room_update(room=room, authors_note="Keep the fog thick.")
    services.message_create(room=room, author=host, text="What is the Ledger of Passing?")
    turn = plan(room)
    text = contents(turn.prompt)
    assert character.description[:40].replace("{{char}}", character.name) in text
    assert host.personas.get(is_default=True).description[:30] in text
    assert "Keep the fog thick." in text
    assert turn.world_info and any("Ledger" in w["entry"] for w in turn.world_info)
    assert (
        turn.prompt.messages[-1]["content"].startswith("What is the Ledger") or "What is the Ledger" in text
    )


def test_hidden_messages_stay_out_and_memory_adds_nothing_when_empty(room, host, connected):
    secret = services.message_create(room=room, author=host, text="A secret aside")
    services.message_set_hidden(message=secret, hidden=True)
    services.message_create(room=room, author=host, text="Visible line")
    turn = plan(room)
    assert "A secret aside" not in contents(turn.prompt)
    assert "Past events" not in contents(turn.prompt)


def test_history_is_cut_to_the_context_and_the_kept_range_reported(room, host, connected):
    preset = room.preset
    preset.context_size, preset.max_tokens = 3000, 200
    preset.save()
    for i in range(300):
        services.message_create(room=room, author=host, text=f"Message number {i} " + "words " * 20)
    turn = plan(room)
    first, last = turn.prompt.history_kept
    assert last == 300 and first > 1
    assert turn.prompt.history_dropped > 0
    assert turn.prompt.total_tokens <= turn.prompt.budget


def long_history(room, size: int) -> None:
    """Messages 1 .. size-1 after the greeting, 40 tokens each, by bulk insert."""
    kit.bulk_history(room, range(1, size), text_for=lambda seq: f"Line {seq}.", tokens=40)


def test_a_long_hidden_stretch_does_not_hide_what_came_before_it(room, host, connected):
    preset = room.preset
    preset.context_size, preset.max_tokens = 32_000, 200
    preset.save()
    long_history(room, 1_000)
    Message.objects.filter(room=room, seq__gte=300, seq__lt=900).update(hidden=True)
    room.refresh_from_db()
    with CaptureQueriesContext(connection) as reads:
        history = prompting._history_tail(room, budget=32_000, exclude_message_id=None)
    assert [h.seq for h in history] == [*range(0, 300), *range(900, 1_000)]
    assert len(reads.captured_queries) <= 5  # windows widen over the hidden stretch


@pytest.mark.parametrize("budget", [-1, 0, 1_000, 2_000, 7_990, 8_000, 1_000_000])
def test_the_history_read_is_whole_pages_up_to_the_one_that_fills_the_budget(room, host, connected, budget):
    """World info scans the messages read, beyond those the prompt keeps: the newest visible
    messages in whole pages of HISTORY_PAGE, up to the page in which the budget fills."""
    long_history(room, 1_000)
    Message.objects.filter(room=room, seq__gte=300, seq__lt=380).update(hidden=True)
    Message.objects.filter(room=room, seq__gte=600, seq__lt=900).update(hidden=True)
    room.refresh_from_db()
    visible = [seq for seq in range(999, -1, -1) if not (300 <= seq < 380 or 600 <= seq < 900)]
    page = prompting.HISTORY_PAGE
    # Each message counts 40 tokens (the greeting its own count): the budget fills at the row
    # that takes the running total over it.
    tokens = {
        h.seq: h.tokens or 0 for h in prompting._history_tail(room, budget=10**9, exclude_message_id=None)
    }
    total, fills = 0, None
    for index, seq in enumerate(visible):
        total += tokens[seq]
        if total > budget:
            fills = index
            break
    expected = [] if budget < 0 else visible if fills is None else visible[: -(-(fills + 1) // page) * page]
    history = prompting._history_tail(room, budget=budget, exclude_message_id=None)
    assert [h.seq for h in history] == sorted(expected)


def test_the_history_read_stops_once_the_budget_is_full(room, host, connected):
    long_history(room, 5_000)
    room.refresh_from_db()
    with CaptureQueriesContext(connection) as reads:
        history = prompting._history_tail(room, budget=2_000, exclude_message_id=None)
    assert [h.seq for h in history][-1] == 4_999
    assert len(history) <= 2 * prompting.HISTORY_PAGE and len(reads.captured_queries) <= 2


def test_a_message_saved_after_the_room_was_read_is_in_the_prompt(room, host, connected):
    stale = Room.objects.get(pk=room.pk)
    services.message_create(room=room, author=host, text="Said a moment ago")
    assert stale.next_seq < room.next_seq
    turn = prompting.plan_turn(turn=prompting.TurnContext.of(stale), seat=stale.seats.get())
    assert "Said a moment ago" in contents(turn.prompt)


def test_the_recorded_prompt_is_what_the_preview_reads(room, host, connected):
    services.message_create(room=room, author=host, text="Hi")
    turn = plan(room)
    variant = services.turn_begin(room=room, mode="reply", prompt=turn.preview(), model=turn.connection.model)
    stored = Variant.objects.get(pk=variant.pk)
    assert stored.prompt["messages"] == turn.prompt.messages and stored.model == "openai/fake-model"


def test_no_chat_model_is_named(room):
    with pytest.raises(prompting.NoChatModel, match="Settings → Models"):
        plan(room)


# World info as the room scans it -------------------------------------------------------------


def chat_book(room, host, *entries: dict):
    from orbchat.library import services as library

    book = library.worldbook_create_from_data(
        owner=host,
        data={"name": "Harbour lore", "entries": [{"uid": i, **e} for i, e in enumerate(entries)]},
    )
    room.world_books.add(book)
    return book


def fired(turn) -> set[str]:
    return {w["entry"] for w in turn.world_info}


def test_speaker_names_are_scanned_with_their_messages(room, host, connected):
    persona = host.personas.get(is_default=True)
    chat_book(room, host, {"comment": "By name", "keys": [persona.name], "content": "Known at the docks."})
    services.message_create(room=room, author=host, text="Good evening.")
    turn = plan(room)
    assert "By name" in fired(turn) and "Known at the docks." in contents(turn.prompt)


def test_char_and_user_macros_are_filled_in_keys_and_content(room, host, connected, character):
    chat_book(
        room, host, {"comment": "Macro key", "keys": ["{{char}}'s lamp"], "content": "{{char}} trims it."}
    )
    services.message_create(room=room, author=host, text=f"Is {character.name}'s lamp lit?")
    turn = plan(room)
    assert "Macro key" in fired(turn)
    assert f"{character.name} trims it." in contents(turn.prompt) and "{{char}} trims" not in contents(
        turn.prompt
    )


def test_an_entry_filtered_to_other_characters_stays_out(room, host, connected, character):
    from orbchat.library.models import WorldEntry

    book = chat_book(
        room,
        host,
        {"comment": "Others only", "keys": ["lamp"], "content": "Not for this one."},
        {"comment": "For everyone", "keys": ["lamp"], "content": "The lamp hums."},
    )
    WorldEntry.objects.filter(book=book, uid=0).update(
        extra={"characterFilter": {"isExclude": True, "names": [character.name], "tags": []}}
    )
    services.message_create(room=room, author=host, text="The lamp flickers.")
    turn = plan(room)
    assert "For everyone" in fired(turn) and "Others only" not in fired(turn)


def test_hidden_messages_do_not_count_towards_an_entrys_delay(room, host, connected):
    chat_book(room, host, {"comment": "Late", "keys": ["tide"], "content": "The tide turns.", "delay": 4})
    for text in ("One.", "Two.", "Three."):
        services.message_create(room=room, author=host, text=text)
    Message.objects.filter(room=room, seq__gte=1).update(hidden=True)
    services.message_create(room=room, author=host, text="The tide?")
    assert "Late" not in fired(plan(room))  # two visible messages: the greeting and this one
    for text in ("Four.", "Five.", "The tide, again?"):
        services.message_create(room=room, author=host, text=text)
    assert "Late" in fired(plan(room))
