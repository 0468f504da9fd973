"""The room timeline: who was seated over which stretch of messages, laid out for a picture.

Pure: takes presence intervals in `seq` numbers, returns rows of bars in percent of the axis.
"""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class Bar:
    start: int  # first seq present
    end: int  # first seq no longer present (the room's next seq while still seated)
    seated: bool  # still seated now
    x: float  # percent of the axis
    width: float

    @property
    def label(self) -> str:
        last = f"{self.end - 1}" if self.end > self.start else f"{self.start}"
        return f"messages {self.start}–{last}" + (" (seated now)" if self.seated else "")


@dataclass(frozen=True)
class Row:
    name: str
    bars: list[Bar]


MIN_WIDTH = 0.6  # percent: a stay of one message in a long story stays visible


def timeline(seats: list[tuple[str, list[tuple[int, int | None]]]], *, length: int) -> list[Row]:
    """Lay out each seat's presence intervals [joined, left) over messages 0..length."""
    span = max(length, 1)
    rows = []
    for name, intervals in seats:
        bars = []
        for joined, left in sorted(intervals):
            end = length if left is None else left
            end = max(end, joined)
            x = 100.0 * joined / span
            width = max(100.0 * (end - joined) / span, MIN_WIDTH)
            bars.append(Bar(joined, end, left is None, round(x, 3), round(min(width, 100.0 - x), 3)))
        rows.append(Row(name, bars))
    return rows


def ticks(length: int, *, count: int = 5) -> list[tuple[int, float]]:
    """Return (message number, percent) marks along the axis."""
    if length <= 0:
        return [(0, 0.0)]
    step = max(1, round(length / count))
    return [(n, round(100.0 * n / length, 3)) for n in range(0, length + 1, step)]
