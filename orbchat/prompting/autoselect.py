"""Pick a template by the model's name, as SillyTavern's `autoSelectInstructPreset` does (pure).

A template may carry an `activation_regex`: a pattern written `/pattern/flags` or bare. The first
template, in the order given, whose pattern finds a match anywhere in the model's name is the one
used. A pattern that does not compile, or takes longer than `TIMEOUT` on the name, is skipped
(SillyTavern only warns in its console).
"""

from __future__ import annotations

import re
from collections.abc import Iterable

import regex

__all__ = ["activation_pattern", "first_match"]

# SillyTavern's regexFromString: an optional slash, the pattern, the same slash, then the flags.
_LITERAL = re.compile(r"(/?)(.+)\1([a-z]*)", re.IGNORECASE)
# Flags JavaScript accepts, each once; the ones Python has an equivalent of are applied.
_JS_FLAGS = frozenset("dgimsuvy")
_PY_FLAGS = {"i": regex.IGNORECASE, "m": regex.MULTILINE, "s": regex.DOTALL}
# Seconds one imported pattern may spend on a model's name (a pattern can backtrack for ever).
TIMEOUT = 0.1


def activation_pattern(text: object) -> regex.Pattern | None:
    """Return the compiled activation regex, or None when it is empty or does not compile."""
    if not isinstance(text, str) or not text:
        return None
    parts = _LITERAL.match(text)
    if parts is None:
        return None
    pattern, flags = parts.group(2), parts.group(3)
    if flags and (len(set(flags)) != len(flags) or not set(flags) <= set("gmixXsuUAJ")):
        # Not flags after all: SillyTavern takes the whole text as the pattern.
        pattern, flags = text, ""
    if not set(flags) <= _JS_FLAGS:
        return None  # JavaScript refuses these flags, so the template never matches there either
    options = 0
    for flag in flags:
        options |= _PY_FLAGS.get(flag, 0)
    try:
        return regex.compile(pattern, options | regex.VERSION0)
    except (regex.error, RecursionError, OverflowError, ValueError):
        return None


def first_match(candidates: Iterable[tuple[str, object]], model: str) -> str | None:
    """Return the key of the first (key, activation regex) whose regex matches `model`; None if none."""
    for key, text in candidates:
        pattern = activation_pattern(text)
        if pattern is None:
            continue
        try:
            if pattern.search(model, timeout=TIMEOUT):
                return key
        except TimeoutError:
            continue
    return None
