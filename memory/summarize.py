"""Summaries written by the Utility model: the prompts that ask for them, and a tolerant reader of answers.

`block_messages` asks for a summary of one block of messages, `rollup_messages` for a broader one
across several summaries, each in the host's own prompt or the built-in one (`memory.prompts`);
both want a JSON object {"heading", "facts", "keywords"}. `parse` reads whatever came back (clean
JSON, JSON wrapped in prose or fences or slightly broken, labelled sections, or plain prose) and
never raises. Pure: no Django, no network, no I/O.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Iterator, Sequence
from typing import Any

from memory import extractive, prompts
from memory.drafts import Draft, Line, clip, render, shorten, when_label

__all__ = ["EMPTY_SUMMARY", "UNTITLED", "block_messages", "json_values", "parse", "rollup_messages"]

EMPTY_SUMMARY = "(empty summary)"  # the heading of a useless answer when there is nothing to fall back on
UNTITLED = "(untitled)"  # the heading of a usable answer that gave facts but no heading
MAX_PROMPT_MESSAGE = 4000  # characters of one message shown to the model
MAX_PROMPT_NAME = 40
MAX_ANSWER = 20_000  # characters of an answer that are read; a useful one is far shorter


def _name(value: object) -> str:
    return shorten(value, MAX_PROMPT_NAME) if isinstance(value, str) else ""


def _pov_values(pov: str | None, room_title: str) -> dict[str, str]:
    name = _name(pov)
    return {"pov": name, "pov_rule": prompts.pov_rule(name), "room": _name(room_title) if room_title else ""}


def block_messages(
    lines: list[Line], *, pov: str | None = None, room_title: str = "", template: str = ""
) -> list[dict]:
    """Return chat-completion messages asking the Utility model to summarise a block of messages.

    `template` is the host's own prompt for block summaries; blank, the built-in one.
    """
    lines = [line for line in (lines or ()) if isinstance(line, Line)]
    values = _pov_values(pov, room_title)
    header = []
    if values["room"]:
        header.append(f"Room: {values['room']}")
    when = when_label([line.when for line in lines])
    if when:
        header.append(f"Dates: {when}")
    speakers: list[str] = []
    characters: list[str] = []
    people: list[str] = []
    for line in lines:
        name = _name(line.speaker) or "(unnamed)"
        label = f"{name} (played by a person)" if line.is_human else name
        if label not in speakers:
            speakers.append(label)
            if _name(line.speaker):
                (people if line.is_human else characters).append(name)
    if speakers:
        header.append("Speakers: " + ", ".join(speakers))

    material = "\n".join(header)
    material += "\n\nTranscript:\n" + transcript(lines)
    values |= {"messages": material.lstrip(), "char": ", ".join(characters), "user": ", ".join(people)}
    return prompts.render("block", template, values)


def transcript(lines: Sequence[Line]) -> str:
    """The lines as a model reads them, "#seq Speaker: text" each; a "[day]" marker before each
    day's first line when they span days (one day is said in a "Dates:" header instead)."""
    rows = []
    days = {when_label([line.when]) for line in lines if line.when is not None}
    day = None
    for line in lines:
        if len(days) > 1 and line.when is not None and when_label([line.when]) != day:
            day = when_label([line.when])
            rows.append(f"[{day}]")
        text = shorten(line.text if isinstance(line.text, str) else "", MAX_PROMPT_MESSAGE)
        rows.append(f"#{line.seq} {_name(line.speaker) or '(unnamed)'}: {text}")
    return "\n".join(rows) or "(no messages)"


def rollup_messages(
    children: list[Draft], *, tier: int, pov: str | None = None, room_title: str = "", template: str = ""
) -> list[dict]:
    """Return chat-completion messages asking for one broader summary that tells the arc across `children`.

    `template` is the host's own prompt for roll-ups; blank, the built-in one.
    """
    try:
        level = max(1, int(tier))
    except (TypeError, ValueError):
        level = 1
    notes = [
        f"Note {number}:\n{render(clip(child))}"
        for number, child in enumerate((child for child in children or () if isinstance(child, Draft)), 1)
    ]
    values = _pov_values(pov, room_title)
    values |= {
        "notes": "Notes, oldest first:\n\n" + ("\n\n".join(notes) if notes else "(no notes)"),
        "tier": str(level),
    }
    return prompts.render("rollup", template, values)


# Reading answers.

_THINK_RE = re.compile(r"<(think|thinking|reasoning)>.*?</\1>", re.IGNORECASE | re.DOTALL)
_FENCE_RE = re.compile(r"```[ \t]*[A-Za-z0-9_-]*[ \t]*\n?(.*?)(?:```|$)", re.DOTALL)
_BULLET_RE = re.compile(r"^\s*(?:[-*•·‣▪◦+–—]|\d{1,2}[.)]|\(\d{1,2}\))\s+")
_MARKUP_RE = re.compile(r"\*\*|__|`|^#+\s*")
_WRAPPERS = " \t\r\n\"'“”‘’«»*_`"
_LABELS = {
    "heading": "heading",
    "headings": "heading",
    "title": "heading",
    "headline": "heading",
    "header": "heading",
    "fact": "facts",
    "facts": "facts",
    "keyfacts": "facts",
    "events": "facts",
    "keyevents": "facts",
    "event": "facts",
    "keyword": "keywords",
    "keywords": "keywords",
    "keyterms": "keywords",
    "keyterm": "keywords",
    "tags": "keywords",
}
_LABEL_RE = re.compile(
    r"^\s*(?P<hash>#{1,6}\s*)?(?P<b1>\*\*|__)?\s*"
    r"(?P<label>headings?|title|headline|header|key\s*facts|facts?|key\s*events|events|key\s*words?|"
    r"key\s*terms|tags)"
    r"\s*(?P<c1>[:：]|[-–—](?=\s))?\s*(?P<b2>\*\*|__)?\s*(?P<c2>[:：])?\s*(?P<rest>.*?)\s*$",
    re.IGNORECASE,
)
_HEADING_KEYS = ("heading", "title", "headline", "header", "scene")
_FACT_KEYS = ("facts", "fact", "keyfacts", "events", "keyevents", "points", "notes", "details", "bullets")
_KEYWORD_KEYS = ("keywords", "keyword", "keys", "tags", "keyterms", "entities", "names")
_PROSE_KEYS = ("summary", "text", "content", "description", "answer", "response")
_PREAMBLE_RE = re.compile(
    r"^(?:(?:sure|okay|ok|certainly|of course|absolutely)\b[^.!?:]{0,30}[.!?:]?$"
    r"|(?:here(?:'s| is| are)|below is|the following)\b"
    r".*\b(?:summary|summari[sz]ed|note|json|memory|recap)\b)",
    re.IGNORECASE,
)
_REFUSAL_RE = re.compile(
    r"^(?:i(?:'m| am) sorry|sorry\b|i can(?:'t|not)|i(?:'m| am) (?:unable|not able)|as an ai)",
    re.IGNORECASE,
)


def parse(text: str, *, fallback: list[Line] | None = None) -> Draft:
    """Read the Utility model's answer into a Draft; never raise.

    Tried in turn: a JSON object (bare, fenced, inside prose, with trailing commas, single quotes,
    bare keys or keys in any case, or cut off mid-way); labelled sections ("Heading:", "**Facts**",
    "## Keywords", with bullets); plain prose (first sentence as heading, the rest as facts).
    An empty or useless answer gives `extractive.summarise(fallback)` when `fallback` lines are
    given, else a Draft headed EMPTY_SUMMARY with no facts or keywords. A usable answer without a
    heading is headed from the fallback lines (speakers, scene, dates), else UNTITLED; one without
    keywords gets the capitalised names in its text.
    """
    raw = text if isinstance(text, str) else ""
    raw = _THINK_RE.sub(" ", raw[:MAX_ANSWER]).strip()
    draft = None
    try:
        draft, settled = _from_json(raw)
        if not settled:
            draft = _usable(_from_sections(raw)) or _usable(_from_prose(raw))
    except RecursionError:  # absurdly nested JSON
        draft = None
    if draft is None:
        if fallback:
            return extractive.summarise(fallback)
        return clip(Draft(heading=EMPTY_SUMMARY))
    if not draft.heading:
        heading = extractive.summarise(fallback).heading if fallback else UNTITLED
        draft = Draft(heading=heading, facts=draft.facts, keywords=draft.keywords)
    if not draft.keywords:
        found = extractive.proper_names(". ".join([draft.heading, *draft.facts]))
        draft = Draft(heading=draft.heading, facts=draft.facts, keywords=found)
    return clip(draft)


def _usable(draft: Draft | None) -> Draft | None:
    """Return the tidied draft if it says something (a fact, or a heading with words), else None."""
    if draft is None:
        return None
    draft = _tidy(draft)
    if draft.facts or any(char.isalpha() for char in draft.heading):
        return draft
    return None


def _strip(text: str) -> str:
    text = _BULLET_RE.sub("", text.strip())
    return _MARKUP_RE.sub("", text).strip(_WRAPPERS)


def _tidy(draft: Draft) -> Draft:
    heading = _strip(shorten(draft.heading, 1000)) if draft.heading else ""
    heading = re.sub(r"^(?:heading|title|summary)\s*[:：]\s*", "", heading, flags=re.IGNORECASE)
    facts = [_strip(fact) for fact in draft.facts]
    facts = [fact for fact in facts if any(char.isalpha() for char in fact)]
    keywords = [_strip(keyword) for keyword in draft.keywords]
    return Draft(heading=heading, facts=facts, keywords=[keyword for keyword in keywords if keyword])


# JSON, strict or repaired.


def _from_json(raw: str) -> tuple[Draft | None, bool]:
    """Return the draft from the first JSON in the answer, and whether that JSON settles the matter.

    An object, or JSON that is most of the answer, is taken as the answer even if it is useless,
    so its braces and keys are not then read as prose.
    """
    for candidate, unfinished in _json_candidates(raw):
        value = _decode(candidate)
        if value is _NOTHING:
            continue
        draft = _usable(_from_value(value))
        if draft is not None and unfinished:
            # The answer stopped mid-string (out of tokens): half a fact or keyword could mislead.
            cut = _strip(unfinished)
            facts = draft.facts[:-1] if draft.facts and draft.facts[-1] == cut else draft.facts
            keywords = draft.keywords[:-1] if draft.keywords and draft.keywords[-1] == cut else draft.keywords
            draft = Draft(heading=draft.heading, facts=facts, keywords=keywords)
        if draft is not None:
            return draft, True
        if isinstance(value, dict) or len(candidate) * 2 >= len(raw):
            return None, True
    return None, False


def json_values(raw: str) -> Iterator[Any]:
    """Yield each JSON value an answer holds, as `parse` looks for them, repaired where it can be.

    In turn: the answer itself if it is a bare scalar, each fenced block's first object and first
    list, then the answer's; a value cut off mid-way comes back closed.
    """
    for candidate, _unfinished in _json_candidates(raw if isinstance(raw, str) else ""):
        value = _decode(candidate)
        if value is not _NOTHING:
            yield value


def _json_candidates(raw: str) -> Iterable[tuple[str, str | None]]:
    """Yield (candidate, unfinished string) as `_balanced` does: the whole answer, fences, brackets."""
    if _SCALAR_RE.match(raw):
        yield raw, None  # "42", "null": JSON, but not a summary
    for match in _FENCE_RE.finditer(raw):
        yield from _bracketed(match.group(1).strip())
    yield from _bracketed(raw)


def _bracketed(text: str) -> Iterable[tuple[str, str | None]]:
    # An object first: prose before the answer may hold a stray "[" ("[12 Mar]").
    for opener in "{[":
        start = text.find(opener)
        if start >= 0:
            yield _balanced(text, start)


def _balanced(text: str, start: int) -> tuple[str, str | None]:
    """Return text[start:] up to its matching bracket, and None.

    An answer cut off mid-way has what it left open closed here; then the unfinished string it
    stopped in (or "" if it stopped between values) comes back as the second item.
    """
    stack: list[str] = []
    quote = ""
    opened = start
    index = start
    while index < len(text):
        char = text[index]
        if quote:
            if char == "\\":
                index += 1
            elif char == quote and (quote == '"' or _closes_single(text, index)):
                quote = ""
        elif char in "\"'":
            quote, opened = char, index
        elif char in "{[":
            stack.append("}" if char == "{" else "]")
        elif char in "}]":
            if stack and stack[-1] == char:
                stack.pop()
            if not stack:
                return text[start : index + 1], None
        index += 1
    tail = text[start:].rstrip()
    unfinished = ""
    if quote:
        unfinished = text[opened + 1 :].strip()
        tail += quote
    tail = tail.rstrip().rstrip(",:")
    return tail + "".join(reversed(stack)), unfinished


def _closes_single(text: str, index: int) -> bool:
    # In 'Maren's lamp' the second quote is an apostrophe: a closing quote is followed by , : } ].
    rest = text[index + 1 : index + 40].lstrip()
    return not rest or rest[0] in ",:}]"


_NOTHING = object()
_SCALAR_RE = re.compile(r"^(?:-?\d[\d.eE+-]*|true|false|null|None|True|False)$")


def _decode(candidate: str) -> Any:
    for attempt in (candidate, _repair(candidate)):
        try:
            return json.loads(attempt, strict=False)
        except ValueError:
            continue
    return _NOTHING


_CLOSER_RE = re.compile(r"\s*[}\]]")
_COLON_RE = re.compile(r"\s*:")
_BARE_WORD_RE = re.compile(r"[A-Za-z_][A-Za-z0-9_ -]{0,40}?(?=\s*:)|True|False|None|[A-Za-z_]\w*")


def _repair(candidate: str) -> str:
    """Rewrite pseudo-JSON as JSON: single quotes, bare keys, Python literals, trailing commas."""
    out: list[str] = []
    index = 0
    length = len(candidate)
    while index < length:
        char = candidate[index]
        if char == '"':
            end = index + 1
            while end < length and candidate[end] != '"':
                end += 2 if candidate[end] == "\\" else 1
            out.append(candidate[index : end + 1])
            index = end + 1
        elif char == "'":
            end = index + 1
            while end < length and not (candidate[end] == "'" and _closes_single(candidate, end)):
                end += 2 if candidate[end] == "\\" else 1
            out.append(json.dumps(candidate[index + 1 : end].replace("\\'", "'")))
            index = end + 1
        elif char == ",":
            if not _CLOSER_RE.match(candidate, index + 1):
                out.append(char)  # a trailing comma is dropped
            index += 1
        elif char.isalpha() or char == "_":
            match = _BARE_WORD_RE.match(candidate, index)
            word = match.group() if match else char
            literals = {"True": "true", "False": "false", "None": "null"}
            if word in literals:
                out.append(literals[word])
            elif word in ("true", "false", "null"):
                out.append(word)
            elif match and _COLON_RE.match(candidate, match.end()):
                out.append(json.dumps(word.strip()))  # a bare key
            else:
                out.append(word)  # left bare, so prose in brackets does not pass for JSON
            index += len(word)
        else:
            out.append(char)
            index += 1
    return "".join(out)


def _from_value(value: Any) -> Draft | None:
    if isinstance(value, dict):
        return _from_mapping(value)
    if isinstance(value, list):
        for item in value:
            if isinstance(item, dict):
                draft = _from_mapping(item)
                if draft is not None:
                    return draft
        facts = _fact_items(value)
        return Draft(heading="", facts=facts, keywords=[]) if facts else None
    if isinstance(value, str) and value.strip():
        return _from_sections(value) or _from_prose(value)
    return None


def _key(name: object) -> str:
    return re.sub(r"[^a-z]", "", str(name).lower())


def _from_mapping(data: dict) -> Draft | None:
    fields = {_key(name): value for name, value in data.items()}
    heading = next((_text(fields[key]) for key in _HEADING_KEYS if key in fields), "")
    facts = next((_fact_items(fields[key]) for key in _FACT_KEYS if key in fields), [])
    keywords = next((_keyword_items(fields[key]) for key in _KEYWORD_KEYS if key in fields), [])
    if not heading and not facts:
        for key in _PROSE_KEYS:
            value = fields.get(key)
            if isinstance(value, dict):
                return _from_mapping(value)
            if isinstance(value, str) and value.strip():
                prose = _from_sections(value) or _from_prose(value)
                if prose is not None:
                    return Draft(
                        heading=prose.heading, facts=prose.facts, keywords=keywords or prose.keywords
                    )
        for value in fields.values():
            if isinstance(value, dict):  # {"summary": {"heading": …}} and the like
                nested = _from_mapping(value)
                if nested is not None:
                    return nested
        if not keywords:
            return None
    return Draft(heading=heading, facts=facts, keywords=keywords)


def _text(value: Any) -> str:
    if value is None or isinstance(value, bool):
        return ""
    if isinstance(value, str | int | float):
        return str(value)
    if isinstance(value, dict):
        return " ".join(_text(item) for item in value.values())
    if isinstance(value, list | tuple):
        return " ".join(_text(item) for item in value)
    return ""


def _fact_items(value: Any) -> list[str]:
    if isinstance(value, str):
        return _split_facts(value)
    if isinstance(value, dict):
        value = list(value.values())
    if not isinstance(value, list | tuple):
        text = _text(value)
        return [text] if text else []
    facts = []
    for item in value:
        text = _text(item)
        # A list item may itself be a bulleted list run together in one string.
        facts.extend(_split_facts(text) if "\n" in text else [text])
    return [fact for fact in facts if fact.strip()]


def _split_facts(text: str) -> list[str]:
    lines = [line for line in (_strip(line) for line in text.splitlines()) if line]
    if len(lines) == 1:
        return extractive.split_sentences(lines[0]) or lines
    return lines


def _keyword_items(value: Any) -> list[str]:
    if isinstance(value, dict):
        value = (
            list(value.keys())
            if all(isinstance(item, int | float) for item in value.values())
            else list(value.values())
        )
    if isinstance(value, list | tuple):
        items = []
        for item in value:
            items.extend(_keyword_items(item) if isinstance(item, list | tuple | str) else [_text(item)])
        return [item for item in items if item]
    text = _text(value)
    return [_strip(part) for part in re.split(r"[,;\n]|\s+#|^#", text) if _strip(part)]


# Labelled sections and prose.


def _label(line: str) -> tuple[str, str] | None:
    match = _LABEL_RE.match(line)
    if not match:
        return None
    rest = match["rest"]
    marked = match["hash"] or (match["b1"] and match["b2"]) or match["c1"] or match["c2"]
    if not marked and rest:
        return None  # "Title of the song was…" is prose, not a label
    if match["b1"] and not match["b2"] and rest.startswith(("**", "__")):
        rest = rest[2:]
    return _LABELS.get(_key(match["label"]), ""), rest


def _from_sections(raw: str) -> Draft | None:
    sections: dict[str, list[str]] = {}
    current = ""
    for line in raw.splitlines():
        found = _label(line)
        if found and found[0]:
            current = found[0]
            sections.setdefault(current, [])
            if found[1]:
                sections[current].append(found[1])
        elif current and line.strip():
            sections[current].append(line)
    if not sections:
        return None
    heading_lines = [_strip(line) for line in sections.get("heading", [])]
    heading = next((line for line in heading_lines if line), "")
    facts = _split_facts("\n".join(sections.get("facts", [])))
    keywords = _keyword_items("\n".join(_strip(line) for line in sections.get("keywords", [])))
    if not heading and not facts and not keywords:
        return None
    return Draft(heading=heading, facts=facts, keywords=keywords)


def _from_prose(raw: str) -> Draft | None:
    sentences = [_strip(sentence) for sentence in extractive.split_sentences(raw)]
    sentences = [sentence for sentence in sentences if sentence]
    if sentences and _REFUSAL_RE.match(sentences[0]):
        return None
    # "Sure! Here is the summary:" says nothing about the story.
    while sentences and _PREAMBLE_RE.match(sentences[0]):
        after = sentences[0].partition(":")[2].strip()
        if after:
            sentences[0] = after
            break
        sentences.pop(0)
    if not sentences:
        return None
    keywords = extractive.proper_names(raw)
    return Draft(heading=sentences[0], facts=sentences[1:], keywords=keywords)
