"""Bridge from stored world books to the pure activation function, for the "Try it" panel."""

from __future__ import annotations

from dataclasses import dataclass

from orbchat.library.models import WorldBook, WorldEntry
from orbchat.prompting import worldinfo

# The character filter is kept as imported, in the entry's `extra` (SillyTavern's `characterFilter`).
ENTRY_FIELDS = [f for f in worldinfo.Entry.__dataclass_fields__ if f != "character_filter"]


def entry_for_activation(entry: WorldEntry) -> worldinfo.Entry:
    values = {name: getattr(entry, name) for name in ENTRY_FIELDS}
    values["keys"] = tuple(values["keys"])
    values["secondary_keys"] = tuple(values["secondary_keys"])
    values["character_filter"] = _character_filter((entry.extra or {}).get("characterFilter"))
    return worldinfo.Entry(**values)


def _character_filter(value: object) -> worldinfo.CharacterFilter | None:
    if not isinstance(value, dict):
        return None
    names, tags = value.get("names"), value.get("tags")
    return worldinfo.CharacterFilter(
        is_exclude=bool(value.get("isExclude")),
        names=tuple(str(n) for n in names) if isinstance(names, list) else (),
        tags=tuple(str(t) for t in tags) if isinstance(tags, list) else (),
    )


def book_for_activation(book: WorldBook) -> worldinfo.Book:
    return worldinfo.Book(
        id=book.pk,
        name=book.name,
        entries=tuple(entry_for_activation(e) for e in book.entries.all()),
        scan_depth=book.scan_depth,
        token_budget=book.token_budget,
        recursive=book.recursive,
        max_recursion_steps=book.max_recursion_steps,
        case_sensitive=book.case_sensitive,
        match_whole_words=book.match_whole_words,
    )


@dataclass
class TryResult:
    messages: list[str]
    activated: list[worldinfo.Activated]
    rejected: list[tuple[WorldEntry | None, str]]


def try_book(*, book: WorldBook, text: str) -> TryResult:
    """Activate one book against typed messages (one per line, newest last)."""
    messages = [line for line in text.splitlines() if line.strip()]
    result = worldinfo.activate([book_for_activation(book)], messages)
    by_uid = {e.uid: e for e in book.entries.all()}
    rejected = [(by_uid.get(uid), reason) for (_, uid), reason in sorted(result.rejected.items())]
    return TryResult(messages=messages, activated=result.activated, rejected=rejected)
