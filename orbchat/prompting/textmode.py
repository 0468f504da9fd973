"""A turn's prompt for a text-completion model: the chat assembly, then one instruct-formatted text (pure).

The story string of the context template takes the place of the preset sections it covers (main
prompt, card fields, persona, world info before/after, example dialogue); everything else the
preset places (Memory, the chat history with what is injected at a depth, the author's note,
literal sections) is assembled as for a chat model and then written with the instruct template.
Post-history instructions are sent only when the context template allows them
(`allow_jailbreak`), as SillyTavern does.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from dataclasses import dataclass

from orbchat.prompting import instruct
from orbchat.prompting.assemble import ORIGINAL_RE, Prompt, PromptInput, default_count_tokens, persona_text
from orbchat.prompting.macros import MacroContext, substitute
from orbchat.prompting.worldinfo import Position

# Preset markers whose text the story string carries.
STORY_MARKERS = frozenset(
    "main_prompt world_info_before world_info_after char_description char_personality scenario "
    "persona example_dialogue".split()
)
POST_HISTORY = frozenset({"post_history"})


@dataclass(frozen=True)
class TextFormat:
    """How a text-completion connection writes its prompt.

    `instruct` None: no instruct template ("Name: text" lines). `system_prompt` None: the preset's
    main prompt is the system prompt; a card's own system prompt replaces either
    ({{original}} stands for it). `instruct_label`, `context_label`: which templates these are
    and how they were chosen, in words for the Prompt Preview.
    """

    instruct: instruct.Instruct | None
    context: instruct.Context
    system_prompt: str | None = None
    allow_post_history: bool = False
    instruct_label: str = ""
    context_label: str = ""


def _is_main(section: dict) -> bool:
    return section.get("identifier") == "main" or section.get("marker") == "main_prompt"


def _is_post_history(section: dict) -> bool:
    return section.get("marker") in POST_HISTORY or section.get("identifier") == "jailbreak"


def _sequence_overhead(fmt: TextFormat, count: Callable[[str], int]) -> dict[str, int]:
    ins = fmt.instruct
    if ins is None:
        return {"user": 2, "assistant": 2}
    return {
        "user": count(ins.input_sequence + ins.input_suffix) + 2,
        "assistant": count(ins.output_sequence + ins.output_suffix) + 2,
    }


def prepare(inp: PromptInput, fmt: TextFormat) -> PromptInput:
    """Return the assembler's input for a text-completion turn.

    The sections the story string covers are left out, names are not prefixed (the instruct
    template's names behaviour decides), nudges are not sent (the reply line says who writes), and
    the budget keeps room for the story string, the examples and each message's sequences.
    """
    count = inp.count_tokens or default_count_tokens
    sections = [
        s
        for s in inp.sections
        if s.get("enabled", True)
        and not _is_main(s)
        and not (s.get("kind") == "marker" and s.get("marker") in STORY_MARKERS)
        and (fmt.allow_post_history or not _is_post_history(s))
    ]
    head = render(inp, dataclasses.replace(inp, history=()), Prompt([], [], None, 0, 0, 0), fmt)
    overhead = _sequence_overhead(fmt, count)
    history = [
        dataclasses.replace(
            h, tokens=(h.tokens if h.tokens is not None else count(h.text)) + overhead.get(h.role, 2)
        )
        for h in inp.history
    ]
    return dataclasses.replace(
        inp,
        sections=sections,
        history=history,
        prefix_names=False,
        group_nudge="",
        mode="normal",
        context_size=max(0, inp.context_size - count(head.text)),
    )


def _macro_context(inp: PromptInput) -> MacroContext:
    card = _speaking_card(inp)
    return inp.macro_context or MacroContext(
        char=inp.speaker,
        user=inp.user_name,
        persona=inp.persona_description,
        description=card.description,
        scenario=card.scenario,
        personality=card.personality,
    )


def _speaking_card(inp: PromptInput):
    for card in inp.characters:
        if card.name == inp.speaker:
            return card
    return inp.characters[0] if inp.characters else None


def _card_field(inp: PromptInput, name: str) -> str:
    cards = inp.characters
    if len(cards) == 1:
        return getattr(cards[0], name)
    return "\n".join(f"{c.name}: {getattr(c, name)}" for c in cards if getattr(c, name).strip())


def _system(inp: PromptInput, fmt: TextFormat) -> str:
    if fmt.system_prompt is not None:
        base = fmt.system_prompt
    else:
        main = next((s for s in inp.sections if s.get("enabled", True) and _is_main(s)), None)
        base = (main.get("text") or "") if main else ""
    card = _speaking_card(inp)
    override = card.system_prompt if card is not None else ""
    if override.strip():
        return ORIGINAL_RE.sub(lambda _: base, override)
    return base


def story_fields(inp: PromptInput, fmt: TextFormat) -> instruct.StoryFields:
    """Return what the story string is rendered from."""
    world = sorted((w for w in inp.world_info if w.content.strip()), key=lambda w: w.order)

    def lore(position: int) -> str:
        return "\n".join(w.content for w in world if w.position == position)

    card = _speaking_card(inp)
    examples = card.mes_example if card is not None else ""
    top, bottom = lore(Position.EXAMPLES_TOP), lore(Position.EXAMPLES_BOTTOM)
    if examples.strip() and (top or bottom):
        examples = "\n".join(
            part for part in (top and f"<START>\n{top}", examples, bottom and f"<START>\n{bottom}") if part
        )
    return instruct.StoryFields(
        char=inp.speaker,
        user=inp.user_name,
        system=_system(inp, fmt),
        description=_card_field(inp, "description"),
        personality=_card_field(inp, "personality"),
        scenario=_card_field(inp, "scenario"),
        persona=persona_text(inp, _macro_context(inp)) if inp.others else inp.persona_description,
        wi_before=lore(Position.BEFORE_CHAR),
        wi_after=lore(Position.AFTER_CHAR),
        examples=examples,
    )


def turns_of(inp: PromptInput, prompt: Prompt) -> list[instruct.Turn]:
    """Return the assembled messages as turns, each chat message with its speaker's name and
    everything else marked as injected."""
    kept = []
    if prompt.history_kept is not None:
        first, last = prompt.history_kept
        kept = [h for h in inp.history if not h.hidden and first <= h.seq <= last]
    turns = []
    index = 0
    for message in prompt.messages:
        role, content = message["role"], message["content"]
        name, injected = "", True
        if index < len(kept) and role == kept[index].role and content == kept[index].text:
            name, injected = kept[index].name, False
            index += 1
        turns.append(instruct.Turn(role=role, text=content, name=name, injected=injected))
    return turns


def render(
    original: PromptInput,
    prepared: PromptInput,
    prompt: Prompt,
    fmt: TextFormat,
    *,
    others: tuple[str, ...] = (),
    custom_stop: tuple[str, ...] = (),
) -> instruct.TextPrompt:
    """Return the text prompt of a turn whose chat assembly (from `prepared`) is `prompt`.

    `original` is the turn's own input: its mode and its cards (several make a group chat).
    `others`: the other characters' names, whose lines stop the reply.
    """
    ctx = _macro_context(original)
    return instruct.render(
        instruct=fmt.instruct,
        context=fmt.context,
        story=story_fields(original, fmt),
        turns=turns_of(prepared, prompt),
        substitute=lambda text: substitute(text, ctx),
        mode=original.mode,
        group=bool(others) or len(original.characters) > 1,
        chat_begins=prompt.history_dropped == 0,
        others=others,
        custom_stop=custom_stop,
    )
