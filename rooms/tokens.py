"""Token counts of room text, from the model gateway's counters."""

from __future__ import annotations

from collections.abc import Callable

from orbchat.connections import gateway


def count(text: str, model: str = gateway.DEFAULT_TOKENIZER) -> int:
    """Return the tokens of `text` for `model` (an OpenAI tokenizer when litellm knows no better)."""
    return gateway.count_tokens(text, model)


def counter_for(model: str) -> Callable[[str], int]:
    return gateway.token_counter(model)
