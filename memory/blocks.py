"""Plan which summary blocks to write, rewrite or drop: pure arithmetic over message seq numbers.

A room's messages carry an ever-increasing ``seq`` (deletions leave gaps, numbers are never reused).
Tier-0 block ``b`` covers seqs ``[b*B, (b+1)*B)``; a tier-``t`` block covers ``B*F**t`` seqs and rolls up
its ``F`` children of tier ``t-1``. Blocks are fixed by seq number, so deleting a message never moves one.
The newest ``fresh_window`` existing messages are never summarised; a block is *complete* once its whole
range lies below the first of them.
"""

from __future__ import annotations

import heapq
from collections.abc import Iterable
from dataclasses import dataclass

CURRENT = "current"
STALE = "stale"
PERSON = "person"
STATES = frozenset({CURRENT, STALE, PERSON})

Block = tuple[int, int]  # (tier, block number)


@dataclass(frozen=True)
class Tuning:
    """Hold the sizes that shape the tiers."""

    block_size: int = 8
    fresh_window: int = 8
    fan_in: int = 4
    max_tier: int = 3

    def __post_init__(self) -> None:
        if self.block_size < 1:
            raise ValueError("block_size must be at least 1")
        if self.fresh_window < 0:
            raise ValueError("fresh_window must not be negative")
        if self.fan_in < 2:
            raise ValueError("fan_in must be at least 2")
        if self.max_tier < 0:
            raise ValueError("max_tier must not be negative")


@dataclass(frozen=True)
class Plan:
    """Hold one pass's work: blocks to (re)write in order, and summaries to drop."""

    write: list[Block]  # tier ascending, then block ascending: children always before their parent
    obsolete: list[Block]  # existing summaries (not person) whose block holds no summarisable message
    obsolete_person: list[Block]  # the same for person-written summaries
    fresh_start: int


def span(tier: int, t: Tuning) -> int:
    """Return how many seqs one block at ``tier`` covers."""
    return t.block_size * t.fan_in**tier


def block_range(tier: int, block: int, t: Tuning) -> tuple[int, int]:
    """Return the ``[start, end)`` seq range of a block."""
    size = span(tier, t)
    return block * size, (block + 1) * size


def block_of(seq: int, tier: int, t: Tuning) -> int:
    """Return the number of the block at ``tier`` that holds ``seq``."""
    return seq // span(tier, t)


def children(tier: int, block: int, t: Tuning) -> list[Block]:
    """Return the ``(tier-1, b)`` blocks a block rolls up; none for tier 0."""
    if tier == 0:
        return []
    first = block * t.fan_in
    return [(tier - 1, first + i) for i in range(t.fan_in)]


def ancestors(tier: int, block: int, t: Tuning) -> list[Block]:
    """Return the blocks above a block up to ``max_tier``, nearest first."""
    return [(up, block // t.fan_in ** (up - tier)) for up in range(tier + 1, t.max_tier + 1)]


def fresh_start(existing_seqs: Iterable[int], t: Tuning) -> int:
    """Return the seq of the ``fresh_window``-th newest existing message, or 0 if there are fewer.

    Everything from this seq on is fresh and never summarised. With a fresh window of 0 it is one past the
    newest existing message (0 for an empty room).
    """
    distinct = set(existing_seqs)
    if t.fresh_window == 0:
        return max(distinct) + 1 if distinct else 0
    if len(distinct) < t.fresh_window:
        return 0
    return heapq.nlargest(t.fresh_window, distinct)[-1]


def blocks_touching(seqs: Iterable[int], t: Tuning) -> list[Block]:
    """Return every ``(tier, block)`` at tiers 0..max_tier holding any of ``seqs``, sorted."""
    distinct = set(seqs)
    found = {(tier, block_of(seq, tier, t)) for tier in range(t.max_tier + 1) for seq in distinct}
    return sorted(found)


def _holding(visible_seqs: Iterable[int], t: Tuning, only_blocks: set[int] | None) -> list[set[int]]:
    """Return, per tier, the blocks holding at least one summarisable message."""
    tier0 = {block_of(seq, 0, t) for seq in visible_seqs}
    if only_blocks is not None:
        tier0 &= only_blocks
    holding = [tier0]
    for _ in range(t.max_tier):
        holding.append({block // t.fan_in for block in holding[-1]})
    return holding


def plan(
    *,
    existing_seqs: list[int],
    visible_seqs: list[int],
    summaries: dict[Block, str],
    t: Tuning,
    limit_tier0: int | None = None,
    only_blocks: set[int] | None = None,
) -> Plan:
    """Work out which summaries to write and which have become obsolete.

    ``existing_seqs`` are all messages in the room (hidden ones included: they count for the fresh window);
    ``visible_seqs`` are the summarisable ones among them. ``summaries`` maps ``(tier, block)`` to
    "current", "stale" or "person". ``limit_tier0`` caps the tier-0 blocks written (oldest first);
    ``only_blocks`` restricts tier 0 to those block numbers, and a block outside it holds nothing.
    Summaries above ``max_tier`` are left alone.
    """
    unknown = {state for state in summaries.values() if state not in STATES}
    if unknown:
        raise ValueError(f"unknown summary states: {sorted(unknown)}")
    if limit_tier0 is not None and limit_tier0 < 0:
        raise ValueError("limit_tier0 must not be negative")

    start = fresh_start(existing_seqs, t)
    holding = _holding(visible_seqs, t, only_blocks)
    write: list[Block] = []
    rewritten: set[Block] = set()

    def complete(tier: int, block: int) -> bool:
        return block_range(tier, block, t)[1] <= start

    tier0_budget = limit_tier0
    for block in sorted(holding[0]):
        if not complete(0, block):
            break  # sorted, so every later block is incomplete too
        if summaries.get((0, block)) in (CURRENT, PERSON):
            continue
        if tier0_budget is not None:
            if tier0_budget == 0:
                break
            tier0_budget -= 1
        write.append((0, block))
        rewritten.add((0, block))

    for tier in range(1, t.max_tier + 1):
        for block in sorted(holding[tier]):
            if not complete(tier, block):
                break
            kids = [kid for kid in children(tier, block, t) if kid[1] in holding[tier - 1]]
            # A child that is stale or unwritten and not in this pass would leave a hole in the roll-up.
            if not all(summaries.get(kid) in (CURRENT, PERSON) or kid in rewritten for kid in kids):
                continue
            state = summaries.get((tier, block))
            if state == PERSON:
                continue
            if state == CURRENT and not any(kid in rewritten for kid in kids):
                continue
            write.append((tier, block))
            rewritten.add((tier, block))

    obsolete: list[Block] = []
    obsolete_person: list[Block] = []
    for (tier, block), state in sorted(summaries.items()):
        if not 0 <= tier <= t.max_tier or block in holding[tier]:
            continue
        (obsolete_person if state == PERSON else obsolete).append((tier, block))

    return Plan(write=write, obsolete=obsolete, obsolete_person=obsolete_person, fresh_start=start)


def witnessed_blocks(intervals: list[tuple[int, int | None]], *, tier: int, t: Tuning, upto: int) -> set[int]:
    """Return the blocks at ``tier`` a character was present for, among blocks 0..block_of(upto - 1).

    Each interval is ``[joined, left)`` in seqs; ``left`` None means still present (up to ``upto``).
    Presence for any part of a block counts for the whole block.
    """
    if upto <= 0:
        return set()
    last = block_of(upto - 1, tier, t)
    seen: set[int] = set()
    for joined, left in intervals:
        end = upto if left is None else left
        joined = max(joined, 0)
        if end <= joined:
            continue
        first = block_of(joined, tier, t)
        if first > last:
            continue
        seen.update(range(first, min(block_of(end - 1, tier, t), last) + 1))
    return seen


def next_partial(
    *, existing_seqs: list[int], visible_seqs: list[int], covered: set[int], t: Tuning
) -> tuple[int, int] | None:
    """Return the next stretch to summarise on demand, ignoring the fresh window, or None.

    Take the visible messages strictly below the newest existing message, drop those in a tier-0 block
    listed in ``covered``, and return ``[start, end)`` for the oldest block still holding one: ``start`` is
    the block's first seq and ``end`` is its range end, cut short at the newest message's seq. So a full
    block comes back whole and the block the newest message sits in comes back partial.
    """
    if not existing_seqs:
        return None
    newest = max(existing_seqs)
    open_blocks = {block_of(seq, 0, t) for seq in visible_seqs if seq < newest} - covered
    if not open_blocks:
        return None
    start, end = block_range(0, min(open_blocks), t)
    return start, min(end, newest)
