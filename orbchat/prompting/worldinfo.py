"""Decide which world-info (lorebook) entries enter the prompt, following SillyTavern's rules.

`activate` is a pure function of its arguments: no Django, no database, no I/O, no module
state. Its only randomness comes from the injected `random.Random`, so a seeded call always
gives the same result.
"""

from __future__ import annotations

import json
import random
import re
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from enum import IntEnum, StrEnum
from typing import Any

import regex

__all__ = [
    "Activated",
    "Book",
    "BookKind",
    "Character",
    "CharacterFilter",
    "Entry",
    "InsertionStrategy",
    "Logic",
    "Position",
    "Result",
    "Settings",
    "TimedEffect",
    "TimedState",
    "activate",
    "default_count_tokens",
    "parse_decorators",
    "parse_regex_key",
]


class Logic(IntEnum):
    AND_ANY = 0
    NOT_ALL = 1
    NOT_ANY = 2
    AND_ALL = 3


class Position(IntEnum):
    BEFORE_CHAR = 0
    AFTER_CHAR = 1
    AN_TOP = 2
    AN_BOTTOM = 3
    AT_DEPTH = 4
    EXAMPLES_TOP = 5
    EXAMPLES_BOTTOM = 6


class InsertionStrategy(IntEnum):
    """How entries of character and global books are ordered (SillyTavern's numbering)."""

    EVENLY = 0
    CHARACTER_FIRST = 1
    GLOBAL_FIRST = 2


class BookKind(StrEnum):
    """Where a book comes from; chat books always come first, the others by the insertion strategy."""

    GLOBAL = "global"
    CHARACTER = "character"
    CHAT = "chat"


@dataclass(frozen=True)
class CharacterFilter:
    """Limit an entry to characters (by name or tag), or with `is_exclude` keep it from them."""

    is_exclude: bool = False
    names: tuple[str, ...] = ()
    tags: tuple[str, ...] = ()


@dataclass(frozen=True)
class Character:
    """The character the prompt is for, as character filters see it; `tags=None` means unknown."""

    name: str
    tags: tuple[str, ...] | None = None


@dataclass(frozen=True)
class Settings:
    """The scan settings SillyTavern keeps globally, with its defaults.

    `token_budget` is one budget in tokens shared by every book (0: the largest book budget,
    and if none, unlimited); `budget_cap` caps it when above 0. `max_recursion_steps`, when
    set, overrides the books' (it counts scan passes: 1 is the first scan only, 0 unlimited).
    `min_activations` scans ever older messages until that many entries are active, up to
    `min_activations_depth_max` messages (0: the whole chat).
    """

    include_names: bool = True
    min_activations: int = 0
    min_activations_depth_max: int = 0
    token_budget: int = 0
    budget_cap: int = 0
    insertion_strategy: InsertionStrategy = InsertionStrategy.CHARACTER_FIRST
    use_group_scoring: bool = False
    max_recursion_steps: int | None = None


@dataclass(frozen=True)
class Entry:
    """One world-info entry; `None` in an override field means "use the book's setting"."""

    uid: int
    keys: tuple[str, ...] = ()
    secondary_keys: tuple[str, ...] = ()
    selective: bool = True
    selective_logic: int = 0
    comment: str = ""
    content: str = ""
    constant: bool = False
    enabled: bool = True
    order: int = 100
    probability: int = 100
    use_probability: bool = True
    position: int = 0
    depth: int = 4
    role: int | None = None
    group: str = ""
    group_override: bool = False
    group_weight: int = 100
    use_group_scoring: bool | None = None
    prevent_recursion: bool = False
    exclude_recursion: bool = False
    delay_until_recursion: int = 0
    scan_depth: int | None = None
    case_sensitive: bool | None = None
    match_whole_words: bool | None = None
    sticky: int | None = None
    cooldown: int | None = None
    delay: int | None = None
    character_filter: CharacterFilter | None = None


@dataclass(frozen=True)
class Book:
    """A world book (lorebook) and its scan settings."""

    id: int
    name: str = ""
    entries: tuple[Entry, ...] = ()
    scan_depth: int = 2
    token_budget: int = 0
    recursive: bool = True
    max_recursion_steps: int = 0
    case_sensitive: bool = False
    match_whole_words: bool = True
    kind: BookKind = BookKind.GLOBAL


@dataclass(frozen=True)
class Activated:
    """An entry that goes into the prompt, with the reason in words a person can read.

    `entry.content` is what the prompt receives: decorators stripped, macros expanded.
    """

    book_id: int
    entry: Entry
    reason: str


@dataclass(frozen=True)
class TimedEffect:
    """When an entry last became active, and the message counts (exclusive) its sticky and cooldown end."""

    activated_at: int
    sticky_until: int | None = None
    cooldown_until: int | None = None

    @property
    def ends_at(self) -> int:
        """Return the message count from which this effect no longer matters."""
        return max(self.activated_at, self.sticky_until or 0, self.cooldown_until or 0)

    def sticky_left(self, message_count: int) -> int:
        """Return for how many more messages (this one included) the entry stays stuck on."""
        if self.sticky_until is None:
            return 0
        return max(0, self.sticky_until - message_count)

    def first_cooldown_left(self, message_count: int) -> int:
        """Return for how many more messages the cooldown begun at activation runs.

        SillyTavern starts an entry's cooldown when it activates, alongside its sticky, and again
        when the sticky ends; only an inclusion group heeds the first one.
        """
        if self.cooldown_until is None:
            return 0
        length = self.cooldown_until - (self.sticky_until or self.activated_at)
        return max(0, self.activated_at + length - message_count)

    def cooldown_left(self, message_count: int) -> int:
        """Return for how many more messages (this one included) the entry cannot activate."""
        if self.cooldown_until is None or self.sticky_left(message_count):
            return 0
        return max(0, self.cooldown_until - message_count)


@dataclass
class TimedState:
    """Per-chat memory of timed effects, keyed by (book_id, uid).

    Only entries with a sticky or cooldown are remembered, and only until both are over.
    """

    effects: dict[tuple[int, int], TimedEffect] = field(default_factory=dict)

    def to_json(self) -> dict[str, Any]:
        """Return a JSON-serialisable form; `from_json` reads it back."""
        return {
            "effects": [
                {
                    "book_id": book_id,
                    "uid": uid,
                    "activated_at": effect.activated_at,
                    "sticky_until": effect.sticky_until,
                    "cooldown_until": effect.cooldown_until,
                }
                for (book_id, uid), effect in sorted(self.effects.items())
            ]
        }

    @classmethod
    def from_json(cls, data: Mapping[str, Any] | str | bytes | None) -> TimedState:
        """Build a state from `to_json` output (or its JSON text), skipping malformed records."""
        if data is None or data == "":
            return cls()
        if isinstance(data, str | bytes):
            data = json.loads(data)
        effects: dict[tuple[int, int], TimedEffect] = {}
        records = data.get("effects", []) if isinstance(data, Mapping) else []
        for record in records if isinstance(records, list) else []:
            try:
                key = (int(record["book_id"]), int(record["uid"]))
                effects[key] = TimedEffect(
                    activated_at=int(record["activated_at"]),
                    sticky_until=_optional_int(record.get("sticky_until")),
                    cooldown_until=_optional_int(record.get("cooldown_until")),
                )
            except (KeyError, TypeError, ValueError, AttributeError):
                continue
        return cls(effects=effects)


def _optional_int(value: Any) -> int | None:
    return None if value is None else int(value)


@dataclass
class Result:
    """What `activate` decided: the entries to insert, the ones dropped and why, the new timed state."""

    activated: list[Activated]
    rejected: dict[tuple[int, int], str]
    state: TimedState


def default_count_tokens(text: str) -> int:
    """Estimate tokens as a quarter of the characters (at least one for non-empty text)."""
    return max(1, len(text) // 4) if text else 0


# --- keys ---------------------------------------------------------------------------------------

_RE_FLAGS = {"i": re.IGNORECASE, "m": re.MULTILINE, "s": re.DOTALL}
# SillyTavern writes a regex key as /pattern/flags with JavaScript's flags. "g" means nothing
# for a yes/no test and "u" is how Python reads patterns anyway; "y" anchors the search at the
# start of the scanned text.
_REGEX_KEY = re.compile(r"/([\s\S]+?)/([gimsuy]*)")
_UNESCAPED_SLASH = re.compile(r"(^|[^\\])/")
_COMPILE_ERRORS = (re.error, regex.error, ValueError, TypeError, OverflowError, RecursionError)
# JavaScript's \w without the u flag: the boundary SillyTavern puts around a whole-word key, so
# every non-ASCII letter (Cyrillic, Chinese, "é") counts as a boundary.
_ASCII_WORD_RUN = re.compile(r"[A-Za-z0-9_]+")
_WHITESPACE_RUN = re.compile(r"\s+")
# Below this many characters a plain scan is as cheap as building the text's trigram set.
_GRAM_INDEX_MIN_LENGTH = 512
# SillyTavern starts each scanned message with this character and joins them with a newline.
_MATCHER = "\x01"
_JOINER = "\n" + _MATCHER


def _split_regex_key(key: str) -> tuple[str, str] | None:
    """Split '/pattern/flags' into pattern and flags as SillyTavern does, or return None.

    A '/' inside the pattern must be escaped; the first escaped one is unescaped. Repeated
    flags make JavaScript reject the pattern, so they do here too.
    """
    match = _REGEX_KEY.fullmatch(key)
    if match is None:
        return None
    pattern, flags = match.groups()
    if _UNESCAPED_SLASH.search(pattern) or len(set(flags)) != len(flags):
        return None
    return pattern.replace("\\/", "/", 1), flags


def parse_regex_key(key: str) -> re.Pattern[str] | None:
    """Compile a '/pattern/flags' key with the stdlib `re`; return None for anything else or invalid."""
    parts = _split_regex_key(key.strip())
    if parts is None:
        return None
    pattern, flags = parts
    value = 0
    for flag in flags:
        value |= _RE_FLAGS.get(flag, 0)
    try:
        return re.compile(pattern, value)
    except _COMPILE_ERRORS:
        return None


class _Text:
    """One scanned text, with its lower-cased form, word sets and trigram sets derived on first use."""

    __slots__ = ("raw", "_lower", "_words", "_grams", "regex_results")

    def __init__(self, raw: str) -> None:
        self.raw = raw
        self._lower: str | None = None
        self._words: dict[bool, frozenset[str]] = {}
        self._grams: dict[bool, frozenset[str] | None] = {}
        self.regex_results: dict[_RegexKey, bool | None] = {}

    @property
    def lower(self) -> str:
        if self._lower is None:
            self._lower = self.raw.lower()
        return self._lower

    def haystack(self, case_sensitive: bool) -> str:
        return self.raw if case_sensitive else self.lower

    def words(self, case_sensitive: bool) -> frozenset[str]:
        words = self._words.get(case_sensitive)
        if words is None:
            haystack = self.haystack(case_sensitive)
            words = self._words[case_sensitive] = frozenset(_ASCII_WORD_RUN.findall(haystack))
        return words

    def may_contain(self, grams: frozenset[str], case_sensitive: bool) -> bool:
        """Return False when the text surely lacks a needle with these trigrams.

        Checking a few trigrams in a set is much cheaper than scanning a long text, and most
        keys of a big book are absent from the chat.
        """
        if case_sensitive not in self._grams:
            haystack = self.haystack(case_sensitive)
            self._grams[case_sensitive] = (
                frozenset(haystack[i : i + 3] for i in range(len(haystack) - 2))
                if len(haystack) > _GRAM_INDEX_MIN_LENGTH
                else None
            )
        text_grams = self._grams[case_sensitive]
        return text_grams is None or grams <= text_grams


def _trigrams(needle: str) -> frozenset[str]:
    """Return up to three of the needle's trigrams (start, middle, end): enough to rule most texts out."""
    last = len(needle) - 3
    if last < 0:
        return frozenset()
    return frozenset({needle[:3], needle[last // 2 : last // 2 + 3], needle[last:]})


class _NeverKey:
    """A key that is empty once its macros are expanded: SillyTavern never counts it as found."""

    __slots__ = ("label",)

    def __init__(self, label: str) -> None:
        self.label = label

    def test(self, text: _Text) -> bool | None:
        return False


class _SubstringKey:
    __slots__ = ("label", "needle", "case_sensitive", "grams")

    def __init__(self, label: str, needle: str, case_sensitive: bool) -> None:
        self.label, self.needle, self.case_sensitive = label, needle, case_sensitive
        self.grams = _trigrams(needle)

    def test(self, text: _Text) -> bool | None:
        return text.may_contain(self.grams, self.case_sensitive) and self.needle in text.haystack(
            self.case_sensitive
        )


class _WordKey:
    """A whole-word key made only of ASCII word characters: a set lookup instead of a regex search."""

    __slots__ = ("label", "needle", "case_sensitive")

    def __init__(self, label: str, needle: str, case_sensitive: bool) -> None:
        self.label, self.needle, self.case_sensitive = label, needle, case_sensitive

    def test(self, text: _Text) -> bool | None:
        return self.needle in text.words(self.case_sensitive)


class _BoundedKey:
    """A whole-word key with other characters in it ("sci-fi", "кот", "龙"), found between boundaries.

    SillyTavern's boundary is JavaScript's ASCII-only \\W: anything but A-Z, a-z, 0-9 and "_".
    Found with str.find and a look at its neighbours, which is what that regex checks, without
    compiling thousands of patterns.
    """

    __slots__ = ("label", "needle", "case_sensitive", "grams")

    def __init__(self, label: str, needle: str, case_sensitive: bool) -> None:
        self.label, self.needle, self.case_sensitive = label, needle, case_sensitive
        self.grams = _trigrams(needle)

    def test(self, text: _Text) -> bool | None:
        if not text.may_contain(self.grams, self.case_sensitive):
            return False
        haystack = text.haystack(self.case_sensitive)
        needle, size = self.needle, len(self.needle)
        start = haystack.find(needle)
        while start != -1:
            end = start + size
            if not (start and _is_word_char(haystack[start - 1])) and not (
                end < len(haystack) and _is_word_char(haystack[end])
            ):
                return True
            start = haystack.find(needle, start + 1)
        return False


def _is_word_char(char: str) -> bool:
    return char.isascii() and (char.isalnum() or char == "_")


class _RegexKey:
    """A '/pattern/flags' key; None from `test` means the search ran out of time."""

    __slots__ = ("label", "pattern", "sticky", "timeout")

    def __init__(self, label: str, pattern: regex.Pattern[str], sticky: bool, timeout: float) -> None:
        self.label, self.pattern, self.sticky, self.timeout = label, pattern, sticky, timeout

    def test(self, text: _Text) -> bool | None:
        # Cached per text so a pattern that timed out is not run again for every entry and step.
        if self in text.regex_results:
            return text.regex_results[self]
        search = self.pattern.match if self.sticky else self.pattern.search
        try:
            found: bool | None = search(text.raw, timeout=self.timeout) is not None
        except TimeoutError:
            found = None
        text.regex_results[self] = found
        return found


_Key = _NeverKey | _SubstringKey | _WordKey | _BoundedKey | _RegexKey


_JS_WORD = "A-Za-z0-9_"
_JS_LINE_END = "\\n\\r\\u2028\\u2029"
# JavaScript's meaning of the escapes Python's engine reads as Unicode-aware, outside a character
# class and (\w, \d) inside one.
_JS_ESCAPES = {
    "w": f"[{_JS_WORD}]",
    "W": f"[^{_JS_WORD}]",
    "d": "[0-9]",
    "D": "[^0-9]",
    "b": f"(?:(?<=[{_JS_WORD}])(?![{_JS_WORD}])|(?<![{_JS_WORD}])(?=[{_JS_WORD}]))",
    "B": f"(?:(?<=[{_JS_WORD}])(?=[{_JS_WORD}])|(?<![{_JS_WORD}])(?![{_JS_WORD}]))",
}
_JS_CLASS_ESCAPES = {"w": _JS_WORD, "d": "0-9"}


def _javascript_pattern(pattern: str, flags: str) -> str:
    """Rewrite a JavaScript pattern so Python's `regex` engine matches what JavaScript would.

    `\\w`, `\\d` and `\\b` are ASCII-only in JavaScript, `.` stops at every line terminator,
    `$` without the m flag matches only at the very end (never before a final newline), and with
    the m flag `^` and `$` also break at \\r, \\u2028 and \\u2029. `[]` matches nothing and `[^]`
    anything.
    """
    multiline, dotall = "m" in flags, "s" in flags
    out: list[str] = []
    index, size = 0, len(pattern)
    while index < size:
        char = pattern[index]
        if char == "\\" and index + 1 < size:
            escaped = pattern[index + 1]
            out.append(_JS_ESCAPES.get(escaped, char + escaped))
            index += 2
            continue
        if char == "[":
            end, body = _javascript_class(pattern, index)
            out.append(body)
            index = end
            continue
        if char == "." and not dotall:
            out.append(f"[^{_JS_LINE_END}]")
        elif char == "$":
            out.append(f"(?=[{_JS_LINE_END}]|\\Z)" if multiline else "\\Z")
        elif char == "^" and multiline:
            out.append(f"(?:\\A|(?<=[{_JS_LINE_END}]))")
        else:
            out.append(char)
        index += 1
    return "".join(out)


def _javascript_class(pattern: str, start: int) -> tuple[int, str]:
    """Return where the character class opening at `start` ends and its Python spelling."""
    index = start + 1
    negated = pattern.startswith("^", index)
    index += negated
    if pattern.startswith("]", index):  # JavaScript's empty class: nothing, or with ^ anything
        return index + 1, "[\\s\\S]" if negated else "(?!)"
    out = ["[^" if negated else "["]
    while index < len(pattern):
        char = pattern[index]
        if char == "\\" and index + 1 < len(pattern):
            escaped = pattern[index + 1]
            out.append(_JS_CLASS_ESCAPES.get(escaped, char + escaped))
            index += 2
            continue
        if char == "[":
            out.append("\\[")  # a literal in JavaScript, a nested set to Python's engine
        else:
            out.append(char)
        index += 1
        if char == "]":
            return index, "".join(out)
    return index, "".join(out)  # unclosed: left for the engine to refuse


def _compile_regex(pattern: str, flags: str) -> regex.Pattern[str] | None:
    # ^, $ and . are rewritten for the m and s flags; only i and s are left to the engine.
    value = regex.IGNORECASE if "i" in flags else 0
    if "s" in flags:
        value |= regex.DOTALL
    try:
        return regex.compile(_javascript_pattern(pattern, flags), value)
    except _COMPILE_ERRORS:
        return None


class _KeyCompiler:
    """Compile each distinct key once per call, after expanding its macros."""

    def __init__(self, regex_timeout: float, substitute: Callable[[str], str]) -> None:
        self.regex_timeout = regex_timeout
        self.substitute = substitute
        self.cache: dict[tuple[str, bool, bool, bool], _Key] = {}
        # Keyed by the key alone: case and whole-word settings do not affect a regex, and sharing
        # the instance shares its per-text results, so a slow pattern runs once per text.
        self.regexes: dict[str, _RegexKey | None] = {}

    def compile(
        self, keys: Iterable[str], case_sensitive: bool, whole_words: bool, *, expand: bool = True
    ) -> tuple[_Key, ...]:
        """Compile keys as the scan uses them, or (`expand=False`) as group scoring uses them: raw."""
        compiled = []
        for raw in keys:
            raw = raw if isinstance(raw, str) else ""
            cache_key = (raw, case_sensitive, whole_words, expand)
            matcher = self.cache.get(cache_key)
            if matcher is None:
                matcher = self.cache[cache_key] = self._build(raw, case_sensitive, whole_words, expand)
            compiled.append(matcher)
        return tuple(compiled)

    def _build(self, raw: str, case_sensitive: bool, whole_words: bool, expand: bool) -> _Key:
        if expand:
            expanded = self.substitute(raw) if raw else ""
            # An empty key never matches, but one of only blanks is the empty needle, found everywhere.
            if not expanded:
                return _NeverKey(raw)
            key = expanded.strip()
        else:
            key = raw
        parts = _split_regex_key(key)
        if parts is not None:
            if key not in self.regexes:
                pattern = _compile_regex(*parts)
                self.regexes[key] = (
                    None if pattern is None else _RegexKey(key, pattern, "y" in parts[1], self.regex_timeout)
                )
            matcher = self.regexes[key]
            if matcher is not None:
                return matcher
            # An invalid regex is matched as the plain text it is, as SillyTavern does.
        needle = key if case_sensitive else key.lower()
        if not whole_words or len(_WHITESPACE_RUN.split(needle)) > 1:
            return _SubstringKey(key, needle, case_sensitive)
        if _ASCII_WORD_RUN.fullmatch(needle):
            return _WordKey(key, needle, case_sensitive)
        return _BoundedKey(key, needle, case_sensitive)


# --- the scan -----------------------------------------------------------------------------------

_INITIAL, _RECURSION, _MIN_ACTIVATIONS = 1, 2, 3
_KIND_RANK = {BookKind.CHAT: 0, BookKind.CHARACTER: 1, BookKind.GLOBAL: 2}
_KNOWN_DECORATORS = ("@@activate", "@@dont_activate")


def parse_decorators(content: str) -> tuple[tuple[str, ...], str]:
    """Split leading '@@' decorator lines off an entry's content, as SillyTavern does.

    Known decorators are returned; an unknown one is dropped; a line starting '@@@' escapes a
    decorator and counts only right after an unknown one. The first line without '@@' starts
    the content sent to the model.
    """
    if not content.startswith("@@"):
        return (), content
    lines = content.split("\n")
    decorators: list[str] = []
    after_unknown = False
    rest = content
    for index, line in enumerate(lines):
        if not line.startswith("@@"):
            rest = "\n".join(lines[index:])
            break
        if line.startswith("@@@") and not after_unknown:
            continue
        name = line[1:] if line.startswith("@@@") else line
        if name.startswith(_KNOWN_DECORATORS):
            decorators.append(name)
            after_unknown = False
        else:
            after_unknown = True
    return tuple(decorators), rest


class _Plan:
    """An entry prepared for scanning: compiled keys and the settings resolved against its book."""

    __slots__ = (
        "entry",
        "book",
        "book_index",
        "key",
        "primary",
        "secondary",
        "raw_primary",
        "raw_secondary",
        "scan_depth",
        "groups",
        "decorators",
        "content",
    )

    def __init__(self, entry: Entry, book: Book, book_index: int, keys: _KeyCompiler) -> None:
        self.entry, self.book, self.book_index = entry, book, book_index
        self.key = (book.id, entry.uid)
        case_sensitive = book.case_sensitive if entry.case_sensitive is None else entry.case_sensitive
        whole_words = book.match_whole_words if entry.match_whole_words is None else entry.match_whole_words
        self.primary = keys.compile(entry.keys, case_sensitive, whole_words)
        self.secondary = (
            keys.compile(entry.secondary_keys, case_sensitive, whole_words) if entry.selective else ()
        )
        self.raw_primary = keys.compile(entry.keys, case_sensitive, whole_words, expand=False)
        self.raw_secondary = keys.compile(entry.secondary_keys, case_sensitive, whole_words, expand=False)
        self.scan_depth = entry.scan_depth
        # SillyTavern splits on a comma and the blanks after it, and keeps any other blanks.
        self.groups = tuple(dict.fromkeys(name for name in re.split(r",\s*", entry.group) if name))
        self.decorators, self.content = parse_decorators(entry.content or "")

    def match(self, text: _Text) -> tuple[_Key | None, bool]:
        """Return the primary key that made the entry match (or None), and whether a regex timed out."""
        timed_out = False
        hit = None
        for key in self.primary:
            found = key.test(text)
            if found:
                hit = key
                break
            timed_out = timed_out or found is None
        if hit is None or not self.secondary:
            return hit, timed_out
        # Lazy, so any()/all() stop at the first decisive key; a timed-out key counts as absent.
        hits = (key.test(text) is True for key in self.secondary)
        logic = self.entry.selective_logic
        if logic == Logic.NOT_ALL:
            passed = not all(hits)
        elif logic == Logic.NOT_ANY:
            passed = not any(hits)
        elif logic == Logic.AND_ALL:
            passed = all(hits)
        else:
            passed = any(hits)
        return (hit if passed else None), timed_out

    def score(self, text: _Text) -> int:
        """Count matching keys as SillyTavern's group scoring does (raw keys, positive logic only)."""
        if not self.raw_primary:
            return 0
        primary = sum(1 for key in self.raw_primary if key.test(text))
        secondary = sum(1 for key in self.raw_secondary if key.test(text))
        logic = self.entry.selective_logic
        if self.raw_secondary and logic == Logic.AND_ANY:
            return primary + secondary
        if self.raw_secondary and logic == Logic.AND_ALL and secondary == len(self.raw_secondary):
            return primary + secondary
        return primary


class _Chat:
    """The scanned messages, newest first, joined as SillyTavern's scan buffer joins them."""

    def __init__(self, messages: Sequence[str], extra: Sequence[str], message_count: int) -> None:
        self.newest_first = [text.strip() for text in reversed(messages)]
        self.extra = [text for text in extra if text]
        self.first_number = message_count - len(messages) + 1
        self._joined: dict[tuple[int, int], _Text] = {}
        self._single: dict[int, _Text] = {}

    def text(self, depth: int, recursion: Sequence[str]) -> _Text:
        """Return the newest `depth` messages, the extra text and the recursion text in one string."""
        if depth <= 0:
            return _Text("")
        cache_key = (depth, len(recursion))
        joined = self._joined.get(cache_key)
        if joined is None:
            parts = _MATCHER + _JOINER.join(self.newest_first[:depth])
            if self.extra:
                parts += _JOINER + _JOINER.join(self.extra)
            if recursion:
                parts += _JOINER + _JOINER.join(recursion)
            joined = self._joined[cache_key] = _Text(parts)
        return joined

    def locate(self, key: _Key, depth: int) -> str | None:
        for index in range(min(depth, len(self.newest_first))):
            single = self._single.get(index)
            if single is None:
                single = self._single[index] = _Text(_MATCHER + self.newest_first[index])
            if key.test(single):
                return f"message {self.first_number + len(self.newest_first) - 1 - index}"
        if any(key.test(_Text(_MATCHER + text)) for text in self.extra):
            return "extra scan text"
        return None


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


def _filter_applies(entry: Entry, character: Character | None) -> bool:
    """Return whether the entry's character filter lets it scan for this character."""
    flt = entry.character_filter
    if flt is None:
        return True
    name = character.name if character else None
    if flt.names and (name in flt.names) == flt.is_exclude:
        return False
    # SillyTavern skips the tag test when the character has no tag list at all.
    if flt.tags and character is not None and character.tags is not None:
        has_tag = any(tag in flt.tags for tag in character.tags)
        if has_tag == flt.is_exclude:
            return False
    return True


class _Activation:
    """The state of one `activate` call, following SillyTavern's `checkWorldInfo` step by step."""

    def __init__(
        self,
        books: Sequence[Book],
        chat: _Chat,
        message_count: int,
        effects: dict[tuple[int, int], TimedEffect],
        rng: random.Random,
        count_tokens: Callable[[str], int],
        regex_timeout: float,
        settings: Settings,
        substitute: Callable[[str], str],
        character: Character | None,
    ) -> None:
        self.books = books
        self.chat = chat
        self.now = message_count
        self.effects = effects
        self.rng = rng
        self.count_tokens = count_tokens
        self.settings = settings
        self.substitute = substitute
        self.character = character
        compiler = _KeyCompiler(regex_timeout, substitute)
        plans = [
            _Plan(entry, book, index, compiler) for index, book in enumerate(books) for entry in book.entries
        ]
        # Every entry's level counts, a disabled one's and a non-recursive book's included: each
        # opens a pass of its own in SillyTavern.
        self.delay_levels = sorted(
            {p.entry.delay_until_recursion for p in plans if p.entry.delay_until_recursion > 0}
        )
        self.plans = self._sorted([p for p in plans if p.entry.enabled])
        self.order_of = {plan.key: index for index, plan in enumerate(self.plans)}
        self.recursive = any(book.recursive for book in books)
        self.base_depth = min((book.scan_depth for book in books), default=0)
        self.skew = 0
        self.activated: dict[tuple[int, int], Activated] = {}
        self.failed: set[tuple[int, int]] = set()
        self.rejected: dict[tuple[int, int], str] = {}
        self.timed_out: set[tuple[int, int]] = set()
        self.recursion: list[str] = []
        self.recursion_sources: list[tuple[int, str]] = []
        self.level = 0  # scan passes after the first
        self.contents: dict[tuple[int, int], str] = {}

    def _sorted(self, plans: list[_Plan]) -> list[_Plan]:
        """Order entries as SillyTavern does: chat lore, then by strategy; higher `order` first.

        Ties keep book order, and within a book ascending uid (how JavaScript lists a book's
        numbered entries).
        """
        strategy = self.settings.insertion_strategy
        base = sorted(plans, key=lambda p: (p.book_index, p.entry.uid))

        def rank(plan: _Plan) -> int:
            kind = plan.book.kind
            if kind == BookKind.CHAT:
                return 0
            if strategy == InsertionStrategy.CHARACTER_FIRST:
                return 1 if kind == BookKind.CHARACTER else 2
            if strategy == InsertionStrategy.GLOBAL_FIRST:
                return 1 if kind != BookKind.CHARACTER else 2
            # Evenly: global books are listed before character books, then sorted together.
            return 1

        if strategy not in (InsertionStrategy.CHARACTER_FIRST, InsertionStrategy.GLOBAL_FIRST):
            base.sort(key=lambda p: p.book.kind == BookKind.CHARACTER)
        return sorted(base, key=lambda p: (rank(p), -p.entry.order))

    def _budget(self) -> int:
        budget = self.settings.token_budget or max((b.token_budget for b in self.books), default=0)
        cap = self.settings.budget_cap
        if cap > 0 and (budget <= 0 or budget > cap):
            budget = cap
        return budget

    def run(self) -> Result:
        settings = self.settings
        budget = self._budget()
        limit = self._recursion_limit()
        levels = list(self.delay_levels)
        current_level = levels.pop(0) if levels else 0
        scan_state = _INITIAL
        overflowed = False
        activated_text = ""
        passes = 0
        while scan_state:
            if limit and limit <= passes:
                break
            passes += 1
            self.level = passes - 1
            found = self._scan(scan_state, current_level)
            found.sort(key=lambda c: (not c[1], self.order_of[c[0].key]))
            text_tokens = self.count_tokens(activated_text)
            new = self._filter_groups(found, scan_state)
            new_content = ""
            for plan, sticky, reason in new:
                if not sticky and not self._roll(plan.entry):
                    self.failed.add(plan.key)
                    self.rejected[plan.key] = "probability roll failed"
                    continue
                content = self.contents[plan.key] = self.substitute(plan.content) if plan.content else ""
                new_content += f"{content}\n"
                if budget > 0 and text_tokens + self.count_tokens(new_content) >= budget:
                    overflowed = True
                    self.rejected[plan.key] = "over the world-info token budget"
                    break
                self.rejected.pop(plan.key, None)
                self.activated[plan.key] = Activated(
                    book_id=plan.book.id, entry=replace(plan.entry, content=content), reason=reason
                )
            if overflowed:
                for plan, _, _ in new:
                    if plan.key not in self.activated and plan.key not in self.failed:
                        self.rejected.setdefault(plan.key, "over the world-info token budget")
            successful = [plan for plan, _, _ in new if plan.key not in self.failed]
            for_recursion = [
                p for p in successful if not p.entry.prevent_recursion and self._recurses(p.book)
            ]
            next_state = 0
            if self.recursive and not overflowed and any(p.book.recursive for p in for_recursion):
                next_state = _RECURSION
            if self.recursive and not overflowed and scan_state == _MIN_ACTIVATIONS and self.recursion:
                next_state = _RECURSION
            wanted = settings.min_activations
            if not next_state and not overflowed and wanted > 0 and len(self.activated) < wanted:
                depth = self.base_depth + self.skew
                deepest = settings.min_activations_depth_max
                if not ((deepest > 0 and depth > deepest) or depth > len(self.chat.newest_first)):
                    next_state = _MIN_ACTIVATIONS
                    self.skew += 1
            if not next_state and levels:
                next_state = _RECURSION
                current_level = levels.pop(0)
            scan_state = next_state
            if scan_state:
                text = "\n".join(self.contents.get(p.key, p.content) for p in for_recursion)
                self.recursion.append(text)
                self.recursion_sources += [
                    (p.entry.uid, self.contents.get(p.key, p.content)) for p in for_recursion
                ]
                activated_text = f"{text}\n{activated_text}"
        for key in self.timed_out - self.activated.keys():
            self.rejected.setdefault(key, "regex key timed out")
        for activated in self.activated.values():
            self._start_timed_effects(activated)
        return Result(
            activated=self._prompt_order(), rejected=self.rejected, state=TimedState(effects=self.effects)
        )

    def _prompt_order(self) -> list[Activated]:
        """Group by position, lowest `order` first; among equal orders the later-activated entry first."""
        ranked = list(reversed(self.activated.values()))
        return sorted(ranked, key=lambda a: (a.entry.position, a.entry.order))

    def _recursion_limit(self) -> int:
        """Return how many scan passes may run in all: 1 means the first scan only, 0 unlimited.

        Unlimited ends all the same: a pass follows only one that activated something new (each
        entry activates once), a deeper message for minimum activations, or a delay level.
        """
        limits = [book.max_recursion_steps for book in self.books if book.recursive]
        if self.settings.max_recursion_steps is not None:
            limits = [self.settings.max_recursion_steps]
        return max(limits, default=0)

    def _scan(self, scan_state: int, level: int) -> list[tuple[_Plan, bool, str]]:
        found = []
        for plan in self.plans:
            if plan.key in self.failed or plan.key in self.activated:
                continue
            candidate = self._evaluate(plan, scan_state, level)
            if candidate is not None:
                found.append(candidate)
        return found

    def _evaluate(self, plan: _Plan, scan_state: int, level: int) -> tuple[_Plan, bool, str] | None:
        entry = plan.entry
        if not _filter_applies(entry, self.character):
            self.rejected[plan.key] = "not for this character"
            return None
        effect = self.effects.get(plan.key)
        sticky = bool(effect and effect.sticky_left(self.now))
        if entry.delay and self.now < entry.delay:
            self.rejected[plan.key] = f"delayed until message {entry.delay}"
            return None
        cooldown = effect.cooldown_left(self.now) if effect else 0
        if cooldown and not sticky:
            self.rejected[plan.key] = f"cooldown ({_plural(cooldown, 'more message')})"
            return None
        delayed = entry.delay_until_recursion
        if delayed and not sticky and (scan_state != _RECURSION or delayed > level):
            self.rejected[plan.key] = f"delayed until recursion level {delayed}"
            return None
        if scan_state == _RECURSION and entry.exclude_recursion and plan.book.recursive and not sticky:
            return None
        if "@@activate" in plan.decorators:
            return plan, sticky, "@@activate decorator"
        if "@@dont_activate" in plan.decorators:
            return None
        if entry.constant:
            return plan, sticky, "constant"
        if sticky:
            left = effect.sticky_left(self.now) if effect else 0
            return plan, True, f"sticky ({_plural(left, 'more message')})"
        if not plan.primary:
            return None
        text = self._text(plan, scan_state)
        hit, timed_out = plan.match(text)
        if timed_out:
            self.timed_out.add(plan.key)
        if hit is None:
            return None
        return plan, False, self._key_reason(plan, hit, scan_state)

    def _recurses(self, book: Book) -> bool:
        """Return whether the book's entries scan (and feed) the text of activated entries.

        A book with recursion off stays out of it while other books recurse. When none does, the
        passes that open delay levels still scan (and feed) that text, as SillyTavern's do with
        recursion off.
        """
        return book.recursive or not self.recursive

    def _depth(self, plan: _Plan) -> int:
        return plan.scan_depth if plan.scan_depth is not None else plan.book.scan_depth + self.skew

    def _text(self, plan: _Plan, scan_state: int) -> _Text:
        # The minimum-activations pass does not rescan recursion text.
        use_recursion = scan_state != _MIN_ACTIVATIONS and self._recurses(plan.book)
        return self.chat.text(self._depth(plan), self.recursion if use_recursion else ())

    def _key_reason(self, plan: _Plan, key: _Key, scan_state: int) -> str:
        where = self.chat.locate(key, self._depth(plan))
        suffix = f" at recursion level {self.level}" if scan_state == _RECURSION else ""
        if where is not None:
            return f'key "{key.label}" in {where}{suffix}'
        for uid, text in reversed(self.recursion_sources):
            if key.test(_Text(_MATCHER + text)):
                return f'recursion: key "{key.label}" in entry {uid}'
        # Only a key spanning two messages gets here: it matched the joined text but no single part.
        return f'key "{key.label}" in the recent messages'

    def _roll(self, entry: Entry) -> bool:
        if not entry.use_probability or entry.probability == 100:
            return True
        return self.rng.random() * 100 <= entry.probability

    def _start_timed_effects(self, activated: Activated) -> None:
        key = (activated.book_id, activated.entry.uid)
        entry = activated.entry
        effect = self.effects.get(key)
        if effect is not None and effect.activated_at < self.now:
            return  # already running: SillyTavern does not restart a live effect
        sticky = entry.sticky if entry.sticky and entry.sticky > 0 else 0
        cooldown = entry.cooldown if entry.cooldown and entry.cooldown > 0 else 0
        if not sticky and not cooldown:
            self.effects.pop(key, None)
            return
        sticky_until = self.now + sticky if sticky else None
        cooldown_until = (sticky_until or self.now) + cooldown if cooldown else None
        self.effects[key] = TimedEffect(self.now, sticky_until, cooldown_until)

    def _filter_groups(
        self, found: list[tuple[_Plan, bool, str]], scan_state: int
    ) -> list[tuple[_Plan, bool, str]]:
        """Keep one entry per inclusion group, as SillyTavern's `filterByInclusionGroups` does."""
        groups: dict[str, list[tuple[_Plan, bool, str]]] = {}
        for candidate in found:
            for name in candidate[0].groups:
                groups.setdefault(name, []).append(candidate)
        if not groups:
            return found
        groups = _javascript_key_order(groups)
        kept = list(found)

        def remove(candidate: tuple[_Plan, bool, str], name: str, reason: str) -> None:
            if candidate not in kept:
                # SillyTavern removes by index; a second removal (index -1) takes the last candidate.
                if kept:
                    dropped = kept.pop()
                    self.rejected[dropped[0].key] = (
                        f'dropped by inclusion group "{name}", which removed a loser twice'
                    )
                return
            kept.remove(candidate)
            # A loser is scanned again in later passes; its first loss is the reason worth showing.
            if not self.rejected.get(candidate[0].key, "").startswith(
                ("lost inclusion group", "left inclusion group")
            ):
                self.rejected[candidate[0].key] = reason

        def lose(candidate: tuple[_Plan, bool, str], name: str, winner: str) -> None:
            remove(candidate, name, f'lost inclusion group "{name}" to {winner}')

        has_sticky = {}
        for name, members in groups.items():
            sticky = [c for c in members if c[1]]
            has_sticky[name] = bool(sticky)
            for candidate in members:
                if sticky and not candidate[1]:
                    lose(candidate, name, f"sticky entry {sticky[0][0].entry.uid}")
            for candidate in sticky:
                effect = self.effects.get(candidate[0].key)
                if effect is not None and effect.first_cooldown_left(self.now):
                    remove(
                        candidate,
                        name,
                        f'left inclusion group "{name}": still in the cooldown begun with its sticky',
                    )
        global_scoring = self.settings.use_group_scoring
        for name, members in groups.items():
            if has_sticky[name] or not (global_scoring or any(c[0].entry.use_group_scoring for c in members)):
                continue
            scores = [c[0].score(self._text(c[0], scan_state)) for c in members]
            best = max(scores)
            leader = members[scores.index(best)][0].entry.uid
            survivors = []
            for candidate, score in zip(members, scores, strict=True):
                scored = candidate[0].entry.use_group_scoring
                if (global_scoring if scored is None else scored) and score < best:
                    lose(candidate, name, f"entry {leader}, which matched more keys")
                else:
                    survivors.append(candidate)
            groups[name] = survivors
        for name, members in groups.items():
            if has_sticky[name]:
                continue
            earlier = next((a for a in self.activated.values() if a.entry.group == name), None)
            if earlier is not None:
                for candidate in members:
                    lose(candidate, name, f"entry {earlier.entry.uid}, active already")
                continue
            if len(members) <= 1:
                continue
            overriding = [c for c in members if c[0].entry.group_override]
            if overriding:
                winner = max(overriding, key=lambda c: c[0].entry.order)  # max keeps the first of equals
            else:
                winner = self._weighted_pick(members)
                if winner is None:
                    continue
            for candidate in members:
                if candidate is not winner:
                    lose(candidate, name, f"entry {winner[0].entry.uid}")
        return kept

    def _weighted_pick(self, members: list[tuple[_Plan, bool, str]]) -> tuple[_Plan, bool, str] | None:
        total = sum(c[0].entry.group_weight for c in members)
        roll = self.rng.random() * total
        reached = 0
        for candidate in members:
            reached += candidate[0].entry.group_weight
            if roll <= reached:
                return candidate
        return None


def _javascript_key_order(groups: dict[str, list]) -> dict[str, list]:
    """Order groups as a JavaScript object lists its keys: array-index names ("0", "7") first,
    ascending, then the rest in insertion order. SillyTavern rolls its groups in that order."""

    def is_index(name: str) -> bool:
        return name.isascii() and name.isdigit() and (name == "0" or name[0] != "0") and int(name) < 2**32 - 1

    indexes = sorted((name for name in groups if is_index(name)), key=int)
    return {name: groups[name] for name in [*indexes, *(name for name in groups if not is_index(name))]}


def _live_effects(state: TimedState | None, message_count: int) -> dict[tuple[int, int], TimedEffect]:
    """Copy the effects still running; drop finished ones and any set at or after this message count.

    An effect set at the current count or later means the chat was rolled back or this turn is
    being generated again, so that activation no longer counts.
    """
    if state is None:
        return {}
    return {
        key: effect
        for key, effect in state.effects.items()
        if effect.activated_at < message_count < effect.ends_at
    }


def activate(
    books: Sequence[Book],
    messages: Sequence[str | tuple[str, str]],
    *,
    message_count: int | None = None,
    state: TimedState | None = None,
    rng: random.Random | None = None,
    count_tokens: Callable[[str], int] | None = None,
    regex_timeout: float = 0.1,
    extra_scan_text: Sequence[str] = (),
    settings: Settings | None = None,
    substitute: Callable[[str], str] | None = None,
    character: Character | None = None,
) -> Result:
    """Return the world-info entries the chat activates, the ones dropped and why, and the new timed state.

    `messages` are oldest first, each a text or a `(speaker name, text)` pair; with
    `settings.include_names` a pair is scanned as "Name: text", as SillyTavern scans it. Each
    book (or entry override) scans only its newest `scan_depth` of them plus `extra_scan_text`.
    `message_count` (default `len(messages)`) drives sticky, cooldown and delay: SillyTavern
    counts the chat's visible messages. `substitute` expands macros such as {{char}} in keys
    and in activated content; `character` is who the prompt is for, which character filters
    test. The passed `state` is not modified.
    """
    settings = settings or Settings()
    texts = [
        (f"{m[0]}: {m[1]}" if settings.include_names else m[1]) if isinstance(m, tuple) else m
        for m in messages
    ]
    now = len(texts) if message_count is None else message_count
    run = _Activation(
        books=books,
        chat=_Chat(texts, extra_scan_text, now),
        message_count=now,
        effects=_live_effects(state, now),
        rng=rng if rng is not None else random.Random(),
        count_tokens=count_tokens or default_count_tokens,
        regex_timeout=regex_timeout,
        settings=settings,
        substitute=substitute or (lambda text: text),
        character=character,
    )
    return run.run()
