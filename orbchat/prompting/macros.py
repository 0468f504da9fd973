"""Expand SillyTavern-compatible {{macros}} in prompt text.

One compiled pattern and a single `re.sub` pass: a macro's value is never scanned again, so
braces typed by a user (in a name, a persona or a message) cannot inject further macros.
Anything that is not a known macro, or a known macro with arguments it cannot use, is left
exactly as typed.

Chat and global variables (`{{getvar::x}}`, `{{setvar::x::v}}`, `{{addvar}}`, `{{incvar}}`,
`{{decvar}}` and their `globalvar` twins) run first, line by line and kind by kind in
SillyTavern's order (every getvar of a line, then every setvar, ...), so a line that sets a
variable and reads it sees the value from before; they change the dictionaries the context
holds, which the caller saves. Their values are not scanned for further macros either.
"""

from __future__ import annotations

import hashlib
import json
import math
import random
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime
from decimal import Decimal
from typing import Any

__all__ = ["MacroContext", "substitute"]

MAX_DICE = 100
MAX_SIDES = 10000

# The body is anything without "{{" or "}}" in it (single braces are fine), written as an
# unrolled loop so a long text without a closing "}}" is scanned once, not once per position.
# {{trim}} also takes the whitespace around it. Leading blanks are tried only from the start of
# a run (the look-behind), so a long run of blanks is scanned once rather than once per blank.
MACRO_RE = re.compile(
    r"(?P<trim>(?:(?<!\s)\s+)?\{\{trim\}\}\s*)"
    r"|\{\{(?!\{)(?P<body>[^{}]*(?:\{(?!\{)[^{}]*|\}(?!\})[^{}]*)*)\}\}",
    re.IGNORECASE,
)

LEGACY_SPLIT_RE = re.compile(r"(?<!\\),")

# Digits are bounded so an absurd modifier cannot reach int()'s digit limit.
DICE_RE = re.compile(r"\s*(?:(\d{1,3})?d(\d{1,5})|(\d{1,5}))\s*(?:([+-])\s*(\d{1,6}))?\s*", re.IGNORECASE)

MONTHS = (
    "January",
    "February",
    "March",
    "April",
    "May",
    "June",
    "July",
    "August",
    "September",
    "October",
    "November",
    "December",
)
WEEKDAYS = ("Monday", "Tuesday", "Wednesday", "Thursday", "Friday", "Saturday", "Sunday")


@dataclass
class MacroContext:
    char: str = ""
    user: str = ""
    persona: str = ""  # the persona's description
    description: str = ""  # the character's description
    scenario: str = ""
    personality: str = ""
    last_message: str = ""
    last_message_at: datetime | None = None  # for {{idle_duration}}
    now: datetime | None = None  # injected clock; UTC now at call time when None
    chat_id: str = ""  # seeds {{pick}} so it is stable per chat
    rng: random.Random | None = None  # for {{random}} and {{roll}}; a fresh Random() when None
    # The chat's variables (SillyTavern's `chat_metadata.variables`) and the host's global ones,
    # changed in place by {{setvar}} and the rest; None: the macros read nothing and keep nothing.
    variables: dict[str, Any] | None = None
    global_variables: dict[str, Any] | None = None


def substitute(text: str, ctx: MacroContext) -> str:
    """Return the text with every known macro replaced by its value for this context."""
    if "{{" not in text:
        return text
    kept: list[str] = []
    if VARIABLE_HINT_RE.search(text):
        text = _variables(text, ctx, kept)
    expander = _Expander(ctx)
    text = MACRO_RE.sub(expander, text)
    if kept:
        text = KEPT_RE.sub(lambda m: kept[int(m.group(1))], text)
    return text


# A variable macro's value stands in the text as a private-use mark until the other macros are
# done, so it is never read as a macro itself.
KEPT_RE = re.compile("\ue000(\\d+)\ue001")
VARIABLE_HINT_RE = re.compile(r"\{\{(?:get|set|add|inc|dec)(?:global)?var::", re.IGNORECASE)
# SillyTavern's patterns: a name runs to the next "}" (or ":" when a value follows), a value to "}".
VARIABLE_RES = tuple(
    (
        kind,
        scope,
        re.compile(pattern.replace("KIND", kind + ("globalvar" if scope else "var")), re.IGNORECASE),
    )
    for scope in (False, True)
    for kind, pattern in (
        ("get", r"\{\{KIND::([^}]+)\}\}"),
        ("set", r"\{\{KIND::([^:]+)::([^}]+)\}\}"),
        ("add", r"\{\{KIND::([^:]+)::([^}]+)\}\}"),
        ("inc", r"\{\{KIND::([^}]+)\}\}"),
        ("dec", r"\{\{KIND::([^}]+)\}\}"),
    )
)
JS_NUMBER_RE = re.compile(r"[+-]?(?:\d+\.?\d*(?:[eE][+-]?\d+)?|\.\d+(?:[eE][+-]?\d+)?)")


def _variables(text: str, ctx: MacroContext, kept: list[str]) -> str:
    def mark(value: str) -> str:
        kept.append(value)
        return f"\ue000{len(kept) - 1}\ue001"

    lines = text.split("\n")
    for index, line in enumerate(lines):
        if "{{" not in line:
            continue
        for kind, scope, pattern in VARIABLE_RES:
            store = ctx.global_variables if scope else ctx.variables

            def replace(match: re.Match[str], kind: str = kind, store: dict | None = store) -> str:
                name = match.group(1).strip()
                if kind == "get":
                    return mark(js_string(read_variable(store, name)))
                if kind == "set":
                    if store is not None:
                        store[name] = match.group(2)
                    return ""
                value = match.group(2) if kind == "add" else (1 if kind == "inc" else -1)
                result = add_variable(store, name, value)
                return "" if kind == "add" else mark(js_string(result))

            line = pattern.sub(replace, line)
        lines[index] = line
    return "\n".join(lines)


def js_number(value: Any) -> float | None:
    """Return JavaScript's `Number(value)` for a JSON value (None for NaN)."""
    if value is None or isinstance(value, bool):
        return float(bool(value))
    if isinstance(value, int | float):
        return None if isinstance(value, float) and math.isnan(value) else float(value)
    if isinstance(value, list):
        return js_number(value[0]) if len(value) == 1 else (0.0 if not value else None)
    if not isinstance(value, str):
        return None
    text = value.strip()
    if not text:
        return 0.0
    if text in ("Infinity", "+Infinity", "-Infinity"):
        return -math.inf if text.startswith("-") else math.inf
    for prefix, base in (("0x", 16), ("0o", 8), ("0b", 2)):
        if text[:2].lower() == prefix:
            try:
                return float(int(text[2:], base))
            except ValueError:
                return None
    return float(text) if JS_NUMBER_RE.fullmatch(text) else None


def js_string(value: Any) -> str:
    """Return JavaScript's `String(value)` for what a variable holds."""
    if isinstance(value, bool):
        return "true" if value else "false"
    if value is None:
        return "null"
    if isinstance(value, float | int):
        return _js_number_text(float(value))
    if isinstance(value, list):
        return ",".join("" if item is None else js_string(item) for item in value)
    if isinstance(value, dict):
        return "[object Object]"
    return str(value)


def _js_number_text(number: float) -> str:
    if math.isinf(number):
        return "Infinity" if number > 0 else "-Infinity"
    if number == int(number) and abs(number) < 1e21:
        return str(int(number))
    if abs(number) >= 1e21 or abs(number) < 1e-6:
        mantissa, exponent = repr(number).split("e")
        return f"{mantissa}e{'-' if exponent.startswith('-') else '+'}{int(exponent.lstrip('+-'))}"
    return format(Decimal(repr(number)), "f")


def _stored_number(number: float) -> int | float:
    return int(number) if number == int(number) and abs(number) < 2**53 else number


def read_variable(store: dict | None, name: str) -> Any:
    """Return a variable as SillyTavern's getvar reads it: a number when it reads as one, else
    its text ("" when unset)."""
    value = store.get(name) if store is not None else None
    if store is None or name not in store:
        return ""
    if isinstance(value, str) and not value.strip():
        return value
    number = js_number(value)
    if number is None:
        return value
    return _stored_number(number) if not math.isinf(number) else number


def add_variable(store: dict | None, name: str, value: Any) -> Any:
    """Add `value` to a variable as SillyTavern's addvar does: a JSON list gets it appended, two
    numbers are summed, anything else is joined as text. Returns the new value."""
    current = read_variable(store, name) or 0
    if isinstance(current, str):
        try:
            parsed = json.loads(current)
        except ValueError:
            parsed = None
        if isinstance(parsed, list):
            parsed.append(value)
            if store is not None:
                store[name] = json.dumps(parsed, ensure_ascii=False, separators=(",", ":"))
            return parsed
    increment = js_number(value)
    base = js_number(current)
    if increment is None or base is None:
        result: Any = ("" if current == 0 else js_string(current)) + js_string(value)
    else:
        total = base + increment
        if math.isnan(total):
            return ""
        result = _stored_number(total) if not math.isinf(total) else total
    if store is not None:
        store[name] = result
    return result


class _Expander:
    """Hold the per-call state (clock, random source, pick counters) for one substitution."""

    def __init__(self, ctx: MacroContext) -> None:
        self.ctx = ctx
        self.rng = ctx.rng if ctx.rng is not None else random.Random()
        self._now = ctx.now
        self.pick_counts: Counter[str] = Counter()
        self.simple: dict[str, Callable[[], str]] = {
            "char": lambda: ctx.char,
            "user": lambda: ctx.user,
            "persona": lambda: ctx.persona,
            "description": lambda: ctx.description,
            "scenario": lambda: ctx.scenario,
            "personality": lambda: ctx.personality,
            "lastmessage": lambda: ctx.last_message,
            "time": lambda: format_time(self.now),
            "date": lambda: format_date(self.now),
            "weekday": lambda: WEEKDAYS[self.now.weekday()],
            "idle_duration": self.idle_duration,
            "newline": lambda: "\n",
        }
        self.with_args: dict[str, Callable[[str, str, bool], str | None]] = {
            "random": self.random,
            "pick": self.pick,
            "roll": self.roll,
        }

    @property
    def now(self) -> datetime:
        # Read the clock once so {{time}}, {{date}} and {{weekday}} in one text agree.
        if self._now is None:
            self._now = datetime.now(UTC)
        return self._now

    def __call__(self, match: re.Match[str]) -> str:
        raw = match.group(0)
        if match.group("trim") is not None:
            return ""
        body = match.group("body")
        if body.startswith("//"):
            return ""
        value = self.expand(raw, body)
        return raw if value is None else value

    def expand(self, raw: str, body: str) -> str | None:
        """Return the macro's value, or None when it is not a macro this engine knows."""
        if "::" in body:
            name, rest = body.split("::", 1)
            legacy = False
        elif ":" in body:
            name, rest = body.split(":", 1)
            legacy = True
        else:
            simple = self.simple.get(body.lower())
            return simple() if simple else None
        handler = self.with_args.get(name.lower())
        return handler(raw, rest, legacy) if handler else None

    def random(self, raw: str, rest: str, legacy: bool) -> str:
        return self.rng.choice(_split_list(rest, legacy))

    def pick(self, raw: str, rest: str, legacy: bool) -> str:
        options = _split_list(rest, legacy)
        occurrence = self.pick_counts[raw]
        self.pick_counts[raw] += 1
        digest = hashlib.sha256(f"{self.ctx.chat_id}|{raw}|{occurrence}".encode()).digest()
        return options[int.from_bytes(digest[:8], "big") % len(options)]

    def roll(self, raw: str, rest: str, legacy: bool) -> str | None:
        return roll_dice(rest, self.rng)

    def idle_duration(self) -> str:
        then = self.ctx.last_message_at
        if then is None:
            return "just now"
        now = self.now
        if (then.tzinfo is None) != (now.tzinfo is None):
            # Treat a naive timestamp as being on the same clock as the other one.
            if then.tzinfo is None:
                then = then.replace(tzinfo=now.tzinfo)
            else:
                now = now.replace(tzinfo=then.tzinfo)
        return humanize_duration((now - then).total_seconds())


def _split_list(rest: str, legacy: bool) -> list[str]:
    """Split `a::b::c`, or the legacy `a, b\\, c` on unescaped commas with each item trimmed."""
    if not legacy:
        return rest.split("::")
    return [item.replace("\\,", ",").strip() for item in LEGACY_SPLIT_RE.split(rest)]


def roll_dice(formula: str, rng: random.Random) -> str | None:
    """Roll a formula such as `2d6+3`, `d20` or `20` (= 1d20); None when it is not valid dice."""
    match = DICE_RE.fullmatch(formula)
    if not match:
        return None
    count_text, sides_text, bare_sides, sign, modifier_text = match.groups()
    count = int(count_text) if count_text else 1
    sides = int(sides_text or bare_sides)
    if not (1 <= count <= MAX_DICE and 1 <= sides <= MAX_SIDES):
        return None
    total = sum(rng.randint(1, sides) for _ in range(count))
    if modifier_text:
        total += int(modifier_text) if sign == "+" else -int(modifier_text)
    return str(total)


def format_time(moment: datetime) -> str:
    """Format as `2:05 PM` without depending on the process locale."""
    hour = moment.hour % 12 or 12
    return f"{hour}:{moment.minute:02d} {'AM' if moment.hour < 12 else 'PM'}"


def format_date(moment: datetime) -> str:
    """Format as `November 29, 2026` without depending on the process locale."""
    return f"{MONTHS[moment.month - 1]} {moment.day}, {moment.year}"


def humanize_duration(seconds: float) -> str:
    """Describe a span the way a person would: `just now`, `5 minutes`, `2 hours`, `3 days`."""
    if seconds < 45:
        return "just now"
    for unit, size, limit in (
        ("minute", 60, 45),
        ("hour", 3600, 22),
        ("day", 86400, 26),
        ("month", 86400 * 30.4375, 11),
    ):
        amount = max(1, round(seconds / size))
        if amount < limit:
            return _plural(amount, unit)
    return _plural(max(1, round(seconds / (86400 * 365.25))), "year")


def _plural(amount: int, unit: str) -> str:
    return f"{amount} {unit}" if amount == 1 else f"{amount} {unit}s"
