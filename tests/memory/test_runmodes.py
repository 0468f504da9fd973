"""The arithmetic of run modes: the batch due, when to ask the host, the cycle's token meter."""

from __future__ import annotations

from memory import blocks, runmodes
from memory.runmodes import Batch, Meter

T = blocks.Tuning(block_size=8, fresh_window=8, fan_in=4, max_tier=3)


def test_the_batch_is_the_messages_of_the_due_tier0_blocks():
    batch = runmodes.batch_due(visible_seqs=list(range(24)), write=[(0, 0), (0, 1)], t=T)
    assert batch == Batch(upto=15, messages=16)


def test_hidden_messages_do_not_count_in_the_batch_but_the_block_still_ends_where_it_ends():
    visible = [s for s in range(16) if s not in (3, 4)]
    assert runmodes.batch_due(visible_seqs=visible, write=[(0, 0)], t=T) == Batch(upto=7, messages=6)


def test_nothing_due_or_only_roll_ups_due_is_no_batch():
    assert runmodes.batch_due(visible_seqs=list(range(40)), write=[], t=T) is None
    assert runmodes.batch_due(visible_seqs=list(range(40)), write=[(1, 0)], t=T) is None


def test_a_batch_is_asked_about_once_and_not_again_after_skip_until_a_later_one_is_due():
    first = Batch(upto=7, messages=8)
    assert runmodes.should_notify(first, asked_to=-1, skipped_to=-1)
    assert not runmodes.should_notify(first, asked_to=7, skipped_to=-1)  # asked already
    assert runmodes.should_ask(first, skipped_to=-1)  # but it still stands on a reload
    assert not runmodes.should_ask(first, skipped_to=7)  # skipped: gone
    later = Batch(upto=15, messages=16)
    assert runmodes.should_ask(later, skipped_to=7)
    assert runmodes.should_notify(later, asked_to=7, skipped_to=7)


def test_no_batch_is_never_asked_about():
    assert not runmodes.should_ask(None, skipped_to=-1)
    assert not runmodes.should_notify(None, asked_to=-1, skipped_to=-1)


def test_solo_and_group_chats_take_their_own_mode():
    assert runmodes.mode_for(group=False, solo_mode="ask", group_mode="manual") == "ask"
    assert runmodes.mode_for(group=True, solo_mode="ask", group_mode="manual") == "manual"


def test_the_meter_counts_pieces_with_text_and_the_speed_of_the_current_call():
    meter = Meter()
    meter.call(10.0)
    for i, piece in enumerate(["Hello", "", " there", " friend"]):
        meter.piece(piece, 10.0 + 0.5 * (i + 1))
    assert meter.tokens == 3
    assert meter.speed() == 3 / 2.0
    meter.call(20.0)
    meter.piece("Next", 20.25)
    assert meter.tokens == 4 and meter.speed() == 4.0


def test_a_meter_with_no_tokens_yet_reads_zero_speed():
    meter = Meter()
    assert meter.speed() == 0.0
    meter.call(1.0)
    assert meter.speed() == 0.0
