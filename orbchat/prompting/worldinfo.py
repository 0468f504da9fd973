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
from dataclasses import dataclass, field
from enum import IntEnum
from typing import Any

import regex

__all__ = [
    "RECURSION_HARD_CAP",
    "Activated",
    "Book",
    "Entry",
    "Logic",
    "Position",
    "Result",
    "TimedEffect",
    "TimedState",
    "activate",
    "default_count_tokens",
    "parse_regex_key",
]

# A book with max_recursion_steps=0 ("unlimited") still stops here, so two entries that
# mention each other cannot loop forever.
RECURSION_HARD_CAP = 20


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


@dataclass(frozen=True)
class Activated:
    """An entry that goes into the prompt, with the reason in words a person can read."""

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

_RE_FLAGS = {"i": re.IGNORECASE, "m": re.MULTILINE, "s": re.DOTALL, "u": re.UNICODE, "x": re.VERBOSE}
_REGEX_FLAGS = {
    "i": regex.IGNORECASE,
    "m": regex.MULTILINE,
    "s": regex.DOTALL,
    "u": regex.UNICODE,
    "x": regex.VERBOSE,
}
# "g" (JavaScript's global search) means nothing for a yes/no test, so it is accepted and ignored.
_KNOWN_FLAGS = frozenset(_RE_FLAGS) | {"g"}
_COMPILE_ERRORS = (re.error, regex.error, ValueError, TypeError, OverflowError, RecursionError)
_WORD_RUN = re.compile(r"\w+")
_WHITESPACE = re.compile(r"\s")
# Below this many characters a plain scan is as cheap as building the text's trigram set.
_GRAM_INDEX_MIN_LENGTH = 512


def _split_regex_key(key: str) -> tuple[str, str] | None:
    """Split '/pattern/flags' into pattern and flags, or return None when the key is not one."""
    last = key.rfind("/")
    if not key.startswith("/") or last <= 1:
        return None
    flags = key[last + 1 :]
    if not set(flags) <= _KNOWN_FLAGS:
        return None
    return key[1:last], flags


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
            words = self._words[case_sensitive] = frozenset(_WORD_RUN.findall(self.haystack(case_sensitive)))
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
    """A whole-word key made only of word characters: a set lookup instead of a regex search."""

    __slots__ = ("label", "needle", "case_sensitive")

    def __init__(self, label: str, needle: str, case_sensitive: bool) -> None:
        self.label, self.needle, self.case_sensitive = label, needle, case_sensitive

    def test(self, text: _Text) -> bool | None:
        return self.needle in text.words(self.case_sensitive)


class _BoundedKey:
    """A whole-word key with punctuation in it (e.g. "sci-fi"), matched between non-word characters.

    Found with str.find and a look at its neighbours, which is what a word-boundary regex would
    check (a word character is alphanumeric or "_"), without compiling thousands of patterns.
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
    return char.isalnum() or char == "_"


class _RegexKey:
    """A '/pattern/flags' key; None from `test` means the search ran out of time."""

    __slots__ = ("label", "pattern", "timeout")

    def __init__(self, label: str, pattern: str, flags: str, timeout: float) -> None:
        self.label, self.timeout = label, timeout
        value = 0
        for flag in flags:
            value |= _REGEX_FLAGS.get(flag, 0)
        try:
            self.pattern: regex.Pattern[str] | None = regex.compile(pattern, value)
        except _COMPILE_ERRORS:
            self.pattern = None

    def test(self, text: _Text) -> bool | None:
        if self.pattern is None:
            return False
        # Cached per text so a pattern that timed out is not run again for every entry and step.
        if self in text.regex_results:
            return text.regex_results[self]
        try:
            found: bool | None = self.pattern.search(text.raw, timeout=self.timeout) is not None
        except TimeoutError:
            found = None
        text.regex_results[self] = found
        return found


_Key = _SubstringKey | _WordKey | _BoundedKey | _RegexKey


class _KeyCompiler:
    """Compile each distinct key once per call."""

    def __init__(self, regex_timeout: float) -> None:
        self.regex_timeout = regex_timeout
        self.cache: dict[tuple[str, bool, bool], _Key] = {}
        # Keyed by the key alone: case and whole-word settings do not affect a regex, and sharing
        # the instance shares its per-text results, so a slow pattern runs once per text.
        self.regexes: dict[str, _RegexKey] = {}

    def compile(self, keys: Iterable[str], case_sensitive: bool, whole_words: bool) -> tuple[_Key, ...]:
        compiled = []
        for raw in keys:
            key = raw.strip() if isinstance(raw, str) else ""
            if not key:
                continue
            cache_key = (key, case_sensitive, whole_words)
            matcher = self.cache.get(cache_key)
            if matcher is None:
                matcher = self.cache[cache_key] = self._build(key, case_sensitive, whole_words)
            compiled.append(matcher)
        return tuple(compiled)

    def _build(self, key: str, case_sensitive: bool, whole_words: bool) -> _Key:
        parts = _split_regex_key(key)
        if parts is not None:
            if key not in self.regexes:
                self.regexes[key] = _RegexKey(key, parts[0], parts[1], self.regex_timeout)
            return self.regexes[key]
        needle = key if case_sensitive else key.lower()
        # SillyTavern matches a key of several words as a plain substring even with whole words on.
        if not whole_words or _WHITESPACE.search(key):
            return _SubstringKey(key, needle, case_sensitive)
        if _WORD_RUN.fullmatch(needle):
            return _WordKey(key, needle, case_sensitive)
        return _BoundedKey(key, needle, case_sensitive)


def _test_any_text(key: _Key, texts: Sequence[_Text]) -> bool | None:
    """Return True if the key is in any text, None if it is in none but a search timed out."""
    timed_out = False
    for text in texts:
        found = key.test(text)
        if found:
            return True
        if found is None:
            timed_out = True
    return None if timed_out else False


# --- the scan -----------------------------------------------------------------------------------


class _Plan:
    """An entry prepared for scanning: compiled keys and the settings resolved against its book."""

    __slots__ = (
        "entry",
        "book",
        "book_index",
        "key",
        "primary",
        "secondary",
        "logic",
        "scan_depth",
        "groups",
    )

    def __init__(self, entry: Entry, book: Book, book_index: int, keys: _KeyCompiler) -> None:
        self.entry, self.book, self.book_index = entry, book, book_index
        self.key = (book.id, entry.uid)
        case_sensitive = book.case_sensitive if entry.case_sensitive is None else entry.case_sensitive
        whole_words = book.match_whole_words if entry.match_whole_words is None else entry.match_whole_words
        self.primary = keys.compile(entry.keys, case_sensitive, whole_words)
        secondary = keys.compile(entry.secondary_keys, case_sensitive, whole_words) if entry.selective else ()
        self.secondary = secondary
        self.logic = entry.selective_logic
        depth = book.scan_depth if entry.scan_depth is None else entry.scan_depth
        self.scan_depth = max(0, depth)
        self.groups = tuple(dict.fromkeys(name.strip() for name in entry.group.split(",") if name.strip()))

    def match(self, texts: Sequence[_Text]) -> tuple[_Key | None, bool]:
        """Return the primary key that made the entry match (or None), and whether a regex timed out."""
        timed_out = False
        hit = None
        for key in self.primary:
            found = _test_any_text(key, texts)
            if found:
                hit = key
                break
            timed_out = timed_out or found is None
        if hit is None or not self.secondary:
            return hit, timed_out
        # Lazy, so any()/all() stop at the first decisive key; a timed-out key counts as absent.
        hits = (_test_any_text(key, texts) is True for key in self.secondary)
        if self.logic == Logic.NOT_ALL:
            passed = not all(hits)
        elif self.logic == Logic.NOT_ANY:
            passed = not any(hits)
        elif self.logic == Logic.AND_ALL:
            passed = all(hits)
        else:
            passed = any(hits)
        return (hit if passed else None), timed_out

    def mentioned_in(self, text: _Text) -> bool:
        """Return whether any primary or secondary key is in the text."""
        return any(key.test(text) for key in self.primary) or any(key.test(text) for key in self.secondary)

    def score(self, texts: Sequence[_Text]) -> int:
        """Count matching keys, as SillyTavern's group scoring does."""
        score = sum(1 for key in self.primary if _test_any_text(key, texts))
        if self.secondary and self.logic in (Logic.AND_ANY, Logic.AND_ALL):
            score += sum(1 for key in self.secondary if _test_any_text(key, texts))
        return score


@dataclass(eq=False)
class _Candidate:
    plan: _Plan
    reason: str
    texts: Sequence[_Text]
    sticky: bool = False


class _Chat:
    """The chat messages and extra text, joined per scan depth and located per message for reasons."""

    def __init__(self, messages: Sequence[str], extra: Sequence[str], message_count: int) -> None:
        self.messages = list(messages)
        self.extra = [_Text(text) for text in extra if text]
        self.first_number = message_count - len(self.messages) + 1
        self._joined: dict[int, _Text] = {}
        self._single: dict[int, _Text] = {}

    def text(self, depth: int) -> _Text:
        depth = min(depth, len(self.messages))
        joined = self._joined.get(depth)
        if joined is None:
            newest = self.messages[len(self.messages) - depth :]
            joined = self._joined[depth] = _Text("\n".join([*newest, *(t.raw for t in self.extra)]))
        return joined

    def locate(self, key: _Key, depth: int) -> str | None:
        if not key.test(self.text(depth)):
            return None
        count = len(self.messages)
        for index in range(count - 1, count - 1 - min(depth, count), -1):
            single = self._single.get(index)
            if single is None:
                single = self._single[index] = _Text(self.messages[index])
            if key.test(single):
                return f"message {self.first_number + index}"
        if any(key.test(text) for text in self.extra):
            return "extra scan text"
        return None


@dataclass
class _Budget:
    used: int = 0
    overflowed: bool = False


def _plural(count: int, word: str) -> str:
    return f"{count} {word}" if count == 1 else f"{count} {word}s"


class _Activation:
    """The state of one `activate` call."""

    def __init__(
        self,
        books: Sequence[Book],
        chat: _Chat,
        message_count: int,
        effects: dict[tuple[int, int], TimedEffect],
        rng: random.Random,
        count_tokens: Callable[[str], int],
        regex_timeout: float,
    ) -> None:
        self.books = books
        self.chat = chat
        self.now = message_count
        self.effects = effects
        self.rng = rng
        self.count_tokens = count_tokens
        compiler = _KeyCompiler(regex_timeout)
        self.plans = [
            _Plan(entry, book, index, compiler)
            for index, book in enumerate(books)
            for entry in book.entries
            if entry.enabled
        ]
        self.delayed = [plan for plan in self.plans if plan.entry.delay_until_recursion > 0]
        self.active: set[tuple[int, int]] = set()
        self.final: set[tuple[int, int]] = set()  # rejected for the rest of this call
        self.rejected: dict[tuple[int, int], str] = {}
        self.timed_out: set[tuple[int, int]] = set()
        self.activated: list[Activated] = []
        self.group_winners: dict[str, int] = {}
        self.budgets = [_Budget() for _ in books]
        # Content scanned by recursion, one (joined text, [(uid, content)]) per step that added some.
        self.recursion_steps: list[tuple[_Text, list[tuple[int, _Text]]]] = []
        self.recursion_text: _Text | None = None

    def run(self) -> Result:
        recursion_limit = self._recursion_limit()
        new_text = self._admit(self._initial_candidates())
        level = 0
        while level < recursion_limit:
            level += 1
            if new_text is None and not self._delayed_pending(level):
                break
            new_text = self._admit(self._recursion_candidates(level, new_text))
        for key in self.timed_out - self.active:
            self.rejected.setdefault(key, "regex key timed out")
        activated = sorted(
            self.activated, key=lambda a: (a.entry.position, a.entry.order, a.entry.uid, a.book_id)
        )
        return Result(activated=activated, rejected=self.rejected, state=TimedState(effects=self.effects))

    def _recursion_limit(self) -> int:
        limits = [
            min(book.max_recursion_steps or RECURSION_HARD_CAP, RECURSION_HARD_CAP)
            for book in self.books
            if book.recursive
        ]
        return max(limits, default=0)

    def _delayed_pending(self, level: int) -> bool:
        return any(
            plan.book.recursive and plan.entry.delay_until_recursion >= level and self._open(plan)
            for plan in self.delayed
        )

    def _open(self, plan: _Plan) -> bool:
        return plan.key not in self.active and plan.key not in self.final

    def _initial_candidates(self) -> list[_Candidate]:
        candidates = []
        for plan in self.plans:
            effect = self.effects.get(plan.key)
            left = effect.sticky_left(self.now) if effect else 0
            if left:
                reason = f"sticky ({_plural(left, 'more message')})"
                candidates.append(_Candidate(plan, reason, (), sticky=True))
                continue
            candidate = self._evaluate(plan, 0)
            if candidate is not None:
                candidates.append(candidate)
        return candidates

    def _recursion_candidates(self, level: int, new_text: _Text | None) -> list[_Candidate]:
        """Evaluate the entries this step could change.

        An open entry already failed against the text before `new_text` (more text only makes
        NOT_ANY / NOT_ALL harder to pass), so it can only match now if one of its keys is in
        `new_text`, unless its delay level has just come.
        """
        candidates = []
        for plan in self.plans:
            if not plan.book.recursive or not self._open(plan):
                continue
            if plan.entry.delay_until_recursion != level and (
                new_text is None or plan.entry.exclude_recursion or not plan.mentioned_in(new_text)
            ):
                continue
            candidate = self._evaluate(plan, level)
            if candidate is not None:
                candidates.append(candidate)
        return candidates

    def _evaluate(self, plan: _Plan, level: int) -> _Candidate | None:
        """Match one entry at a recursion level; record a rejection when it matched but cannot activate."""
        entry = plan.entry
        texts = [self.chat.text(plan.scan_depth)]
        if level and not entry.exclude_recursion and self.recursion_text is not None:
            texts.append(self.recursion_text)
        if entry.constant:
            reason = "constant"
        else:
            hit, timed_out = plan.match(texts)
            if timed_out:
                self.timed_out.add(plan.key)
            if hit is None:
                return None
            reason = self._key_reason(plan, hit, level)
        if entry.delay and self.now < entry.delay:
            return self._reject(plan, f"delayed until message {entry.delay}")
        effect = self.effects.get(plan.key)
        cooldown = effect.cooldown_left(self.now) if effect else 0
        if cooldown:
            return self._reject(plan, f"cooldown ({_plural(cooldown, 'more message')})")
        if entry.delay_until_recursion > level:
            self.rejected[plan.key] = f"delayed until recursion level {entry.delay_until_recursion}"
            return None
        return _Candidate(plan, reason, texts)

    def _key_reason(self, plan: _Plan, key: _Key, level: int) -> str:
        where = self.chat.locate(key, plan.scan_depth)
        if where is not None:
            suffix = f" at recursion level {level}" if level else ""
            return f'key "{key.label}" in {where}{suffix}'
        for joined, sources in reversed(self.recursion_steps):
            if key.test(joined):
                for uid, text in reversed(sources):
                    if key.test(text):
                        return f'recursion: key "{key.label}" in entry {uid}'
        # Only a key spanning two messages gets here: it matched the joined text but no single part.
        return f'key "{key.label}" in the recent messages'

    def _reject(self, plan: _Plan, reason: str) -> None:
        self.rejected[plan.key] = reason
        self.final.add(plan.key)

    def _admit(self, candidates: list[_Candidate]) -> _Text | None:
        """Apply groups, probability and budgets to one step's matches; return the new recursion text."""
        candidates.sort(
            key=lambda c: (
                not c.sticky,
                not c.plan.entry.constant,
                -c.plan.entry.order,
                c.plan.entry.uid,
                c.plan.book_index,
            )
        )
        sources: list[tuple[int, _Text]] = []
        for candidate in self._filter_groups(candidates):
            plan, entry = candidate.plan, candidate.plan.entry
            book, budget = plan.book, self.budgets[plan.book_index]
            over_budget = f'over the token budget of book "{book.name or book.id}"'
            if budget.overflowed:
                self._reject(plan, over_budget)
                continue
            if not candidate.sticky and not self._roll(entry):
                self._reject(plan, "probability roll failed")
                continue
            tokens = self.count_tokens(entry.content)
            if book.token_budget > 0 and budget.used + tokens > book.token_budget:
                # SillyTavern stops filling once the budget overflows rather than looking for smaller entries.
                budget.overflowed = True
                self._reject(plan, over_budget)
                continue
            budget.used += tokens
            self.active.add(plan.key)
            self.rejected.pop(plan.key, None)
            self.activated.append(Activated(book_id=book.id, entry=entry, reason=candidate.reason))
            for name in plan.groups:
                self.group_winners.setdefault(name, entry.uid)
            if not candidate.sticky:
                self._start_timed_effects(plan)
            if book.recursive and not entry.prevent_recursion and entry.content:
                sources.append((entry.uid, _Text(entry.content)))
        if not sources:
            return None
        new_text = _Text("\n".join(text.raw for _, text in sources))
        self.recursion_steps.append((new_text, sources))
        self.recursion_text = _Text("\n".join(joined.raw for joined, _ in self.recursion_steps))
        return new_text

    def _roll(self, entry: Entry) -> bool:
        if not entry.use_probability or entry.probability >= 100:
            return True
        if entry.probability <= 0:
            return False
        return self.rng.random() * 100 < entry.probability

    def _start_timed_effects(self, plan: _Plan) -> None:
        entry = plan.entry
        sticky = entry.sticky if entry.sticky and entry.sticky > 0 else 0
        cooldown = entry.cooldown if entry.cooldown and entry.cooldown > 0 else 0
        if not sticky and not cooldown:
            self.effects.pop(plan.key, None)
            return
        sticky_until = self.now + sticky if sticky else None
        cooldown_until = (sticky_until or self.now) + cooldown if cooldown else None
        self.effects[plan.key] = TimedEffect(self.now, sticky_until, cooldown_until)

    def _filter_groups(self, candidates: list[_Candidate]) -> list[_Candidate]:
        """Keep one entry per inclusion group; the candidates come sorted, which fixes the rng order."""
        names = dict.fromkeys(name for c in candidates for name in c.plan.groups)
        lost: set[int] = set()
        for name in names:
            members = [c for c in candidates if name in c.plan.groups and id(c) not in lost]
            earlier = self.group_winners.get(name)
            if earlier is not None:
                winner_uid, losers = earlier, members
            elif len(members) > 1:
                winner, members = self._score_group(name, members, lost)
                winner = winner or self._pick_winner(members)
                winner_uid, losers = winner.plan.entry.uid, [c for c in members if c is not winner]
            else:
                continue
            for loser in losers:
                lost.add(id(loser))
                self._reject(loser.plan, f'lost inclusion group "{name}" to entry {winner_uid}')
        return [c for c in candidates if id(c) not in lost]

    def _score_group(
        self, name: str, members: list[_Candidate], lost: set[int]
    ) -> tuple[_Candidate | None, list[_Candidate]]:
        """Drop scored members with fewer key matches than the best; return a sticky winner if any."""
        sticky = next((c for c in members if c.sticky), None)
        if sticky is not None:
            return sticky, members
        if not any(c.plan.entry.use_group_scoring for c in members):
            return None, members
        scores = [c.plan.score(c.texts) for c in members]
        best = max(scores)
        leader = members[scores.index(best)].plan.entry.uid
        kept = []
        for candidate, score in zip(members, scores, strict=True):
            if candidate.plan.entry.use_group_scoring and score < best:
                lost.add(id(candidate))
                self._reject(candidate.plan, f'lost inclusion group "{name}" to entry {leader}')
            else:
                kept.append(candidate)
        return None, kept

    def _pick_winner(self, members: list[_Candidate]) -> _Candidate:
        overriding = [c for c in members if c.plan.entry.group_override]
        if overriding:
            return max(overriding, key=lambda c: (c.plan.entry.order, -c.plan.entry.uid))
        if len(members) == 1:
            return members[0]
        weights = [max(0, c.plan.entry.group_weight) for c in members]
        total = sum(weights)
        if total <= 0:
            return max(members, key=lambda c: (c.plan.entry.order, -c.plan.entry.uid))
        roll = self.rng.random() * total
        reached = 0
        for candidate, weight in zip(members, weights, strict=True):
            reached += weight
            if roll < reached:
                return candidate
        return next(c for c, w in zip(members, weights, strict=True) if w > 0)


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
    messages: Sequence[str],
    *,
    message_count: int | None = None,
    state: TimedState | None = None,
    rng: random.Random | None = None,
    count_tokens: Callable[[str], int] | None = None,
    regex_timeout: float = 0.1,
    extra_scan_text: Sequence[str] = (),
) -> Result:
    """Return the world-info entries the chat activates, the ones dropped and why, and the new timed state.

    `messages` are oldest first; each book (or entry override) scans only its newest `scan_depth`
    of them plus `extra_scan_text`. `message_count` (default `len(messages)`) drives sticky,
    cooldown and delay. `max_recursion_steps` counts recursion passes after the first scan; the
    highest among recursive books applies, 0 meaning up to `RECURSION_HARD_CAP`. The passed
    `state` is not modified.
    """
    now = len(messages) if message_count is None else message_count
    run = _Activation(
        books=books,
        chat=_Chat(messages, extra_scan_text, now),
        message_count=now,
        effects=_live_effects(state, now),
        rng=rng if rng is not None else random.Random(),
        count_tokens=count_tokens or default_count_tokens,
        regex_timeout=regex_timeout,
    )
    return run.run()
