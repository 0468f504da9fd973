"""The tier map: a room's memory drawn over the message axis. Pure layout, no Django.

One row per tier (deepest on top), a row for added memories tied to messages, and a row of facts;
each summary is a bar over the stretch it covers, each active fact a tick at the messages it came
from. The drawing is in message units, so a long chat is a wide
picture that scrolls sideways instead of bars squeezed below a pixel.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field

ROW_HEIGHT = 28
ROW_GAP = 8
AXIS_HEIGHT = 22
MIN_PER_MESSAGE = 1.5  # pixels per message: a tier-0 block of 8 stays a 12-pixel bar at 5,000+
MIN_WIDTH = 720
TICK_STEPS = (10, 20, 50, 100, 200, 500, 1000, 2000, 5000, 10000, 20000, 50000)
MIN_TICK_GAP = 70  # pixels between labelled ticks
FACT_TICK = 3  # pixels: the narrowest a fact's tick is drawn
FACTS_ROW = -1  # the facts row's key among the tiers' (no tier is negative)


@dataclass(frozen=True)
class Mark:
    """One memory, as the map needs it."""

    pk: int
    tier: int  # ADDED for an added memory
    seq_from: int
    seq_to: int
    label: str
    stale: bool = False
    yours: bool = False
    pinned: bool = False
    recalled: bool = False


@dataclass(frozen=True)
class FactMark:
    """One active fact tied to messages, as the map needs it."""

    pk: int
    first_seq: int
    last_seq: int
    label: str
    pinned: bool = False


@dataclass(frozen=True)
class Bar:
    pk: int
    x: float
    y: float
    width: float
    label: str
    classes: str


@dataclass(frozen=True)
class Row:
    name: str
    y: float


@dataclass
class Map:
    width: float
    height: int
    per_message: float
    rows: list[Row] = field(default_factory=list)
    bars: list[Bar] = field(default_factory=list)
    facts: list[Bar] = field(default_factory=list)  # the facts row's ticks
    ticks: list[tuple[float, int]] = field(default_factory=list)
    live: tuple[float, float] | None = None  # x and width of the live prompt window
    messages: int = 0


def _classes(mark: Mark) -> str:
    names = ["bar"]
    for flag in ("stale", "yours", "pinned", "recalled"):
        if getattr(mark, flag):
            names.append(flag)
    return " ".join(names)


def layout(
    marks: list[Mark],
    *,
    messages: int,
    live_start: int | None,
    added_tier: int,
    facts: Sequence[FactMark] = (),
    fit_width: float = MIN_WIDTH,
) -> Map:
    """Lay out the map for a room whose message seqs run 0..messages-1.

    `live_start` is the first message the last prompt held word for word (None: unknown). Each
    fact is a tick at least FACT_TICK pixels wide from its first message to its last, in a
    "Facts" row under the others.
    """
    facts = list(facts)
    extent = max(
        messages,
        max((m.seq_to + 1 for m in marks), default=0),
        max((f.last_seq + 1 for f in facts), default=0),
        1,
    )
    per = max(MIN_PER_MESSAGE, fit_width / extent)
    tiers = sorted({m.tier for m in marks if m.tier != added_tier}, reverse=True)
    names = [(t, f"Tier {t}") for t in tiers]
    if any(m.tier == added_tier for m in marks):
        names.append((added_tier, "Added"))
    if facts:
        names.append((FACTS_ROW, "Facts"))
    rows = {}
    drawn = Map(width=extent * per, height=0, per_message=per, messages=messages)
    for position, (tier, name) in enumerate(names):
        y = position * (ROW_HEIGHT + ROW_GAP)
        rows[tier] = y
        drawn.rows.append(Row(name, y))
    for mark in sorted(marks, key=lambda m: (m.tier, m.seq_from)):
        drawn.bars.append(
            Bar(
                pk=mark.pk,
                x=mark.seq_from * per,
                y=rows[mark.tier],
                width=max(per, (mark.seq_to - mark.seq_from + 1) * per - 1),
                label=mark.label,
                classes=_classes(mark),
            )
        )
    for fact in sorted(facts, key=lambda f: (f.first_seq, f.pk)):
        drawn.facts.append(
            Bar(
                pk=fact.pk,
                x=fact.first_seq * per,
                y=rows[FACTS_ROW],
                width=max(FACT_TICK, (fact.last_seq - fact.first_seq + 1) * per - 1),
                label=fact.label,
                classes="fact-tick pinned" if fact.pinned else "fact-tick",
            )
        )
    body = len(names) * (ROW_HEIGHT + ROW_GAP)
    drawn.height = body + AXIS_HEIGHT
    step = next((s for s in TICK_STEPS if s * per >= MIN_TICK_GAP), TICK_STEPS[-1])
    drawn.ticks = [(seq * per, seq) for seq in range(0, extent + 1, step)]
    if live_start is not None and live_start < extent:
        drawn.live = (live_start * per, (extent - live_start) * per)
    return drawn
