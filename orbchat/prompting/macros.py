"""Expand SillyTavern-compatible {{macros}} in prompt text.

One compiled pattern and a single `re.sub` pass: a macro's value is never scanned again, so
braces typed by a user (in a name, a persona or a message) cannot inject further macros.
Anything that is not a known macro, or a known macro with arguments it cannot use, is left
exactly as typed.
"""

from __future__ import annotations

import hashlib
import random
import re
from collections import Counter
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime

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


def substitute(text: str, ctx: MacroContext) -> str:
    """Return the text with every known macro replaced by its value for this context."""
    if "{{" not in text:
        return text
    expander = _Expander(ctx)
    return MACRO_RE.sub(expander, text)


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
