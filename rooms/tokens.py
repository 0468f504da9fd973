"""Token counting for prompts, with litellm's offline counter."""

from __future__ import annotations

from functools import lru_cache

from orbchat import env

DEFAULT_MODEL = "gpt-4o"


@lru_cache(maxsize=64)
def _counter(model: str):
    env.apply_offline_defaults()
    import litellm

    # Prompt sections repeat turn after turn; their counts are remembered.
    @lru_cache(maxsize=4096)
    def count(text: str) -> int:
        return litellm.token_counter(model=model, text=text) if text else 0

    return count


def count(text: str, model: str = DEFAULT_MODEL) -> int:
    """Return the tokens of `text` for `model` (an OpenAI tokenizer when litellm knows no better)."""
    return _counter(model or DEFAULT_MODEL)(text)


def counter_for(model: str):
    return _counter(model or DEFAULT_MODEL)
