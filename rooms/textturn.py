"""A turn on a text-completion connection: the prompt text and the samplers its server reads."""

from __future__ import annotations

from orbchat.connections import samplers as backend_samplers
from orbchat.connections.models import Connection
from orbchat.prompting import assemble, textmode


def text_request(
    *,
    original: assemble.PromptInput,
    prepared: assemble.PromptInput,
    prompt: assemble.Prompt,
    fmt: textmode.TextFormat,
    samplers: dict,
    connection: Connection,
) -> tuple[str, dict]:
    """Return (prompt text, call parameters) for one turn, from its chat assembly and the preset.

    The preset's samplers (its fields and the SillyTavern settings it kept) go out under the
    backend's names; the stop strings are the template's, the names' and the preset's own.
    """
    others = tuple(c.name for c in original.characters if c.name != original.speaker)
    text = textmode.render(
        original, prepared, prompt, fmt, others=others, custom_stop=tuple(samplers.get("stop") or ())
    )
    values = {**(samplers.get("extra") or {}), **{k: v for k, v in samplers.items() if k != "extra"}}
    values["max_tokens"] = original.max_tokens
    params = backend_samplers.text_params(values, connection.text_backend)
    if text.stop:
        params["stop"] = text.stop
    return text.text, params
