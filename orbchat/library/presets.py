"""Preset sections: the markers a preset can hold and the built-in default preset (pure data)."""

from __future__ import annotations

import uuid

# Marker name -> what a person sees. A marker is a slot the prompt assembler fills.
MARKERS: dict[str, str] = {
    "main_prompt": "Main prompt",
    "world_info_before": "World info (before)",
    "char_description": "Character description",
    "char_personality": "Character personality",
    "scenario": "Scenario",
    "persona": "Persona",
    "world_info_after": "World info (after)",
    "example_dialogue": "Example dialogue",
    "memory": "Memory",
    "chat_history": "Chat history",
    "post_history": "Post-history instructions",
    "authors_note": "Author's note",
}
ROLES = ("system", "user", "assistant")
INJECTIONS = ("relative", "depth")

DEFAULT_MAIN_PROMPT = (
    "You are {{char}} in an ongoing, immersive roleplay with {{user}}. Stay in character: speak and act "
    "only as {{char}} (and the world around them), never as {{user}}. Write vivid, grounded prose with "
    "sensory detail, show feelings through action and dialogue, keep established facts consistent, and "
    "move the story forward with choices, consequences and surprises. Match the length and tone of the "
    "scene; leave room for {{user}} to respond."
)
DEFAULT_POST_HISTORY = (
    "Continue the roleplay as {{char}}. Do not speak for {{user}}. Keep continuity with everything above."
)


def section(
    *,
    kind: str,
    name: str,
    marker: str | None = None,
    text: str = "",
    role: str = "system",
    enabled: bool = True,
    injection: str = "relative",
    depth: int = 4,
    identifier: str | None = None,
) -> dict:
    """Return one section in the shape presets store (and the SillyTavern codec reads)."""
    return {
        "identifier": identifier or (marker if kind == "marker" else uuid.uuid4().hex[:12]),
        "kind": kind,
        "marker": marker,
        "name": name,
        "role": role,
        "text": text,
        "enabled": enabled,
        "injection": injection,
        "depth": depth,
    }


def marker(name: str, **kwargs) -> dict:
    return section(kind="marker", marker=name, name=MARKERS[name], **kwargs)


def default_sections() -> list[dict]:
    """Return the built-in preset's sections: a good roleplay prompt out of the box."""
    return [
        section(kind="literal", name="Main prompt", text=DEFAULT_MAIN_PROMPT, identifier="main"),
        marker("world_info_before"),
        marker("persona"),
        marker("char_description"),
        marker("char_personality"),
        marker("scenario"),
        marker("world_info_after"),
        marker("example_dialogue"),
        marker("memory"),
        marker("chat_history"),
        marker("authors_note", injection="depth", depth=4),
        section(
            kind="literal",
            name="Post-history instructions",
            text=DEFAULT_POST_HISTORY,
            identifier="jailbreak",
        ),
        marker("post_history"),
    ]


DEFAULT_PRESET_NAME = "OrbChat default"
DEFAULT_SAMPLERS = {
    "temperature": 0.9,
    "top_p": 0.95,
    "top_k": 0,
    "min_p": 0.05,
    "frequency_penalty": 0.0,
    "presence_penalty": 0.0,
    "repetition_penalty": 1.0,
    "max_tokens": 400,
    "context_size": None,
    "stop": [],
    "seed": None,
}
