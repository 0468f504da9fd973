"""The tier map's layout: pure, no Django."""

from __future__ import annotations

from memory import tiermap

ADDED = 255


def mark(pk: int, tier: int, seq_from: int, seq_to: int, **flags) -> tiermap.Mark:
    return tiermap.Mark(pk=pk, tier=tier, seq_from=seq_from, seq_to=seq_to, label=f"m{pk}", **flags)


def test_deepest_tier_is_the_top_row_and_added_memories_the_bottom_row():
    drawn = tiermap.layout(
        [mark(1, 0, 0, 7), mark(2, 1, 0, 31), mark(3, ADDED, 3, 5)],
        messages=40,
        live_start=None,
        added_tier=ADDED,
    )
    assert [row.name for row in drawn.rows] == ["Tier 1", "Tier 0", "Added"]
    y = {bar.pk: bar.y for bar in drawn.bars}
    assert y[2] < y[1] < y[3]


def test_bars_sit_over_the_messages_they_cover():
    drawn = tiermap.layout(
        [mark(1, 0, 8, 15), mark(2, 0, 16, 23)], messages=100, live_start=None, added_tier=ADDED
    )
    per = drawn.per_message
    first, second = drawn.bars
    assert first.x == 8 * per and second.x == 16 * per
    assert first.x + first.width < second.x  # a visible gap between neighbours


def test_a_long_chat_scrolls_instead_of_squeezing_bars_below_readable():
    drawn = tiermap.layout(
        [mark(1, 0, 0, 7)], messages=5000, live_start=None, added_tier=ADDED, fit_width=800
    )
    assert drawn.per_message >= tiermap.MIN_PER_MESSAGE
    assert drawn.bars[0].width >= 8 * tiermap.MIN_PER_MESSAGE - 1
    assert drawn.width == 5000 * drawn.per_message


def test_ticks_are_spaced_for_reading_at_any_length():
    for messages in (40, 600, 5000, 100_000):
        drawn = tiermap.layout([mark(1, 0, 0, 7)], messages=messages, live_start=None, added_tier=ADDED)
        xs = [x for x, _ in drawn.ticks]
        assert len(xs) >= 2
        assert min(b - a for a, b in zip(xs, xs[1:], strict=False)) >= tiermap.MIN_TICK_GAP


def test_flags_become_classes_and_the_live_window_runs_to_the_end():
    drawn = tiermap.layout(
        [mark(1, 0, 0, 7, stale=True, pinned=True), mark(2, 0, 8, 15, yours=True, recalled=True)],
        messages=64,
        live_start=40,
        added_tier=ADDED,
    )
    classes = {bar.pk: set(bar.classes.split()) for bar in drawn.bars}
    assert classes[1] == {"bar", "stale", "pinned"}
    assert classes[2] == {"bar", "yours", "recalled"}
    x, width = drawn.live
    assert x == 40 * drawn.per_message and x + width == drawn.width


def fact(pk: int, first: int, last: int, **flags) -> tiermap.FactMark:
    return tiermap.FactMark(pk=pk, first_seq=first, last_seq=last, label=f"f{pk}", **flags)


def test_facts_are_ticks_at_their_messages_in_a_row_under_the_summaries():
    drawn = tiermap.layout(
        [mark(1, 0, 0, 7), mark(2, ADDED, 3, 5)],
        messages=40,
        live_start=None,
        added_tier=ADDED,
        facts=[fact(10, 12, 12), fact(11, 4, 6, pinned=True)],
    )
    assert [row.name for row in drawn.rows] == ["Tier 0", "Added", "Facts"]
    per = drawn.per_message
    ticks = {tick.pk: tick for tick in drawn.facts}
    assert [tick.pk for tick in drawn.facts] == [11, 10]  # in message order
    assert ticks[10].x == 12 * per and ticks[11].x == 4 * per
    assert ticks[11].x + ticks[11].width <= 7 * per  # over messages 4–6, no further
    assert ticks[10].y == drawn.rows[-1].y > max(bar.y for bar in drawn.bars)
    assert ticks[11].classes.split() == ["fact-tick", "pinned"]
    assert ticks[10].classes.split() == ["fact-tick"]


def test_a_fact_on_one_message_of_a_long_chat_is_still_a_visible_tick():
    drawn = tiermap.layout(
        [], messages=100_000, live_start=None, added_tier=ADDED, facts=[fact(1, 50_000, 50_000)]
    )
    assert [row.name for row in drawn.rows] == ["Facts"]
    assert drawn.facts[0].width >= tiermap.FACT_TICK


def test_no_facts_means_no_facts_row_and_a_fact_past_the_messages_widens_the_map():
    plain = tiermap.layout([mark(1, 0, 0, 7)], messages=8, live_start=None, added_tier=ADDED)
    assert [row.name for row in plain.rows] == ["Tier 0"] and plain.facts == []
    wider = tiermap.layout(
        [mark(1, 0, 0, 7)], messages=8, live_start=None, added_tier=ADDED, facts=[fact(1, 0, 999)]
    )
    assert wider.width == 1000 * wider.per_message
