"""Recall of lasting facts, the decisions: which facts go with a reply, and how the Memory section
lays them out. Pure functions over plain data (no Django, no I/O); the shell is `recaller`.

A fact is found by meaning (its cosine to the query, from the facts index) and by words (one of
its subjects said in the recent messages, names of the room's people aside: they are in almost
every message). Its relevance is the cosine, raised to `WORD_RELEVANCE` by a subject match; its
score is `memory.facts.score` (relevance × (0.5 + 0.5·confidence) × heat factor), and it may be
sent when `memory.facts.qualifies` (a hot fact needs the score floor, a cold one more). Pinned
facts and a person's own ("yours") are sent with every reply, like pinned and yours summaries;
of the others, the best `max_facts` by score.
"""

from __future__ import annotations

import re
from collections.abc import Collection, Iterable
from dataclasses import dataclass

from memory import facts
from memory.recall import ranking

WORD_RELEVANCE = 0.6  # a subject said in the query: clearly relevant, above the cold floor
PRIORITY_NAMES = facts.BUDGET_PRIORITY

COLD = "cold, and not clearly relevant"
LIVE = ranking.LIVE
WITNESS = ranking.WITNESS
FLOOR = ranking.FLOOR
RANKED = ranking.RANKED
BUDGET = ranking.BUDGET

FACTS_HEADING = "Lasting facts:"
SCENE_HEADING = "The scene now:"


@dataclass(frozen=True)
class Candidate:
    """One active fact of the speaker's scopes, as recall sees it."""

    id: int
    text: str
    category: str
    confidence: float
    heat: float
    pinned: bool = False
    yours: bool = False  # written or edited by a person
    subjects: tuple[str, ...] = ()
    first_seq: int | None = None
    last_seq: int | None = None
    scope: str = "shared"
    when: str = ""  # the days of its messages ("7 May 2023"), filled in for the facts sent


@dataclass(frozen=True)
class Picked:
    """A fact sent with a reply, and why."""

    fact: Candidate
    score: float
    relevance: float
    cosine: float | None = None
    subject: str = ""  # the subject that matched the query, if any
    why: str = ranking.RECALLED  # PINNED, YOURS or RECALLED

    @property
    def line(self) -> str:
        """The fact as the Memory section shows it: "- text (when)", the days its messages were
        sent on, so that a fact keeps its place in time as a summary's heading does."""
        text = self.fact.text.strip()
        return f"- {text} ({self.fact.when})" if self.fact.when else f"- {text}"

    @property
    def reason(self) -> str:
        """Why it was picked, in words: "pinned", "subject “key” · meaning 0.52"."""
        if self.why == ranking.PINNED:
            return "pinned: sent with every reply"
        if self.why == ranking.YOURS:
            return "yours: sent with every reply"
        parts = []
        if self.subject:
            parts.append(f"subject “{self.subject}”")
        if self.cosine is not None:
            parts.append(f"meaning {self.cosine:.2f}")
        parts.append("hot" if facts.is_hot(self.fact.heat) else "cold")
        return " · ".join(parts)


@dataclass(frozen=True)
class Left:
    """A fact not sent, and why."""

    fact: Candidate
    reason: str
    score: float | None = None


@dataclass
class Choice:
    pinned: list[Picked]
    yours: list[Picked]
    recalled: list[Picked]  # best first
    rejected: list[Left]


def parse_priority(value: object) -> tuple[str, ...]:
    """Read a budget priority ("pinned, yours, scene, facts, summaries, quotes", any order).

    Every one of the six parts once; raise ValueError naming the problem otherwise.
    """
    if not isinstance(value, str):
        raise ValueError("The budget priority is a list of parts separated by commas.")
    names = [name.strip().casefold() for name in re.split(r"[,>\s]+", value) if name.strip()]
    unknown = [name for name in names if name not in PRIORITY_NAMES]
    if unknown:
        raise ValueError(
            f"Unknown part “{unknown[0]}” in the budget priority: use {', '.join(PRIORITY_NAMES)}."
        )
    twice = sorted({name for name in names if names.count(name) > 1})
    if twice:
        raise ValueError(f"“{twice[0]}” is named twice in the budget priority.")
    missing = [name for name in PRIORITY_NAMES if name not in names]
    if missing:
        raise ValueError(f"The budget priority leaves out {', '.join(missing)}: name all six parts.")
    return tuple(names)


def subject_in(subjects: Iterable[str], query: str, ignore: Collection[str] = ()) -> str:
    """Return the first subject the query says as whole words ("" if none); names in `ignore`
    (casefolded) never match."""
    folded = query.casefold()
    for subject in subjects:
        name = subject.strip().casefold()
        if len(name) < 2 or name in ignore:
            continue
        if re.search(rf"(?<!\w){re.escape(name)}(?!\w)", folded):
            return subject.strip()
    return ""


def witnessed(first_seq: int | None, last_seq: int | None, seen: set[int] | None, block_of) -> bool:
    """Whether a speaker was present for every tier-0 block of the fact's messages (None: no
    presence filter; a fact tied to no messages is everyone's). `block_of(seq)` gives a block."""
    if seen is None or first_seq is None:
        return True
    last = last_seq if last_seq is not None else first_seq
    return all(block in seen for block in range(block_of(first_seq), block_of(last) + 1))


def choose(
    candidates: list[Candidate],
    *,
    cosines: dict[int, float],
    query: str,
    ignore: Collection[str] = (),
    max_facts: int,
    floor: float = facts.HOT_FLOOR,
    cold_floor: float = facts.COLD_FLOOR,
) -> Choice:
    """Decide which facts go with a reply. Pinned ones first, then yours (both always, newest
    first as given); the others scored and kept while they qualify, best first, at most `max_facts`."""
    choice = Choice([], [], [], [])
    scored: list[Picked] = []
    for fact in candidates:
        cosine = cosines.get(fact.id)
        subject = subject_in(fact.subjects, query, ignore)
        relevance = max(cosine or 0.0, WORD_RELEVANCE if subject else 0.0)
        score = facts.score(relevance, fact.confidence, fact.heat)
        if fact.pinned:
            choice.pinned.append(Picked(fact, score, relevance, cosine, subject, ranking.PINNED))
        elif fact.yours:
            choice.yours.append(Picked(fact, score, relevance, cosine, subject, ranking.YOURS))
        elif facts.qualifies(relevance, fact.heat, floor=floor, cold_floor=cold_floor):
            scored.append(Picked(fact, score, relevance, cosine, subject))
        else:
            reason = FLOOR if relevance < floor else COLD
            choice.rejected.append(Left(fact, reason, score))
    scored.sort(key=lambda p: (-p.score, -p.fact.id))
    choice.recalled = scored[: max(0, max_facts)]
    choice.rejected += [Left(p.fact, RANKED, p.score) for p in scored[max(0, max_facts) :]]
    return choice


def facts_text(picked: list[Picked]) -> str:
    """The facts' part of the Memory section: a heading, then one line per fact ("" if none)."""
    lines = [p.line for p in picked if p.fact.text.strip()]
    return "\n".join([FACTS_HEADING, *lines]) if lines else ""


def scene_text(note: str) -> str:
    """The scene note's part of the Memory section ("" when the note says nothing)."""
    return f"{SCENE_HEADING}\n{note.strip()}" if note.strip() else ""
