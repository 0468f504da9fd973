"""Lasting facts: the rules, with no storage attached.

Facts are short statements kept apart from the summaries — promises, relationships, discoveries,
goals, conditions, preferences, traits, events — each with a category, the named subjects, a
confidence and the message range it came from. This module holds what deciding about them needs,
as pure functions over plain data (standard library only, no Django, no I/O):

- `parse_reply` reads the memory manager's answer: OpenAI tool calls (`TOOLS`), else the JSON or
  XML of `FALLBACK_FORMAT`, read tolerantly, into validated `Operation`s and a notice for the host.
- `extract` is the deterministic extractor used when no Utility model is connected.
- `scene_note` reads the latest messages into where, who, when and what is unfinished.
- Heat, scoring, trimming and the memory budget's order, below.

Heat is a number from 0 (cold) to 1 (hot); a new fact starts at `NEW_HEAT`:

- `warm(heat)` on recall: ``min(1, heat + 0.5)``, so a recalled cold fact is hot again.
- `cool(heat, cycles)` once per memory cycle: ``heat × (1 − 0.1) ** cycles``, exponential decay
  (a fact left unused is halved in about 7 cycles and turns cold, below `HOT` = 0.5, after 7);
  a pinned fact never cools.
- `heat_factor(heat)`: 1 for a hot fact; ``0.5 + 0.5 × heat / HOT`` for a cold one, so a cold fact
  competes at half to full strength.
- `score(relevance, confidence, heat) = relevance × (0.5 + 0.5 × confidence) × heat_factor(heat)`:
  a low-confidence fact never counts for less than half, a cold one never less than half.
- `qualifies(relevance, heat)`: a hot fact needs relevance ≥ 0.35 (the summaries' score floor),
  a cold one ≥ 0.5 (only when clearly relevant).
"""

from __future__ import annotations

import html
import math
import re
from collections.abc import Callable, Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, TypeVar

from memory.drafts import shorten
from memory.extractive import NOT_NAMES, PLACE_NOUNS, STOPWORDS, proper_names, split_sentences
from memory.summarize import json_values

__all__ = [
    "CATEGORIES",
    "COLD_FLOOR",
    "DEMOTED_HEAT",
    "DEFAULT_CONFIDENCE",
    "EXTRACTED_CONFIDENCE",
    "FALLBACK_FORMAT",
    "HOT",
    "HOT_FLOOR",
    "MAX_TEXT",
    "NEW_HEAT",
    "TOOLS",
    "Draft",
    "FactView",
    "Operation",
    "Parsed",
    "SceneNote",
    "budget_order",
    "cool",
    "extract",
    "fallback_format",
    "heat_factor",
    "is_hot",
    "parse_reply",
    "qualifies",
    "render_scene_note",
    "scene_note",
    "score",
    "tools",
    "trim",
    "Trimmed",
    "warm",
]

CATEGORIES = ("promise", "relationship", "discovery", "goal", "condition", "preference", "trait", "event")
FALLBACK_CATEGORY = "event"
MAX_TEXT = 300  # characters of a fact
MAX_SUBJECT = 60  # characters of one subject
MAX_SUBJECTS = 8
MAX_REASON = 200
MAX_ANSWER = 20_000  # characters of an answer that are read
DEFAULT_CONFIDENCE = 0.7  # when the memory manager gives none
EXTRACTED_CONFIDENCE = 0.5  # the most the deterministic extractor ever claims

NEW_HEAT = 1.0
HOT = 0.5  # at or above: hot
DEMOTED_HEAT = 0.45  # a hot fact over the hot facts' token budget: the warmest of the cold
WARM_AMOUNT = 0.5
COOL_RATE = 0.1
HOT_FLOOR = 0.35  # relevance a hot fact needs
COLD_FLOOR = 0.5  # relevance a cold fact needs
COLD_STRENGTH = 0.5  # heat_factor of a fact at heat 0

KINDS = ("create", "update", "delete", "pin")

T = TypeVar("T")


@dataclass(frozen=True)
class Draft:
    """A fact as proposed, before it is stored."""

    text: str  # one statement that reads on its own, at most MAX_TEXT characters
    category: str
    subjects: tuple[str, ...]  # the named people and things it is about
    confidence: float  # 0..1
    first_seq: int  # the messages it came from
    last_seq: int


@dataclass(frozen=True)
class Operation:
    """One change the memory manager asked for."""

    kind: str  # "create" | "update" | "delete" | "pin"
    target: int | None  # the existing fact's id; None for "create"
    draft: Draft | None  # the new text for "create" and "update" (a correction); None otherwise
    reason: str = ""


@dataclass(frozen=True)
class Parsed:
    """What an answer asked for, and a line for the host when something was not understood."""

    operations: list[Operation]
    notice: str = ""
    source: str = "none"  # "tools" | "json" | "xml" | "none"


# The memory manager's tools and the fallback format.


def tools(categories: Sequence[str] = CATEGORIES) -> list[dict]:
    """Return the OpenAI `tools=[...]` definitions of create_fact, update_fact, delete_fact and pin_fact."""
    fact_fields = {
        "text": {
            "type": "string",
            "maxLength": MAX_TEXT,
            "description": "One short statement that reads on its own, naming who it is about.",
        },
        "category": {"type": "string", "enum": list(categories)},
        "subjects": {
            "type": "array",
            "items": {"type": "string"},
            "description": "The named people, places and things the fact is about.",
        },
        "confidence": {
            "type": "number",
            "minimum": 0,
            "maximum": 1,
            "description": "How sure the story makes it, from 0 to 1.",
        },
        "messages": {
            "type": "array",
            "items": {"type": "integer"},
            "description": "The numbers (#) of the transcript's messages it comes from.",
        },
    }
    fact_id = {"type": "integer", "description": "The id of an existing fact, as listed."}
    reason = {"type": "string", "description": "Why, in a few words."}

    def tool(name: str, description: str, properties: dict, required: list[str]) -> dict:
        parameters = {"type": "object", "properties": properties, "required": required}
        return {
            "type": "function",
            "function": {"name": name, "description": description, "parameters": parameters},
        }

    return [
        tool(
            "create_fact",
            "Save a new lasting fact: a promise, relationship, discovery, goal, condition, preference, "
            "trait or event that will matter later.",
            fact_fields,
            ["text", "category"],
        ),
        tool(
            "update_fact",
            "Correct an existing fact that the story has changed. The old one stays visible as corrected.",
            {"id": fact_id, **fact_fields, "reason": reason},
            ["id", "text"],
        ),
        tool(
            "delete_fact",
            "Forget an existing fact that was wrong or no longer matters.",
            {"id": fact_id, "reason": reason},
            ["id"],
        ),
        tool(
            "pin_fact",
            "Pin an existing fact so it is sent with every reply and never cools.",
            {"id": fact_id, "reason": reason},
            ["id"],
        ),
    ]


def fallback_format(categories: Sequence[str] = CATEGORIES) -> str:
    """Return the instructions appended to the prompt for a model that cannot call tools."""
    listed = ", ".join(categories)
    return f"""If you cannot call tools, answer with one JSON object and nothing else:
{{"operations": [
  {{"op": "create", "text": "…", "category": "…", "subjects": ["…"], "confidence": 0.8,
   "messages": [41, 44]}},
  {{"op": "update", "id": 12, "text": "…", "reason": "…"}},
  {{"op": "delete", "id": 3, "reason": "…"}},
  {{"op": "pin", "id": 4}}
]}}
or with XML tags:
<create category="goal" subjects="Mara" confidence="0.8" messages="41">Mara wants to be a knight.</create>
<update id="12">The corrected fact.</update>
<delete id="3"/>
<pin id="4"/>
Categories: {listed}. Each fact is one statement of at most {MAX_TEXT} characters that reads on its \
own; "messages" are the numbers (#) of the messages it comes from. Use only ids of the facts \
listed. If nothing needs to change, answer {{"operations": []}}."""


TOOLS = tools()
FALLBACK_FORMAT = fallback_format()


# Reading the answer.

_THINK_RE = re.compile(r"<(think|thinking|reasoning)>.*?</\1>", re.IGNORECASE | re.DOTALL)
_TAG_RE = re.compile(
    r"<(?P<tag>create|update|delete|pin)(?:_fact)?(?P<attrs>(?:\s[^<>]*?)?)\s*"
    r"(?:/>|>(?P<body>.*?)</(?P=tag)(?:_fact)?\s*>)",
    re.IGNORECASE | re.DOTALL,
)
_ATTR_RE = re.compile(r"""([A-Za-z_][\w-]*)\s*=\s*(?:"([^"]*)"|'([^']*)'|([^\s"'>/]+))""")
_CHILD_RE = r"<{0}>(.*?)</{0}>"
_NUMBER_RE = re.compile(r"\d{1,12}")
_ID_RE = re.compile(r"^\s*#?\s*(\d{1,12})\s*$")
_SUBJECT_SPLIT_RE = re.compile(r"\s*[,;]\s*|\s+and\s+")
_SPACE_RE = re.compile(r"\s+")

_KIND_NAMES = {
    "create": "create",
    "add": "create",
    "new": "create",
    "save": "create",
    "update": "update",
    "correct": "update",
    "correction": "update",
    "edit": "update",
    "replace": "update",
    "delete": "delete",
    "remove": "delete",
    "forget": "delete",
    "pin": "pin",
}


@dataclass
class _Reading:
    """Operations collected from one answer, and what was skipped on the way."""

    known_ids: Collection[int]
    known_categories: Mapping[int, str]
    first_seq: int
    last_seq: int
    categories: Sequence[str]
    operations: list[Operation] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)  # what was not understood
    missing: list[str] = field(default_factory=list)  # changes to facts that do not exist
    seen: set[tuple] = field(default_factory=set)
    changed: set[int] = field(default_factory=set)  # facts already updated or deleted

    def add(self, kind: object, fields: Mapping[str, Any], *, label: str) -> None:
        kind = _kind(kind)
        if kind is None:
            self.problems.append(f"{label} is not one of create, update, delete or pin")
            return
        target = None
        if kind != "create":
            target = _fact_id(fields.get("id", fields.get("target", fields.get("fact_id"))))
            if target is None:
                self.problems.append(f"a {kind} without a fact id")
                return
            if target not in self.known_ids:
                self.missing.append(f"#{target} ({kind})")
                return
        draft = None
        if kind in ("create", "update"):
            draft = self._draft(kind, target, fields)
            if draft is None:
                self.problems.append(f"a {kind} without text")
                return
        reason = shorten(_text(fields.get("reason")), MAX_REASON)
        key = (kind, target, draft.text.casefold() if draft else "")
        if key in self.seen:
            return  # the same change twice in one answer
        if kind in ("update", "delete"):
            if target in self.changed:
                self.problems.append(f"a second change to #{target}")
                return
            self.changed.add(target)
        self.seen.add(key)
        self.operations.append(Operation(kind=kind, target=target, draft=draft, reason=reason))

    def _draft(self, kind: str, target: int | None, fields: Mapping[str, Any]) -> Draft | None:
        text = shorten(_text(fields.get("text", fields.get("fact", fields.get("content")))), MAX_TEXT)
        if not any(char.isalnum() for char in text):
            return None
        raw_category = fields.get("category")
        if kind == "update" and not _text(raw_category) and target in self.known_categories:
            raw_category = self.known_categories[target]
        return Draft(
            text=text,
            category=_category(raw_category, self.categories),
            subjects=_subjects(fields.get("subjects", fields.get("subject"))),
            confidence=_confidence(fields.get("confidence")),
            **self._span(fields.get("messages", fields.get("message"))),
        )

    def _span(self, value: object) -> dict[str, int]:
        """The messages a fact cites, as first_seq/last_seq inside the block; the whole block when
        it cites none of them (numbers outside the block are not the fact's)."""
        if isinstance(value, str):
            value = _NUMBER_RE.findall(value)
        elif isinstance(value, int | float) and not isinstance(value, bool):
            value = [value]
        seqs = []
        for item in value if isinstance(value, list | tuple) else ():
            if isinstance(item, bool):
                continue
            try:
                seq = int(item) if isinstance(item, int | float) else int(str(item).strip().lstrip("#"))
            except (ValueError, OverflowError):
                continue
            if self.first_seq <= seq <= self.last_seq:
                seqs.append(seq)
        if not seqs:
            return {"first_seq": self.first_seq, "last_seq": self.last_seq}
        return {"first_seq": min(seqs), "last_seq": max(seqs)}


def parse_reply(
    content: str | None,
    tool_calls: list[dict] | None,
    *,
    known_ids: Collection[int],
    first_seq: int,
    last_seq: int,
    categories: Sequence[str] = CATEGORIES,
    known_categories: Mapping[int, str] | None = None,
) -> Parsed:
    """Read the memory manager's answer into operations; never raise.

    Tried in turn: the OpenAI tool calls (`create_fact`, `update_fact`, `delete_fact`, `pin_fact`,
    arguments a JSON string or a dict); the JSON of `FALLBACK_FORMAT` in `content` (bare, fenced,
    inside prose, a list, slightly broken); its XML tags. Each operation is validated: text trimmed
    and cut to MAX_TEXT at a word, an unknown category becomes "event", confidence clamped to 0..1
    (DEFAULT_CONFIDENCE when missing), subjects de-duplicated. A change to an id not in `known_ids`
    is dropped and named in the notice, as is a second update or delete of the same fact; the same
    operation twice counts once. An update without a category keeps the one `known_categories`
    gives for its fact. Drafts span the messages they cite ("messages": numbers of the transcript)
    inside `first_seq`..`last_seq`, the whole block when they cite none.
    """
    reading = _Reading(
        known_ids=known_ids,
        known_categories=known_categories or {},
        first_seq=first_seq,
        last_seq=last_seq,
        categories=tuple(categories) or CATEGORIES,
    )
    raw = content if isinstance(content, str) else ""
    raw = _THINK_RE.sub(" ", raw[:MAX_ANSWER]).strip()
    source = "none"
    for name, read in (
        ("tools", lambda: _from_tool_calls(tool_calls, reading)),
        ("json", lambda: _from_json(raw, reading)),
        ("xml", lambda: _from_xml(raw, reading)),
    ):
        try:
            if read():
                source = name
                break
        except RecursionError:  # absurdly nested JSON: not an answer worth reading
            continue
    understood = source != "none"
    return Parsed(operations=reading.operations, notice=_notice(reading, raw, understood), source=source)


def _notice(reading: _Reading, raw: str, understood: bool) -> str:
    if not understood:
        if raw:
            return (
                "Nothing was saved: the memory manager answered in prose, "
                "without tool calls, JSON or XML operations."
            )
        return "Nothing was saved: the memory manager's answer was empty."
    parts = []
    if reading.missing:
        parts.append("Skipped changes to facts that do not exist: " + ", ".join(reading.missing) + ".")
    if reading.problems:
        parts.append("Skipped " + "; ".join(reading.problems) + ".")
    if not reading.operations and parts:
        parts.insert(0, "Nothing was saved.")
    return " ".join(parts)


def _from_tool_calls(tool_calls: object, reading: _Reading) -> bool:
    """Add the operations of the tool calls; return whether there were any calls to read."""
    if not isinstance(tool_calls, list) or not tool_calls:
        return False
    for call in tool_calls:
        if not isinstance(call, Mapping):
            continue
        function = call.get("function") if isinstance(call.get("function"), Mapping) else call
        name = _text(function.get("name"))
        arguments = function.get("arguments")
        if isinstance(arguments, str):
            arguments = next((value for value in json_values(arguments) if isinstance(value, dict)), None)
        if not isinstance(arguments, Mapping):
            reading.problems.append(f"{name or 'a tool call'} whose arguments could not be read")
            continue
        reading.add(name, arguments, label=f'the tool "{shorten(name, 40)}"')
    return True


def _from_json(raw: str, reading: _Reading) -> bool:
    """Add the operations of the richest JSON in the answer; return whether it held the format."""
    best: list[tuple[object, Mapping[str, Any]]] | None = None
    for value in json_values(raw):
        found = _json_operations(value)
        if found is not None and (best is None or len(found) > len(best)):
            best = found
    if best is None:
        return False
    for kind, fields in best:
        label = f'"{shorten(_text(kind), 40)}"' if _text(kind) else "an item without an op"
        reading.add(kind, fields, label=label)
    return True


def _json_operations(value: object) -> list[tuple[object, Mapping[str, Any]]] | None:
    """Return (kind, fields) for each operation in a JSON value, or None if it is not the format.

    Under an "operations" key every item counts (one not understood is named in the notice); a
    bare list counts only when one of its items is an operation.
    """
    if isinstance(value, Mapping):
        keys = {str(key).casefold(): key for key in value}
        for name in ("operations", "ops", "actions", "changes", "tool_calls"):
            if name in keys:
                items = value[keys[name]]
                items = items if isinstance(items, list) else [items]
                return [_json_operation(item) for item in items]
        single = _json_operation(value)
        return [single] if single[0] is not None else None
    if isinstance(value, list):
        found = [_json_operation(item) for item in value]
        return found if not value or any(kind is not None for kind, _ in found) else None
    return None


def _json_operation(item: object) -> tuple[object, Mapping[str, Any]]:
    """Return an item's kind (None when it names none) and its fields."""
    if not isinstance(item, Mapping):
        return None, {}
    fields = {str(key).casefold(): entry for key, entry in item.items()}
    if isinstance(fields.get("function"), Mapping):  # a tool call written out as JSON
        return _json_operation(fields["function"])
    for key in ("op", "kind", "action", "operation", "type", "name", "tool"):
        kind = fields.get(key)
        if _kind(kind):
            arguments = fields.get("arguments", fields.get("args", fields.get("parameters")))
            if isinstance(arguments, str):
                arguments = next((value for value in json_values(arguments) if isinstance(value, dict)), None)
            if isinstance(arguments, Mapping):
                fields = {str(name).casefold(): entry for name, entry in arguments.items()}
            return kind, fields
    return None, fields


def _from_xml(raw: str, reading: _Reading) -> bool:
    found = False
    for match in _TAG_RE.finditer(raw):
        found = True
        fields: dict[str, Any] = {}
        for name, double, single, bare in _ATTR_RE.findall(match["attrs"] or ""):
            fields[name.casefold()] = html.unescape(double or single or bare)
        body = match["body"] or ""
        for name in ("text", "category", "subjects", "confidence", "messages", "reason", "id"):
            child = re.search(_CHILD_RE.format(name), body, re.IGNORECASE | re.DOTALL)
            if child:
                fields.setdefault(name, html.unescape(child.group(1)))
                body = body.replace(child.group(0), " ")
        body = html.unescape(re.sub(r"<[^<>]*>", " ", body)).strip()
        kind = match["tag"].casefold()
        if body:
            fields.setdefault("text" if kind in ("create", "update") else "reason", body)
        reading.add(kind, fields, label=f"<{kind}>")
    return found


def _kind(value: object) -> str | None:
    name = _text(value).casefold().removesuffix("_fact").removesuffix(" fact")
    return _KIND_NAMES.get(name)


def _text(value: object) -> str:
    if value is None or isinstance(value, (dict, list, tuple, set, bool)):
        return ""
    return _SPACE_RE.sub(" ", str(value)).strip()


def _fact_id(value: object) -> int | None:
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    found = _ID_RE.match(_text(value))
    return int(found.group(1)) if found else None


def _category(value: object, categories: Sequence[str]) -> str:
    name = _text(value).casefold()
    for candidate in (name, name.removesuffix("s")):
        if candidate in categories:
            return candidate
    return FALLBACK_CATEGORY if FALLBACK_CATEGORY in categories else categories[-1]


def _subjects(value: object) -> tuple[str, ...]:
    if isinstance(value, str):
        items: Iterable[object] = _SUBJECT_SPLIT_RE.split(value)
    elif isinstance(value, (list, tuple)):
        items = value
    else:
        items = ()
    kept: list[str] = []
    seen: set[str] = set()
    for item in items:
        subject = shorten(_text(item).strip(" .\"'“”"), MAX_SUBJECT)
        if subject and subject.casefold() not in seen and len(kept) < MAX_SUBJECTS:
            seen.add(subject.casefold())
            kept.append(subject)
    return tuple(kept)


def _confidence(value: object) -> float:
    if isinstance(value, bool) or value is None:
        return DEFAULT_CONFIDENCE
    text = _text(value)
    try:
        number = float(text.rstrip("%")) / 100 if text.endswith("%") else float(text)
    except ValueError:
        return DEFAULT_CONFIDENCE
    return _unit(number, default=DEFAULT_CONFIDENCE)


def _unit(number: float, *, default: float = 0.0) -> float:
    if not isinstance(number, (int, float)) or math.isnan(number):
        return default
    return min(1.0, max(0.0, float(number)))


# Heat.


def warm(heat: float, *, amount: float = WARM_AMOUNT) -> float:
    """Return a recalled fact's heat: raised by `amount`, at most 1."""
    return _unit(_unit(heat) + max(0.0, amount))


def cool(heat: float, cycles: int = 1, *, rate: float = COOL_RATE, pinned: bool = False) -> float:
    """Return the heat after `cycles` memory cycles without recall: × (1 − rate) each; pinned keeps it."""
    heat = _unit(heat)
    if pinned or cycles <= 0:
        return heat
    return heat * (1.0 - _unit(rate)) ** cycles


def is_hot(heat: float) -> bool:
    """Return whether a fact at this heat is hot (competes at full strength)."""
    return _unit(heat) >= HOT


def heat_factor(heat: float) -> float:
    """Return 1 for a hot fact; from COLD_STRENGTH at heat 0 up to 1 at HOT for a cold one."""
    heat = _unit(heat)
    if heat >= HOT:
        return 1.0
    return COLD_STRENGTH + (1.0 - COLD_STRENGTH) * heat / HOT


def score(relevance: float, confidence: float, heat: float) -> float:
    """Return relevance × (0.5 + 0.5·confidence) × heat_factor(heat)."""
    return _unit(relevance) * (0.5 + 0.5 * _unit(confidence)) * heat_factor(heat)


def qualifies(
    relevance: float, heat: float, *, floor: float = HOT_FLOOR, cold_floor: float = COLD_FLOOR
) -> bool:
    """Return whether a fact may be recalled: relevance ≥ `floor` when hot, ≥ `cold_floor` when cold."""
    return _unit(relevance) >= (floor if is_hot(heat) else max(floor, cold_floor))


# Trimming and the memory budget.


@dataclass(frozen=True)
class FactView:
    """What trimming needs to know about one active fact."""

    id: int
    text: str
    heat: float
    confidence: float
    pinned: bool = False
    by_person: bool = False  # written or edited by a person
    last_seq: int = 0


def _importance(fact: FactView) -> tuple:
    return (fact.pinned, fact.by_person, _unit(fact.heat) * _unit(fact.confidence), fact.last_seq, fact.id)


@dataclass(frozen=True)
class Trimmed:
    """What `trim` decided: the facts to soft-delete, and the hot ones to demote to cold."""

    forget: list[int]  # least important first
    cool: list[int]  # least important first


def trim(
    facts: list[FactView], *, max_count: int, token_budget: int, count_tokens: Callable[[str], int]
) -> Trimmed:
    """Decide which unpinned facts leave a memory set and which stop being hot.

    Importance: pinned, then written by a person, then heat × confidence, then the newest last
    message, then the newest id. Walking from the most important, a fact is kept while the kept
    ones number at most `max_count`; the rest are forgotten (soft-deleted). Of the kept, the hot
    ones stay hot while their tokens (`count_tokens(text)`) fit `token_budget`; once a hot fact
    does not fit, it and every less important hot one are demoted to cold (`DEMOTED_HEAT`): still
    found, but only when clearly relevant. Pinned facts are always kept and hot, and count against
    both limits.
    """
    kept = 0
    tokens = 0
    tokens_full = False
    forget: list[int] = []
    demote: list[int] = []
    for fact in sorted(facts, key=_importance, reverse=True):
        hot = fact.pinned or is_hot(fact.heat)
        cost = max(0, count_tokens(fact.text)) if hot else 0
        if fact.pinned:
            kept += 1
            tokens += cost
            continue
        if kept >= max_count:
            forget.append(fact.id)
            continue
        kept += 1
        if hot and (tokens_full or tokens + cost > token_budget):
            tokens_full = True
            demote.append(fact.id)
        else:
            tokens += cost
    return Trimmed(forget=list(reversed(forget)), cool=list(reversed(demote)))


BUDGET_PRIORITY = ("pinned", "yours", "scene", "facts", "summaries", "quotes")


def budget_order(
    parts: Mapping[str, list[T]],
    *,
    priority: tuple[str, ...] = BUDGET_PRIORITY,
    budget: int,
    cost: Callable[[T], int],
    overhead: Mapping[str, int] | None = None,
) -> dict[str, list[T]]:
    """Return what fits the memory budget, part by part in `priority` order.

    Each part's items are tried in their own order; one that does not fit what is left is skipped
    and the next tried. A part's `overhead` (its heading) is paid once, with its first item. Parts
    not named in `priority` come after, in their given order. Every part given is in the result,
    in priority order, perhaps empty.
    """
    order = [name for name in priority if name in parts] + [name for name in parts if name not in priority]
    overhead = overhead or {}
    left = budget
    chosen: dict[str, list[T]] = {}
    for name in order:
        chosen[name] = []
        for item in parts[name]:
            price = max(0, cost(item)) + (0 if chosen[name] else max(0, overhead.get(name, 0)))
            if price <= left:
                chosen[name].append(item)
                left -= price
    return chosen


# The deterministic extractor.

_NAME = r"[A-Z][\w'’-]*(?:\s(?:of\s|the\s|de\s|van\s)?[A-Z][\w'’-]*){0,3}"
_RELATIONS = (
    "sister|brother|sibling|twin|friend|best friend|wife|husband|spouse|mother|father|mum|mom|dad|son|"
    "daughter|cousin|aunt|uncle|niece|nephew|grandmother|grandfather|mentor|teacher|apprentice|student|"
    "rival|enemy|nemesis|lover|betrothed|fiancée|fiancee|fiancé|fiance|partner|master|mistress|servant|"
    "squire|knight|lord|lady|queen|king|ally|guardian|ward|bodyguard|captain|employer|boss|girlfriend|"
    "boyfriend"
)
_BONDS = (
    "married|engaged|siblings|twins|friends|lovers|partners|allies|enemies|rivals|betrothed|related|cousins"
)
_CONDITIONS = (
    "wounded|injured|hurt|poisoned|ill|sick|cursed|asleep|unconscious|bleeding|dying|feverish|blind|"
    "blinded|paralysed|paralyzed|pregnant|imprisoned|captured|trapped|starving|infected|possessed|"
    "bewitched|petrified|hunted"
)
_FEELINGS = "loves|hates|trusts|distrusts|fears|adores|despises|betrayed|killed|married"
# What "I love you" says of the speaker: "Mara loves Tobin".
_THIRD_PERSON = {
    verb: verb + "s" for verb in ("love", "hate", "trust", "distrust", "fear", "adore", "despise")
}
_FIRST_FEELINGS = "|".join(_THIRD_PERSON)
_GOALS = {"want to": "wants to", "need to": "needs to", "plan to": "plans to", "intend to": "intends to"}
_GOALS |= {"must": "must", "am going to": "is going to", "mean to": "means to"}
_VOWS = {"promise": "promised", "swear": "swore", "vow": "vowed", "will": "promised", "shall": "promised"}
_DISCOVERIES = "found out|found|discovered|learned|learnt|realised|realized|figured out"

_END = r"(?P<rest>[^.!?;]*?)[.!…]*$"
_PATTERNS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (category, re.compile(pattern))
    for category, pattern in (
        (
            "promise",
            rf"^(?:.*?[,:—–-]\s+)?I\s+(?P<vow>promise|swear|vow)\b(?:\s+to\s+you|\s+on\s+[\w\s'’]+?)?"
            rf"(?:,?\s*(?:that\s+)?I(?:'ll|’ll|\s+will|\s+shall)\s+|\s+(?:that\s+)?(?=never\b)|\s+to\s+){_END}",
        ),
        ("promise", rf"^(?:.*?[,:—–-]\s+)?I\s+(?P<vow>will|shall)\s+{_END}"),
        ("promise", rf"^(?:.*?[,:—–-]\s+)?I(?P<vow>'ll|’ll)\s+(?=never\b){_END}"),
        (
            "relationship",
            rf"^(?P<who>{_NAME}|[Yy]ou)\s+(?:is|are|was)\s+my\s+(?P<rel>{_RELATIONS})\b{_END}",
        ),
        (
            "relationship",
            rf"^(?P<who>{_NAME}|[Yy]ou|[Ww]e)\s+(?:and\s+(?P<other>I|{_NAME})\s+)?(?:are|were)\s+"
            rf"(?:now\s+)?(?P<bond>{_BONDS})\b{_END}",
        ),
        (
            "relationship",
            rf"^(?P<who>{_NAME})\s+is\s+(?P<whose>{_NAME})['’]s\s+(?P<rel>{_RELATIONS})\b{_END}",
        ),
        (
            "relationship",
            rf"^(?P<who>I|{_NAME})\s+(?P<feel>{_FEELINGS}|{_FIRST_FEELINGS})\s+(?P<whom>you|(?:the\s+)?{_NAME})\b{_END}",
        ),
        (
            "condition",
            rf"^(?P<who>I|[Yy]ou|{_NAME})(?P<verb>\s+(?:am|is|are|was|were)|['’]m|['’]re|['’]s)\s+(?:now\s+|badly\s+|"
            rf"gravely\s+|still\s+|very\s+)?(?P<cond>{_CONDITIONS})(?![\w'’-]){_END}",
        ),
        (
            "discovery",
            rf"^(?:.*?[,:—–-]\s+)?(?P<who>I|[Ww]e|{_NAME})\s+(?:have\s+|has\s+|just\s+)?(?P<found>{_DISCOVERIES})"
            rf"\s+(?P<rest>(?:that|where|who|how|why)\s+[^.!?;]+?|the\s+[^.!?;]+?)[.!…]*$",
        ),
        (
            "goal",
            rf"^(?:.*?[,:—–-]\s+)?I\s+(?P<goal>{'|'.join(_GOALS)})\s+{_END}",
        ),
    )
)
_QUESTION_RE = re.compile(r"\?\W*$")
_HYPOTHETICAL_RE = re.compile(
    r"\b(?:if|unless|would|could|might|maybe|perhaps|suppose|supposing|imagine|wish|whether|pretend|"
    r"pretending|dream|dreamt|dreamed|joke|joking|kidding|should|someday|one day)\b",
    re.IGNORECASE,
)
_NEGATION_RE = re.compile(
    r"\b(?:not|no|nobody|nothing|nor|neither|none|cannot|without)\b|n['’]t\b", re.IGNORECASE
)
_NEVER_RE = re.compile(r"\bnever\b", re.IGNORECASE)
_FIRST_PERSON = (
    (re.compile(r"\bI\s+am\b"), "{me} is"),
    (re.compile(r"\bI['’]m\b"), "{me} is"),
    (re.compile(r"\bI['’]ve\b"), "{me} has"),
    (re.compile(r"\bI['’]ll\b"), "{me} will"),
    (re.compile(r"\bI['’]d\b"), "{me} would"),
    (re.compile(r"\b(?:I|me|myself)\b"), "{me}"),
    (re.compile(r"\b(?:my|mine)\b", re.IGNORECASE), "{me}'s"),
)
_SECOND_PERSON = (
    (re.compile(r"^you\s+are\b", re.IGNORECASE), "{you} is"),
    (re.compile(r"^you['’]re\b", re.IGNORECASE), "{you} is"),
    (re.compile(r"\b(?:you|yourself)\b", re.IGNORECASE), "{you}"),
    (re.compile(r"\b(?:your|yours)\b", re.IGNORECASE), "{you}'s"),
)
_SECOND_RE = re.compile(r"\b(?:you|your|yours|yourself|you['’]re)\b", re.IGNORECASE)
_LEFT_PRONOUN_RE = re.compile(r"\b(?:he|she|him|her|they|them|it)\b", re.IGNORECASE)
_CONFIDENCE = {"promise": 0.5, "relationship": 0.5, "condition": 0.4, "discovery": 0.4, "goal": 0.4}


def _person(text: str, me: str, you: str | None) -> str | None:
    """Rewrite first and second person as names; None when a "you" has nobody to stand for."""
    for pattern, replacement in _FIRST_PERSON:
        text = pattern.sub(replacement.format(me=me), text)
    if _SECOND_RE.search(text):
        if not you:
            return None
        for pattern, replacement in _SECOND_PERSON:
            text = pattern.sub(replacement.format(you=you), text)
    return text


def _sentence_fact(sentence: str, speaker: str, addressee: str | None) -> tuple[str, str] | None:
    """Return (category, text) for a sentence matching a pattern, else None."""
    if _QUESTION_RE.search(sentence) or _HYPOTHETICAL_RE.search(sentence) or _NEGATION_RE.search(sentence):
        return None
    sentence = sentence.strip(" \"'“”*_")
    for category, pattern in _PATTERNS:
        found = pattern.match(sentence)
        if found is None:
            continue
        groups = found.groupdict()
        if _NEVER_RE.search(sentence) and not (
            category == "promise" and re.match(r"never\b", groups["rest"])
        ):
            return None
        text = _template(category, groups)
        if text is None:
            continue
        text = _person(text, speaker, addressee)
        if text is None or _LEFT_PRONOUN_RE.match(text):
            return None
        return category, text[0].upper() + text[1:].rstrip(" ,") + "."
    return None


# Verbs after "I will"/"I must" that open a remark rather than a vow or a goal ("I must say, …").
_REMARK_VERBS = frozenset("say admit confess ask tell apologise apologize thank warn agree".split())
# Verbs too slight to be a vow or goal with only a word or two after them ("I will be back").
_SLIGHT_VERBS = frozenset("be go see do get have try think let sleep rest check know".split())
# A clause ends at a comma, semicolon or dash, or where "and"/"but" starts another with its own subject.
_CLAUSE_END_RE = re.compile(r"\s*[,;:—–]\s|\s+-\s|\s+(?:and|but|or|so|then)\s+(?:I|we|you|he|she|they)\b")


def _too_slight(rest: str) -> bool:
    """Return whether what follows "I will"/"I want to" is too little to be worth keeping."""
    words = rest.split()
    if not words:
        return True
    first = words[0].casefold().strip(",;:")
    return first in _REMARK_VERBS or (len(words) < 3 and first in _SLIGHT_VERBS) or len(words) < 2


_PRONOUNS = frozenset({"I", "we", "We", "you", "You"})


def _template(category: str, g: Mapping[str, str | None]) -> str | None:
    rest = _CLAUSE_END_RE.split(g.get("rest") or "", maxsplit=1)[0].strip()
    if category == "promise":
        if _too_slight(rest):
            return None
        verb = _VOWS.get((g.get("vow") or "will").strip("'’"), "promised")
        if rest.startswith("never "):
            return f"I {verb} never to {rest[6:].removeprefix('to ')}"
        return f"I {verb} to {rest}"
    who = (g.get("who") or "").strip()
    words = who.split()
    titled = len(words) > 1 and words[0] == "The"  # "The Duke" is someone
    if words and words[0].casefold() in STOPWORDS and who not in _PRONOUNS and not titled:
        return None  # "This is my friend", "He is wounded": nobody named
    if category == "relationship":
        if g.get("rel"):
            if g.get("whose"):
                return f"{who} is {g['whose']}'s {g['rel']} {rest}"
            return f"{who} is my {g['rel']} {rest}"
        if g.get("bond"):
            other = g.get("other")
            if who.casefold() == "we":
                return f"I and you are {g['bond']} {rest}"
            if other:
                return f"{who} and {other} are {g['bond']} {rest}"
            return None  # "Mara and Tobin" only in the other pattern; a lone name is "Mara are…"
        feel = g.get("feel") or ""
        if feel in _THIRD_PERSON:
            if who != "I":
                return None  # "Mara love Tobin": not a sentence the pattern understands
            feel = _THIRD_PERSON[feel]
        return f"{who} {feel} {g.get('whom')} {rest}"
    if category == "condition":
        verb = "was" if (g.get("verb") or "").strip() in ("was", "were") else "is"
        return f"{who} {verb} {g['cond']} {rest}"
    if category == "discovery":
        subject = "I and you" if who.casefold() == "we" else who
        verb = (g.get("found") or "found").replace("learnt", "learned")
        if rest.startswith("the ") and verb not in ("found", "discovered"):
            return None  # "I learned the old songs": a skill, not a discovery
        return f"{subject} {verb} {rest}"
    if category == "goal":
        if _too_slight(rest):
            return None
        return f"I {_GOALS[g['goal']]} {rest}"
    return None


def _clean_name(value: object) -> str:
    return _SPACE_RE.sub(" ", str(value or "")).strip()[:MAX_SUBJECT]


def _mentioned(names: Collection[str], text: str) -> list[str]:
    """Return those of `names` that the text says as whole words."""
    folded = text.casefold()
    return [name for name in names if name and re.search(rf"\b{re.escape(name.casefold())}\b", folded)]


def _subjects_of(text: str, speaker: str, names: Collection[str]) -> tuple[str, ...]:
    """Return the known names and capitalised names a fact mentions, in the order it mentions them."""
    folded = text.casefold()
    known = _mentioned([speaker, *sorted(names, key=len, reverse=True)], text)
    found = known + [name for name in proper_names(text, initial=True) if not _mentioned(known, name)]
    return _subjects(sorted(found, key=lambda name: folded.find(name.casefold())))


def extract(lines: Sequence[tuple[int, str, str]], *, names: Collection[str] = ()) -> list[Draft]:
    """Return the facts a block of (seq, speaker, text) lines states plainly, in the order said.

    One fact at most per sentence, from a promise ("I promise/swear/vow to…", "I will…", "I'll
    never…"), a relationship ("X is my sister", "X is Y's friend", "we are married", "X loves Y"),
    a condition ("X is wounded/poisoned/cursed/asleep…"), a discovery ("found/discovered/learned
    that…") or a goal ("I want to/need to/plan to/must…"). First person is rewritten with the
    speaker's name and "you" with the previous speaker's, so a fact reads on its own ("Mara
    promised to return the key."); a "you" with nobody before, a "he"/"she" left unresolved, a
    question, a hypothetical or a negation gives nothing. Confidence at most EXTRACTED_CONFIDENCE.
    """
    drafts: list[Draft] = []
    seen: set[str] = set()
    previous: str | None = None
    for seq, raw_speaker, text in lines:
        speaker = _clean_name(raw_speaker)
        if not isinstance(text, str) or not speaker:
            continue
        addressee = previous if previous and previous.casefold() != speaker.casefold() else None
        for sentence in split_sentences(text):
            found = _sentence_fact(sentence, speaker, addressee)
            if found is None:
                continue
            category, fact = found
            fact = shorten(fact, MAX_TEXT)
            if fact.casefold() in seen:
                continue
            seen.add(fact.casefold())
            drafts.append(
                Draft(
                    text=fact,
                    category=category,
                    subjects=_subjects_of(fact, speaker, names),
                    confidence=min(EXTRACTED_CONFIDENCE, _CONFIDENCE[category]),
                    first_seq=seq,
                    last_seq=seq,
                )
            )
        previous = speaker
    return drafts


# Scene notes.

MAX_NOTE_FIELD = 80
MAX_WHO = 8
MAX_THREADS = 4
MAX_THREAD = 140


@dataclass(frozen=True)
class SceneNote:
    """Where the scene is, who is there, when, and what is left open."""

    where: str = ""
    who: tuple[str, ...] = ()
    when: str = ""
    open_threads: tuple[str, ...] = ()


_PLACE_NOUN = "|".join(sorted(PLACE_NOUNS, key=len, reverse=True))
_PLACE_RE = re.compile(
    rf"\b(?:in|at|inside|into|within|outside)\s+"
    rf"(?P<place>the\s+(?:{_NAME}(?:\s+(?:{_PLACE_NOUN}))?|(?:[a-z]+\s+)?(?:{_PLACE_NOUN}))|{_NAME})\b"
)
_TIME_RE = re.compile(
    r"\b(?P<last>last\s+|good\s+|every\s+|each\s+|yesterday\s+)?"
    r"(?P<when>the\s+next\s+(?:day|morning|evening|night)|next\s+morning|dawn|daybreak|sunrise|morning|noon|"
    r"midday|afternoon|dusk|sunset|evening|midnight|night|tonight)\b",
    re.IGNORECASE,
)


def scene_note(lines: Sequence[tuple[int, str, str]], *, names: Collection[str] = ()) -> SceneNote:
    """Read the latest (seq, speaker, text) lines, oldest first, into a short scene note.

    Where: the latest "in/at the <Capitalised name or place noun>" (or "in <Name>" that is not a
    person). Who: the speakers, then the known `names` mentioned, in order of appearance. When:
    the latest time word (dawn, morning, noon, evening, night, midnight, "the next day"…) that is
    not "last night" or "good night". Open threads: the questions nobody else has spoken after, and
    the promises these lines made.
    """
    people = {name.casefold() for name in names}
    where = ""
    when = ""
    who: list[str] = []
    questions: list[tuple[int, str, str]] = []
    for index, (_seq, raw_speaker, text) in enumerate(lines):
        speaker = _clean_name(raw_speaker)
        if not isinstance(text, str):
            continue
        if speaker:
            who.append(speaker)
        who += _mentioned(names, text)
        for sentence in split_sentences(text):
            for match in _PLACE_RE.finditer(sentence):
                place = match["place"]
                bare = place.casefold().removeprefix("the ")
                if not (bare in people or bare in NOT_NAMES or bare.endswith(("'s", "’s"))):
                    where = place
            for match in _TIME_RE.finditer(sentence):
                if not match["last"]:
                    when = match["when"].lower()
            if _QUESTION_RE.search(sentence):
                questions.append((index, speaker, sentence))
    threads: list[str] = []
    for index, speaker, question in questions:
        answered = any(_clean_name(later[1]).casefold() != speaker.casefold() for later in lines[index + 1 :])
        if not answered:
            threads.append(f"{speaker} asked: {question}" if speaker else question)
    threads += [draft.text for draft in extract(lines, names=names) if draft.category == "promise"]
    return SceneNote(
        where=shorten(where, MAX_NOTE_FIELD),
        who=_subjects(who)[:MAX_WHO],
        when=shorten(when, MAX_NOTE_FIELD),
        open_threads=tuple(shorten(thread, MAX_THREAD) for thread in threads[-MAX_THREADS:]),
    )


def render_scene_note(note: SceneNote) -> str:
    """Return the note as prompt text, one labelled line per field that has something; "" if none."""
    parts = []
    if note.where:
        parts.append(f"Where: {note.where}")
    if note.who:
        parts.append("Who: " + ", ".join(note.who))
    if note.when:
        parts.append(f"When: {note.when}")
    if note.open_threads:
        parts.append("Open threads:")
        parts.extend(f"- {thread}" for thread in note.open_threads)
    return "\n".join(parts)
