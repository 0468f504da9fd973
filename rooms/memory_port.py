"""The turn's door to memory: what a turn asks of it, filled in by the memory app.

Memory sits above rooms (it reads rooms' messages and seats), so rooms cannot import it. A turn
still needs it twice: to fill the prompt's Memory section, and to log what was recalled once the
request is out. The memory app registers its implementation when it starts
(`memory.apps.MemoryConfig.ready` → `register`); with none registered, turns run without memory.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Protocol

from orbchat.prompting import assemble


class Outcome(Protocol):
    """One recall, as a turn sees it: the count for the room, the detail for the host."""

    state: str  # "off" (nothing ran) | "done"
    count: int
    notices: list[str]

    def detail(self) -> dict: ...

    def preview(self) -> dict: ...


class Memory(Protocol):
    def with_memory(
        self,
        *,
        room,
        seat,
        prompt_input: assemble.PromptInput,
        prompt: assemble.Prompt,
        on_recalling: Callable[[], None] | None,
    ) -> tuple[assemble.Prompt, Outcome | None]: ...

    def log(self, *, room_id: int, variant_id: int, speaker: str, outcome: Outcome) -> None: ...


_memory: Memory | None = None


def register(memory: Memory) -> None:
    global _memory
    _memory = memory


def with_memory(
    *, room, seat, prompt_input: assemble.PromptInput, prompt: assemble.Prompt, on_recalling
) -> tuple[assemble.Prompt, Outcome | None]:
    """Return the prompt with its Memory section filled, and the recall's outcome."""
    if _memory is None:
        return prompt, None
    return _memory.with_memory(
        room=room, seat=seat, prompt_input=prompt_input, prompt=prompt, on_recalling=on_recalling
    )


def log(*, room_id: int, variant_id: int, speaker: str, outcome: Outcome) -> None:
    if _memory is not None:
        _memory.log(room_id=room_id, variant_id=variant_id, speaker=speaker, outcome=outcome)
