from __future__ import annotations

import pytest

from memory.blocks import (
    Plan,
    Tuning,
    ancestors,
    block_of,
    block_range,
    blocks_touching,
    children,
    fresh_start,
    next_partial,
    plan,
    span,
    witnessed_blocks,
)

T = Tuning()


def run(
    count: int | None = None,
    *,
    existing: list[int] | None = None,
    visible: list[int] | None = None,
    summaries: dict[tuple[int, int], str] | None = None,
    t: Tuning = T,
    **options,
) -> Plan:
    """Plan over seqs 0..count-1 (or the given lists), every message visible unless told otherwise."""
    existing = list(range(count)) if existing is None else existing
    visible = existing if visible is None else visible
    return plan(existing_seqs=existing, visible_seqs=visible, summaries=summaries or {}, t=t, **options)


def all_current(count: int, t: Tuning = T) -> dict[tuple[int, int], str]:
    """Return the summaries a room of ``count`` messages has once every due block is written."""
    return dict.fromkeys(run(count, t=t).write, "current")


def test_first_summary_is_due_at_sixteen_messages_not_fifteen():
    assert run(15).write == []
    assert run(15).fresh_start == 7
    assert run(16).write == [(0, 0)]
    assert run(16).fresh_start == 8


def test_fresh_start_is_the_wth_newest_existing_seq_in_any_order():
    assert fresh_start([], T) == 0
    assert fresh_start(list(range(7)), T) == 0
    assert fresh_start([9, 2, 30, 4, 17, 5, 11, 1, 40], T) == 2
    assert fresh_start([0, 1, 2], Tuning(fresh_window=0)) == 3


def test_block_ranges_grow_by_fan_in_per_tier():
    assert [span(tier, T) for tier in range(4)] == [8, 32, 128, 512]
    assert [block_range(tier, 0, T) for tier in range(4)] == [(0, 8), (0, 32), (0, 128), (0, 512)]
    assert [block_range(tier, 2, T) for tier in range(4)] == [(16, 24), (64, 96), (256, 384), (1024, 1536)]
    assert [block_of(600, tier, T) for tier in range(4)] == [75, 18, 4, 1]


def test_children_and_ancestors_follow_the_fan_in():
    assert children(0, 3, T) == []
    assert children(1, 2, T) == [(0, 8), (0, 9), (0, 10), (0, 11)]
    assert ancestors(0, 37, T) == [(1, 9), (2, 2), (3, 0)]
    assert ancestors(3, 0, T) == []


def test_tier1_rollup_appears_once_block_3_is_complete_and_not_before():
    # 39 messages: fresh_start 31, so block 3 (24-31) is not complete yet.
    assert run(39).write == [(0, 0), (0, 1), (0, 2)]
    # 40 messages: fresh_start 32, blocks 0-3 complete and tier 1 block 0 (0-31) with them.
    assert run(40).write == [(0, 0), (0, 1), (0, 2), (0, 3), (1, 0)]
    earlier = {(0, b): "current" for b in range(3)}
    assert run(40, summaries=earlier).write == [(0, 3), (1, 0)]


def test_tier2_rollup_needs_128_seqs_below_the_fresh_window():
    assert (2, 0) not in run(135).write
    assert (2, 0) in run(136).write
    lower = {key: "current" for key in all_current(136) if key[0] < 2}
    assert run(136, summaries=lower).write == [(2, 0)]


def test_nothing_is_planned_above_max_tier():
    assert max(tier for tier, _ in run(5000).write) == 3
    shallow = Tuning(max_tier=1)
    assert {tier for tier, _ in run(5000, t=shallow).write} == {0, 1}
    assert ancestors(0, 0, shallow) == [(1, 0)]
    assert run(200, summaries={(5, 0): "current"}, t=shallow).obsolete == []


def test_stale_tier0_block_is_rewritten_with_its_ancestors_but_not_its_siblings():
    summaries = all_current(200)  # fresh_start 192: tiers 0-2 complete, tier 3 block 0 (0-511) is not
    summaries[(0, 5)] = "stale"
    assert run(200, summaries=summaries).write == [(0, 5), (1, 1), (2, 0)]


def test_current_summaries_are_left_alone():
    assert run(200, summaries=all_current(200)).write == []


def test_stale_rollup_waits_for_a_stale_child_outside_the_tier0_limit():
    summaries = all_current(40)
    summaries[(0, 2)] = "stale"
    summaries[(1, 0)] = "stale"
    assert run(40, summaries=summaries, limit_tier0=0).write == []
    assert run(40, summaries=summaries, limit_tier0=1).write == [(0, 2), (1, 0)]


def test_person_summary_is_never_written_and_its_rewritten_child_does_not_force_it():
    summaries = all_current(200)
    summaries[(0, 5)] = "stale"
    summaries[(1, 1)] = "person"
    assert run(200, summaries=summaries).write == [(0, 5)]
    summaries[(1, 1)] = "stale"
    summaries[(0, 5)] = "person"
    assert run(200, summaries=summaries).write == [(1, 1), (2, 0)]


def test_person_child_counts_as_current_for_its_parents_readiness():
    summaries = {(0, b): "current" for b in range(4)}
    summaries[(0, 2)] = "person"
    assert run(40, summaries=summaries).write == [(1, 0)]


def test_block_whose_messages_were_all_deleted_is_obsolete_and_not_written():
    existing = [seq for seq in range(40) if not 8 <= seq < 16]  # block 1 deleted whole
    summaries = {(0, 1): "current", (0, 0): "person"}
    result = run(existing=existing, summaries=summaries)
    assert result.fresh_start == 32
    assert result.write == [(0, 2), (0, 3), (1, 0)]
    assert result.obsolete == [(0, 1)]
    assert result.obsolete_person == []


def test_person_summary_of_deleted_messages_is_reported_apart():
    existing = [seq for seq in range(40) if not 8 <= seq < 16]
    result = run(existing=existing, summaries={(0, 1): "person", (0, 0): "stale"})
    assert result.obsolete == []
    assert result.obsolete_person == [(0, 1)]


def test_rollup_of_a_wholly_deleted_subtree_is_obsolete():
    existing = list(range(32, 80))  # tier 1 block 0 (0-31) deleted whole
    result = run(existing=existing, summaries={(1, 0): "current", (0, 2): "stale", (2, 0): "current"})
    assert result.obsolete == [(0, 2), (1, 0)]
    assert (1, 0) not in result.write


def test_block_with_some_messages_deleted_is_still_written():
    existing = [seq for seq in range(16) if seq not in (3, 4, 5)]
    existing += [16, 17, 18]  # fresh_start 11: block 0 is complete, block 1 is not
    assert run(existing=existing).write == [(0, 0)]


def test_hidden_only_block_is_not_written_and_its_summary_is_obsolete():
    visible = list(range(8, 24))  # block 0 (0-7) holds only hidden messages
    result = run(24, visible=visible, summaries={(0, 0): "current"})
    assert result.write == [(0, 1)]
    assert result.obsolete == [(0, 0)]


def test_hidden_messages_still_count_for_the_fresh_window():
    visible = list(range(8))  # 8-15 hidden: without them only eight messages exist and nothing is due
    result = run(16, visible=visible)
    assert result.fresh_start == 8
    assert result.write == [(0, 0)]


def test_limit_tier0_writes_the_oldest_blocks_and_rolls_up_only_over_ready_children():
    assert run(40, limit_tier0=2).write == [(0, 0), (0, 1)]
    first_two = {(0, 0): "current", (0, 1): "current"}
    assert run(40, summaries=first_two, limit_tier0=2).write == [(0, 2), (0, 3), (1, 0)]
    tier0_done = {(0, b): "current" for b in range(4)}
    assert run(40, summaries=tier0_done, limit_tier0=0).write == [(1, 0)]


def test_only_blocks_restricts_tier0_and_the_rollups_see_only_those_children():
    result = run(48, only_blocks={1, 2}, summaries={(0, 0): "current", (0, 4): "current"})
    assert result.write == [(0, 1), (0, 2), (1, 0)]
    # Blocks 0 and 4 hold nothing this character witnessed, so their summaries have no messages.
    assert result.obsolete == [(0, 0), (0, 4)]


def test_only_blocks_parent_waits_for_its_own_children_only():
    summaries = {(0, 1): "current", (0, 3): "stale"}
    result = run(40, only_blocks={1, 3}, summaries=summaries, limit_tier0=0)
    assert result.write == []  # block 3 is witnessed and stale, so the roll-up waits
    result = run(40, only_blocks={1}, summaries={(0, 1): "current"})
    assert result.write == [(1, 0)]


def test_witnessed_blocks_count_a_join_mid_block():
    assert witnessed_blocks([(5, None)], tier=0, t=T, upto=20) == {0, 1, 2}
    assert witnessed_blocks([(13, 14)], tier=0, t=T, upto=100) == {1}


def test_witnessed_blocks_exclude_the_gap_between_removal_and_re_add():
    intervals = [(0, 10), (40, None)]  # left at 10 (block 1), back at 40 (block 5)
    assert witnessed_blocks(intervals, tier=0, t=T, upto=60) == {0, 1, 5, 6, 7}
    assert witnessed_blocks([(0, 16)], tier=0, t=T, upto=60) == {0, 1}  # left exactly at block 2's start


def test_witnessed_blocks_run_up_to_upto_while_still_present():
    assert witnessed_blocks([(30, None)], tier=0, t=T, upto=41) == {3, 4, 5}
    assert witnessed_blocks([(0, 1000)], tier=0, t=T, upto=17) == {0, 1, 2}
    assert witnessed_blocks([(30, None)], tier=0, t=T, upto=0) == set()
    assert witnessed_blocks([(30, None)], tier=1, t=T, upto=100) == {0, 1, 2, 3}


def test_blocks_touching_lists_every_tier_sorted():
    assert blocks_touching([40, 3, 3], T) == [(0, 0), (0, 5), (1, 0), (1, 1), (2, 0), (3, 0)]
    assert blocks_touching([], T) == []


def test_next_partial_returns_whole_blocks_then_the_stretch_before_the_newest_message():
    seqs = list(range(13))  # newest is 12
    assert next_partial(existing_seqs=seqs, visible_seqs=seqs, covered=set(), t=T) == (0, 8)
    assert next_partial(existing_seqs=seqs, visible_seqs=seqs, covered={0}, t=T) == (8, 12)
    assert next_partial(existing_seqs=seqs, visible_seqs=seqs, covered={0, 1}, t=T) is None


def test_next_partial_skips_blocks_without_visible_messages_below_the_newest():
    seqs = list(range(20))
    visible = [seq for seq in seqs if seq >= 8]  # block 0 all hidden
    assert next_partial(existing_seqs=seqs, visible_seqs=visible, covered=set(), t=T) == (8, 16)
    assert next_partial(existing_seqs=[0, 16], visible_seqs=[0, 16], covered={0}, t=T) is None
    assert next_partial(existing_seqs=[], visible_seqs=[], covered=set(), t=T) is None


def test_unknown_state_and_bad_tuning_are_rejected():
    with pytest.raises(ValueError, match="unknown"):
        run(16, summaries={(0, 0): "done"})
    with pytest.raises(ValueError):
        Tuning(fan_in=1)
    with pytest.raises(ValueError):
        Tuning(block_size=0)


def test_five_thousand_messages_plan_in_one_pass():
    # Seqs 0..4999, fresh_start = 4992 (the 8th newest), so everything ending at or below 4992 is due:
    #   tier 0: 4992 / 8   = 624 blocks (625 in all, the last one is fresh)
    #   tier 1: 4992 / 32  = 156 blocks
    #   tier 2: 4992 / 128 = 39 blocks
    #   tier 3: 4992 / 512 = 9.75 -> 9 blocks
    result = run(5000)
    counts = [sum(1 for tier, _ in result.write if tier == level) for level in range(4)]
    assert result.fresh_start == 4992
    assert counts == [624, 156, 39, 9]
    assert len(result.write) == 828
    assert result.write == sorted(result.write)
    # Once written, a stale message deep in the history rewrites exactly its four blocks.
    summaries = dict.fromkeys(result.write, "current")
    for key in blocks_touching([2500], T):
        summaries[key] = "stale"
    assert run(5000, summaries=summaries).write == [(0, 312), (1, 78), (2, 19), (3, 4)]
