"""Decide which seated characters speak in a round, and in what order.

Pure: no Django, no I/O. The caller passes the seats, the message that started the round and a
`random.Random`, so the same inputs and seed always give the same speakers.
"""

from __future__ import annotations

import random
import re
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum

DEFAULT_AUTO_TURNS = 6
DEFAULT_AUTO_DELAY = 1.5  # seconds between rounds in auto-mode


@dataclass(frozen=True)
class Candidate:
    """A seated character as the speaker rules see it."""

    seat_id: int
    name: str
    talkativeness: float = 0.5  # 0..1, chance to chime in under "natural"
    muted: bool = False  # still seated, never picked to speak ...
    speak_next: bool = False  # ... unless the host pressed "speak next" (forces one turn even when muted)


class Order(StrEnum):
    """How a room chooses who answers."""

    NATURAL = "natural"
    EVERYONE = "everyone"
    ROUND_ROBIN = "round_robin"
    MANUAL = "manual"  # "Only when I pick"


_BEFORE = r"(?<!\w)"
_AFTER = r"(?!\w)"


def _phrase(name: str) -> str:
    """Return a pattern for the name, escaped, with any run of whitespace between its words."""
    return r"\s+".join(re.escape(word) for word in name.split())


def _usable(names: Iterable[str]) -> list[str]:
    """Drop blank names (they would match everywhere) and case-insensitive repeats."""
    seen: set[str] = set()
    kept = []
    for name in names:
        key = name.strip().casefold()
        if key and key not in seen:
            seen.add(key)
            kept.append(name)
    return kept


# First words that are not a name of their own ("The Ferryman" is not called by "the").
_NOT_A_FIRST_NAME = {
    "the",
    "a",
    "an",
    "old",
    "young",
    "little",
    "big",
    "sir",
    "lady",
    "lord",
    "mr",
    "mrs",
    "ms",
    "dr",
}


def _forms(name: str) -> list[str]:
    """Return how a name may be written: whole, or by its first word ("Maren" for "Maren Tallis")."""
    words = name.split()
    if len(words) > 1 and len(words[0]) > 2 and words[0].rstrip(".").casefold() not in _NOT_A_FIRST_NAME:
        return [name, words[0]]
    return [name]


def mentioned(text: str, names: list[str]) -> list[str]:
    """Return the names that appear in text as whole words, in order of first appearance.

    A multi-word name also counts when its first word appears ("Maren" for "Maren Tallis"), as
    people write. Matching ignores case. Where names overlap ("Old" inside "Old Tom") the longer
    match wins.
    """
    hits = []
    for name in _usable(names):
        for form in _forms(name):
            pattern = re.compile(_BEFORE + _phrase(form) + _AFTER, re.IGNORECASE)
            hits.extend((m.start(), -(m.end() - m.start()), m.end(), name) for m in pattern.finditer(text))
    hits.sort()
    found: list[str] = []
    covered = 0
    for start, _, end, name in hits:
        if start < covered:
            continue
        covered = end
        if name not in found:
            found.append(name)
    return found


def at_mentions(text: str, names: list[str]) -> list[str]:
    """Return the names written as "@Name" in text, in order of appearance.

    Matching ignores case; the name must end at a word boundary. When several names fit one "@",
    the longest wins, so "@Old Tom" is Old Tom even when "Old" is seated too.
    """
    usable = sorted(_usable(names), key=len, reverse=True)
    patterns = [(name, re.compile(_phrase(name) + _AFTER, re.IGNORECASE)) for name in usable]
    found: list[str] = []
    # The lookbehind keeps e-mail addresses ("bob@ann.net") from counting as mentions.
    for at in re.finditer(r"(?<!\w)@", text):
        for name, pattern in patterns:
            if pattern.match(text, at.end()):
                if name not in found:
                    found.append(name)
                break
    return found


def auto_continues(*, rounds_done: int, max_rounds: int) -> bool:
    """Say whether auto-mode runs another round; max_rounds 0 means auto-mode is off."""
    return 0 <= rounds_done < max_rounds


def _seats_for(names: list[str], pool: list[Candidate]) -> list[int]:
    """Return the seat ids of the pool named by names, in the order of names."""
    ids = []
    for name in names:
        key = name.strip().casefold()
        ids.extend(c.seat_id for c in pool if c.name.strip().casefold() == key)
    return ids


def _unique(ids: Iterable[int]) -> list[int]:
    return list(dict.fromkeys(ids))


def _natural(
    *,
    pool: list[Candidate],
    text: str,
    from_human: bool,
    last_speaker: int | None,
    allow_self_replies: bool,
    anyone_forced: bool,
    rng: random.Random,
) -> list[int]:
    """Pick the mentioned characters, then those who chime in, then a fallback if nobody would speak."""
    others = [c for c in pool if allow_self_replies or c.seat_id != last_speaker]
    # A person naming the last speaker is talking to it: it answers. A character saying its own
    # name is not asking itself to answer.
    addressable = pool if from_human else [c for c in others if c.seat_id != last_speaker]
    named = _unique(_seats_for(mentioned(text, [c.name for c in addressable]), addressable))

    rest = [c for c in others if c.seat_id not in named]
    rng.shuffle(rest)
    chimed = [c.seat_id for c in rest if rng.random() < c.talkativeness]

    chosen = named + chimed
    if chosen or anyone_forced:
        return chosen
    if others:
        return [rng.choice(others).seat_id]
    # Only the last speaker is left: a human spoke to it and deserves a reply, but a character
    # answering itself would just talk to itself.
    if from_human:
        return [c.seat_id for c in pool if c.seat_id == last_speaker][:1]
    return []


def _round_robin(*, seated: list[Candidate], pool: list[Candidate], last_speaker: int | None) -> list[int]:
    """Pick the first candidate of the pool after the last speaker in seat order, wrapping around."""
    ids = [c.seat_id for c in seated]
    start = ids.index(last_speaker) + 1 if last_speaker in ids else 0
    eligible = {c.seat_id for c in pool}
    for candidate in seated[start:] + seated[:start]:
        if candidate.seat_id in eligible:
            return [candidate.seat_id]
    return []


def pick_speakers(
    *,
    order: Order | str,
    candidates: list[Candidate],
    text: str,
    from_human: bool,
    last_speaker: int | None,
    allow_self_replies: bool = False,
    picked: list[int] | None = None,
    rng: random.Random,
) -> list[int]:
    """Return the seat ids that speak this round, in speaking order, without duplicates.

    Seats marked "speak next" go first, muted or not. The room's order then adds its own picks
    from the unmuted seats, except in manual order, where only the human's explicit picks (buttons,
    or "@Name" in a human message) speak, muted or not.
    """
    order = Order(order)
    forced = [c.seat_id for c in candidates if c.speak_next]
    pool = [c for c in candidates if not c.muted and not c.speak_next]

    if order is Order.NATURAL:
        chosen = _natural(
            pool=pool,
            text=text,
            from_human=from_human,
            last_speaker=last_speaker,
            allow_self_replies=allow_self_replies,
            anyone_forced=bool(forced),
            rng=rng,
        )
    elif order is Order.EVERYONE:
        chosen = [c.seat_id for c in pool]
    elif order is Order.ROUND_ROBIN:
        chosen = _round_robin(seated=candidates, pool=pool, last_speaker=last_speaker)
    else:
        seated = {c.seat_id for c in candidates}
        chosen = [seat_id for seat_id in picked or [] if seat_id in seated]
        # A character's "@Name" is part of its story, not a command: only the human picks.
        if from_human:
            chosen += _seats_for(at_mentions(text, [c.name for c in candidates]), candidates)

    return _unique(forced + chosen)
