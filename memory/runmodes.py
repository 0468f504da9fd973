"""When memory work runs, as pure arithmetic: the batch of messages due, whether to ask the host
about it, and the meter of a running cycle's model output.

A batch is what one memory cycle would summarise at a given moment: the messages of the tier-0
blocks that are due (complete, outside the fresh window, not yet summarised). "Ask first" asks the
host once per batch; a batch they skipped is not asked about again until more messages make a
later one due.
"""

from __future__ import annotations

from dataclasses import dataclass

from memory import blocks

AUTOMATIC = "automatic"
ASK = "ask"
MANUAL = "manual"


@dataclass(frozen=True)
class Batch:
    upto: int  # the last message of the last due block
    messages: int  # summarisable messages in the due blocks


def batch_due(*, visible_seqs: list[int], write: list[blocks.Block], t: blocks.Tuning) -> Batch | None:
    """Return the batch a cycle would summarise now (the tier-0 blocks of `write`), or None."""
    ranges = [blocks.block_range(0, block, t) for tier, block in write if tier == 0]
    if not ranges:
        return None
    messages = sum(1 for seq in visible_seqs if any(start <= seq < end for start, end in ranges))
    return Batch(upto=max(end for _, end in ranges) - 1, messages=messages)


def should_ask(batch: Batch | None, *, skipped_to: int) -> bool:
    """Whether the host's "Update memory?" prompt stands for `batch` (not skipped)."""
    return batch is not None and batch.upto > skipped_to


def should_notify(batch: Batch | None, *, asked_to: int, skipped_to: int) -> bool:
    """Whether to push the prompt now: a batch not skipped and not asked about yet."""
    return should_ask(batch, skipped_to=skipped_to) and batch is not None and batch.upto > asked_to


def mode_for(*, group: bool, solo_mode: str, group_mode: str) -> str:
    return group_mode if group else solo_mode


class Meter:
    """Tokens of a cycle's model output and the speed of the current call (tokens per second).

    Each streamed piece with text counts as one token, as providers stream them. `clock` is the
    caller's (time.monotonic); the speed is over the current call, since it was opened.
    """

    def __init__(self) -> None:
        self.tokens = 0
        self.call_tokens = 0
        self.call_started: float | None = None
        self.last: float | None = None

    def call(self, now: float) -> None:
        self.call_tokens = 0
        self.call_started = now

    def piece(self, text: str, now: float) -> None:
        if text:
            self.tokens += 1
            self.call_tokens += 1
            self.last = now

    def speed(self) -> float:
        if self.call_started is None or self.last is None or self.last <= self.call_started:
            return 0.0
        return self.call_tokens / (self.last - self.call_started)
