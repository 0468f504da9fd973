"""The memory manager's prompts: what the Utility model is asked after each block, and after each
reply for the scene note. Pure: no Django, no network, no I/O.

The memory manager's instructions are the "manager" prompt of `memory.prompts` (built in as
`MANAGER_PROMPT`, or the host's own from Memory tuning), filled in by `manager_messages`:
`{{categories}}` (the fact categories), `{{pov}}` (whose own memory the facts are, or nothing for
the shared set), `{{fallback_format}}` (the JSON/XML answer for a model that cannot call tools)
and `{{material}}`, the user message. The existing facts it may change (`pick_facts`: those about the people
and things the block names first, then the newest, at most MAX_SHOWN) and the block's
messages follow in the user message. The answer is read by `facts.parse_reply`.

The scene note's instructions are the "scene" prompt (built in as `SCENE_PROMPT`, or the host's
own), filled in by `scene_messages`; `parse_scene` reads its JSON answer tolerantly.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from memory import facts, prompts
from memory.drafts import Line, shorten, when_label
from memory.prompts import MANAGER_PROMPT, SCENE_PROMPT
from memory.summarize import json_values, transcript

__all__ = [
    "MANAGER_PROMPT",
    "MAX_SHOWN",
    "SCENE_LINES",
    "SCENE_PROMPT",
    "Known",
    "manager_messages",
    "parse_scene",
    "pick_facts",
    "scene_messages",
]

MAX_SHOWN = 40  # existing facts shown to the memory manager with one block
MAX_PROMPT_NAME = 40
SCENE_LINES = 12  # the latest messages the scene note is read from


_POV = """

Keep these facts as {name}'s own memory: only what {name} saw, heard, said or was told."""


@dataclass(frozen=True)
class Known:
    """An existing active fact as the memory manager is shown it."""

    id: int
    text: str
    category: str
    subjects: tuple[str, ...] = ()
    yours: bool = False
    pinned: bool = False


def _name(value: object) -> str:
    return shorten(value, MAX_PROMPT_NAME) if isinstance(value, str) else ""


def pick_facts(known: Sequence[Known], lines: Sequence[Line], *, limit: int = MAX_SHOWN) -> list[Known]:
    """Return at most `limit` facts to show with a block, in id order: first those whose subjects
    the block names (a speaker, or a word of its text), then the newest."""
    said = " ".join(f"{line.speaker} {line.text}" for line in lines if isinstance(line.text, str)).casefold()

    def named(fact: Known) -> bool:
        return any(subject.casefold() in said for subject in fact.subjects if subject.strip())

    ranked = sorted(known, key=lambda fact: (named(fact), fact.id), reverse=True)
    return sorted(ranked[: max(0, limit)], key=lambda fact: fact.id)


def _fact_line(fact: Known) -> str:
    marks = [fact.category]
    if fact.yours:
        marks.append("yours")
    if fact.pinned:
        marks.append("pinned")
    about = f" (about: {', '.join(fact.subjects)})" if fact.subjects else ""
    return f"#{fact.id} [{', '.join(marks)}] {fact.text}{about}"


def manager_messages(
    lines: Sequence[Line],
    known: Sequence[Known],
    *,
    pov: str | None = None,
    room_title: str = "",
    template: str = "",
    categories: Sequence[str] = facts.CATEGORIES,
) -> list[dict]:
    """Return the chat messages asking the memory manager about one block: the template with its
    macros filled in, then the kept facts and the block's transcript."""
    name = _name(pov)
    user = []
    title = _name(room_title)
    if title:
        user.append(f"Room: {title}")
    kept = "\n".join(_fact_line(fact) for fact in known) or "(none yet)"
    user.append(f"Facts kept:\n{kept}")
    when = when_label([line.when for line in lines])
    if when:
        user.append(f"Dates: {when}")
    user.append(f"Transcript:\n{transcript(lines)}")
    user.append("Change the facts now, or call no tool if nothing needs to change.")
    values = {
        "categories": ", ".join(categories),
        "pov": _POV.format(name=name) if name else "",
        "fallback_format": facts.fallback_format(categories),
        "material": "\n\n".join(user),
    }
    return prompts.render("manager", template, values)


def scene_messages(
    lines: Sequence[Line], *, previous: facts.SceneNote | None = None, template: str = ""
) -> list[dict]:
    """Return the chat messages asking for the scene note after the latest `lines`: `template`
    (blank: the built-in) with the note so far and the messages as its material."""
    user = []
    before = facts.render_scene_note(previous) if previous else ""
    if before:
        user.append(f"The note so far:\n{before}")
    user.append(f"Latest messages:\n{transcript(lines)}")
    user.append("Write the JSON object now.")
    values = {"threads": str(facts.MAX_THREADS), "material": "\n\n".join(user)}
    return prompts.render("scene", template, values)


def _strings(value: object) -> list[str]:
    if isinstance(value, str):
        value = value.split(",")
    if not isinstance(value, list | tuple):
        return []
    return [" ".join(str(item).split()) for item in value if isinstance(item, str | int | float)]


def parse_scene(answer: str) -> facts.SceneNote | None:
    """Read the scene note's JSON (bare, fenced, in prose, slightly broken); None when there is
    none or it says nothing. Fields are cut to the note's limits; keys in any case."""
    for value in json_values(answer if isinstance(answer, str) else ""):
        if not isinstance(value, dict):
            continue
        fields = {str(key).casefold().replace(" ", "_"): item for key, item in value.items()}
        threads = fields.get("open_threads", fields.get("threads", []))
        note = facts.SceneNote(
            where=shorten(" ".join(str(fields.get("where") or "").split()), facts.MAX_NOTE_FIELD),
            who=tuple(shorten(name, facts.MAX_NOTE_FIELD) for name in _strings(fields.get("who")) if name)[
                : facts.MAX_WHO
            ],
            when=shorten(" ".join(str(fields.get("when") or "").split()), facts.MAX_NOTE_FIELD),
            open_threads=tuple(shorten(thread, facts.MAX_THREAD) for thread in _strings(threads) if thread)[
                : facts.MAX_THREADS
            ],
        )
        if note.where or note.who or note.when or note.open_threads:
            return note
        return None
    return None
