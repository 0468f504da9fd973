"""The shape of a memory summary, shared by the offline summariser and the Utility-model path.

A summary has three parts: a one-line heading (who, which scene, when), a few facts likely to
matter later, and distinctive keywords. `render` gives the text that goes into a prompt; `clip`
enforces the size limits on anything a summariser produced. Pure: no Django, no I/O.
"""

from __future__ import annotations

import datetime
import re
from collections.abc import Iterable
from dataclasses import dataclass, field

__all__ = [
    "MAX_FACT",
    "MAX_FACTS",
    "MAX_HEADING",
    "MAX_KEYWORD",
    "MAX_KEYWORDS",
    "MONTHS",
    "Draft",
    "Line",
    "clip",
    "read",
    "render",
    "shorten",
    "when_label",
]

MAX_FACTS = 6
MAX_KEYWORDS = 10
MAX_HEADING = 200  # characters
MAX_FACT = 300  # characters
MAX_KEYWORD = 60  # characters; a "keyword" longer than this is a parsing accident, not a name

# Fixed English abbreviations rather than strftime("%b"), which follows the process locale.
MONTHS = ("Jan", "Feb", "Mar", "Apr", "May", "Jun", "Jul", "Aug", "Sep", "Oct", "Nov", "Dec")

_SPACE_RE = re.compile(r"\s+")


@dataclass(frozen=True)
class Line:
    """One message of a block, as the summariser sees it."""

    seq: int
    speaker: str
    text: str
    when: datetime.datetime | None = None
    is_human: bool = False


@dataclass(frozen=True)
class Draft:
    """A summary's three parts."""

    heading: str  # one line: who is involved, which scene, when
    facts: list[str] = field(default_factory=list)  # each one sentence, small talk dropped
    keywords: list[str] = field(default_factory=list)  # distinctive names, places, objects


def render(draft: Draft) -> str:
    """Return the summary as it is injected into a prompt: heading, "- fact" lines, keywords."""
    parts = []
    if draft.heading.strip():
        parts.append(draft.heading.strip())
    parts.extend(f"- {fact}" for fact in draft.facts if fact.strip())
    keywords = [keyword for keyword in draft.keywords if keyword.strip()]
    if keywords:
        parts.append("Keywords: " + ", ".join(keywords))
    return "\n".join(parts)


_KEYWORDS_LINE = re.compile(r"^\s*keywords\s*:\s*(.*)$", re.IGNORECASE)
_BULLET = re.compile(r"^\s*(?:[-*•]|\d+[.)])\s+")


def read(text: str) -> Draft:
    """Read a person's memory text back into its parts, keeping every word (no limits applied).

    The first line is the heading; a "Keywords: a, b" line gives the keywords; every other
    non-empty line is a fact, bullet marks dropped. `render(read(render(d))) == render(d)`.
    """
    heading = ""
    facts: list[str] = []
    keywords: list[str] = []
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        found = _KEYWORDS_LINE.match(line)
        if found:
            keywords += [k.strip() for k in found.group(1).split(",") if k.strip()]
        elif not heading and not facts:
            heading = line
        else:
            facts.append(_BULLET.sub("", line))
    return Draft(heading=heading, facts=facts, keywords=keywords)


def _day(moment: datetime.date) -> datetime.date:
    return moment.date() if isinstance(moment, datetime.datetime) else moment


def _format_day(day: datetime.date, *, month: bool = True, year: bool = True) -> str:
    text = str(day.day)
    if month:
        text += f" {MONTHS[day.month - 1]}"
    if year:
        text += f" {day.year}"
    return text


def when_label(times: Iterable[datetime.date | None]) -> str:
    """Return the days the times fall on: "" for none, "12 Mar 2026", or a range like "12–14 Mar 2026".

    Each time counts on the calendar day of its own timezone (naive times as they are).
    """
    days = sorted({_day(moment) for moment in times if isinstance(moment, datetime.date)})
    if not days:
        return ""
    first, last = days[0], days[-1]
    if first == last:
        return _format_day(first)
    if first.year != last.year:
        return f"{_format_day(first)} – {_format_day(last)}"
    if first.month != last.month:
        return f"{_format_day(first, year=False)} – {_format_day(last)}"
    return f"{first.day}–{_format_day(last)}"


def shorten(text: str, limit: int) -> str:
    """Collapse whitespace to single spaces and cut to `limit` characters, ending on "…" if cut."""
    text = _SPACE_RE.sub(" ", str(text)).strip()
    if len(text) <= limit:
        return text
    if limit <= 1:
        return text[:limit]
    cut = text[: limit - 1]
    # Prefer ending on a whole word, unless that would throw away most of the text.
    space = cut.rfind(" ")
    if space >= limit * 0.6:
        cut = cut[:space]
    return cut.rstrip(" ,;:-–—") + "…"


def _unique(items: object, limit: int, cap: int, strip: str = "") -> list[str]:
    if isinstance(items, str):
        items = [items]
    elif not isinstance(items, Iterable):
        items = []
    kept: list[str] = []
    seen: set[str] = set()
    for item in items:
        if len(kept) >= cap:
            break
        if item is None:
            continue
        text = shorten(str(item).strip(strip) if strip else str(item), limit)
        key = text.casefold()
        if not text or key in seen:
            continue
        seen.add(key)
        kept.append(text)
    return kept


# Keywords lose the punctuation and markdown a model or a sentence left around them.
_KEYWORD_STRIP = " \t\r\n.,;:!?\"'“”‘’`*_#()[]{}"


def clip(draft: Draft, *, max_facts: int = MAX_FACTS, max_keywords: int = MAX_KEYWORDS) -> Draft:
    """Return the draft within the limits: one-line heading, stripped and de-duplicated facts and keywords.

    Facts and keywords are compared case-insensitively; the first of a duplicate pair is kept.
    """
    heading = shorten(draft.heading or "", MAX_HEADING)
    facts = _unique(draft.facts or (), MAX_FACT, max(0, max_facts))
    keywords = _unique(draft.keywords or (), MAX_KEYWORD, max(0, max_keywords), _KEYWORD_STRIP)
    return Draft(heading=heading, facts=facts, keywords=keywords)
