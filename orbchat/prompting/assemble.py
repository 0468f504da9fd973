"""Build the OpenAI-format messages for one AI turn from a preset's ordered sections.

`assemble` is pure: no Django, no database, no I/O. Its work is bounded by its inputs, and each
history message's tokens are counted at most once (its precomputed `tokens` are used when given).
The output is deterministic except for clock and random macros, which follow the macro context:
pass one with `now` and `rng` set for a fully reproducible prompt.

Cache-friendly assembly (`cache_friendly`, with `history_align`): consecutive prompts of a chat
share a long exact prefix, so a provider's prompt cache hits. The history window drops old
messages a block of `history_align` message numbers at a time (its first message number is a
multiple of it), and what changes every turn (the Memory section, world info activated by the
recent messages, depth injections, the author's note) sits after the stable part: depth
injections keep the depths their authors gave them (a SillyTavern author's note four deep stays four
deep), and the Memory section and the activated world info of the fixed positions join the author's
note at its depth. Only the last few messages then differ from one prompt to the next.
`Prompt.stable_messages` counts the leading messages that form the stable part.

Token accounting: a prompt's size is the sum of `count_tokens(content)` over its messages, with no
per-message overhead. A history message counts its text's tokens (precomputed or counted) plus,
when names are prefixed, the tokens of its `"Name: "` prefix, counted once per distinct name.
"""

from __future__ import annotations

import dataclasses
import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field

from orbchat.prompting.macros import MacroContext, substitute
from orbchat.prompting.worldinfo import Position

__all__ = [
    "CONTINUE_NUDGE",
    "IMPERSONATE_NUDGE",
    "CardInfo",
    "DepthPrompt",
    "HistoryMessage",
    "Prompt",
    "PromptInput",
    "SectionReport",
    "WorldInsert",
    "assemble",
    "default_count_tokens",
]

ROLES = ("system", "user", "assistant")
WORLD_ROLES = {0: "system", 1: "user", 2: "assistant"}
CONTINUE_NUDGE = "[Continue your last message without repeating its original content.]"
IMPERSONATE_NUDGE = (
    "[Write the next message as {{user}}, in {{user}}'s voice and first person. "
    "Write only {{user}}'s message.]"
)
WORLD_AT_DEPTH_NAME = "World info (at depth)"
DEPTH_PROMPT_NAME = "Character's note"

START_RE = re.compile(r"<START>", re.IGNORECASE)
ORIGINAL_RE = re.compile(r"\{\{original\}\}", re.IGNORECASE)
MEMORY_RE = re.compile(r"\{\{memory\}\}", re.IGNORECASE)


@dataclass(frozen=True)
class HistoryMessage:
    seq: int
    role: str  # "user" (a human) | "assistant" (a character) | "system"
    name: str  # speaker's display name
    text: str
    hidden: bool = False  # hidden messages never enter the prompt
    tokens: int | None = None  # precomputed token count of `text` (None -> count_tokens)


@dataclass(frozen=True)
class CardInfo:
    name: str
    description: str = ""
    personality: str = ""
    scenario: str = ""
    mes_example: str = ""
    system_prompt: str = ""
    post_history_instructions: str = ""
    nickname: str = ""  # a V3 card's nickname: what {{char}} stands for in this card's texts


@dataclass(frozen=True)
class DepthPrompt:
    """A card's Character's Note (SillyTavern's `depth_prompt`), sent into the chat at a depth."""

    text: str
    char: str  # {{char}} in the text
    depth: int = 4
    role: str = "system"


@dataclass(frozen=True)
class WorldInsert:
    """One activated world-info entry, already chosen by the activation function."""

    content: str
    position: int = 0  # worldinfo.Position
    depth: int = 4
    role: int | None = None  # 0 system, 1 user, 2 assistant (None = system)
    order: int = 100
    constant: bool = False  # always on: its text does not change from turn to turn


@dataclass(frozen=True)
class PersonInfo:
    """Another person in a shared room: the name they write as and their persona's description."""

    name: str
    description: str


@dataclass(frozen=True)
class PromptInput:
    sections: list[dict]  # preset sections in order (shape of orbchat.library.presets.section())
    characters: list[CardInfo]  # the cards in the prompt (solo: one)
    speaker: str  # the replying character's name ({{char}})
    user_name: str  # {{user}}
    persona_description: str = ""
    # A shared room's other people: listed after the writer's own persona, each with {{user}} as
    # their own name. Empty in a solo room, whose Persona section is the description alone.
    others: Sequence[PersonInfo] = ()
    world_info: Sequence[WorldInsert] = ()
    authors_note: str = ""
    authors_note_depth: int = 4
    authors_note_role: str = "system"
    history: Sequence[HistoryMessage] = ()  # oldest first; a tail of the chat
    memory_text: str = ""  # what recall produced; "" -> the Memory section adds nothing at all
    memory_template: str = "Past events:\n{{memory}}"
    context_size: int = 8192
    max_tokens: int = 400  # reserved for the reply: budget = context_size - max_tokens
    macro_context: MacroContext | None = None  # default: built from speaker/user/persona/speaking card
    prefix_names: bool = False  # group chats: history lines become "Name: text"
    mode: str = "normal"  # "normal" | "continue" | "impersonate"
    # Rooms with several characters: who should write the reply (sent last, in "normal" mode only).
    group_nudge: str = ""
    count_tokens: Callable[[str], int] | None = None  # default: default_count_tokens
    # The Character's Notes in play: the speaker's, or in a room with several characters every
    # seated card's, as SillyTavern injects them.
    depth_prompts: Sequence[DepthPrompt] = ()
    # Prompt-cache friendly layout (see the module docstring); 0 / False: the classic layout.
    history_align: int = 0  # drop old history this many message numbers at a time
    cache_friendly: bool = False  # what changes every turn goes after the stable part


@dataclass(frozen=True)
class SectionReport:
    name: str
    kind: str  # "literal" | "marker"
    tokens: int
    messages: int  # how many messages it contributed


@dataclass(frozen=True)
class Prompt:
    messages: list[dict]  # [{"role": "system"|"user"|"assistant", "content": str}, ...]
    sections: list[SectionReport]  # in prompt order, including zero-token ones that were enabled
    history_kept: tuple[int, int] | None  # (first_seq, last_seq) of the history included; None when none
    history_dropped: int  # how many eligible (non-hidden) history messages did not fit
    total_tokens: int
    budget: int
    stable_messages: int = 0  # leading messages that stay the same from turn to turn (cache mode)


def default_count_tokens(text: str) -> int:
    """Estimate tokens as a quarter of the characters, plus one for any non-empty text."""
    return len(text) // 4 + 1 if text else 0


@dataclass
class _Part:
    """One report line under construction: its messages, placed in order or at a depth."""

    name: str
    kind: str
    messages: list[dict] = field(default_factory=list)
    depth: int | None = None  # None: in order; otherwise injected into the chat history
    is_history: bool = False

    def add(self, role: str, text: str) -> None:
        """Add a message unless the text is blank."""
        if text.strip():
            self.messages.append(_msg(role, text))


@dataclass
class _Injection:
    depth: int
    rank: tuple[int, ...]  # tie-break at one depth: sections in order, then world info
    message: dict


def assemble(inp: PromptInput) -> Prompt:
    """Return the messages for one turn, fitting as much recent history as the budget allows."""
    return _Assembler(inp).run()


class _Assembler:
    def __init__(self, inp: PromptInput) -> None:
        self.inp = inp
        self.count = inp.count_tokens or default_count_tokens
        self.visible = [message for message in inp.history if not message.hidden]
        self.card = _speaking_card(inp)
        self.ctx = inp.macro_context or self._default_context()
        self.world = sorted(
            (insert for insert in inp.world_info if insert.content.strip()),
            key=lambda insert: insert.order,
        )
        self.kept_seqs: list[int] = []
        self.world_injections: list[_Injection] = []
        self.note_injections: list[_Injection] = []
        note = next(
            (s for s in inp.sections if s.get("marker") == "authors_note" and s.get("enabled", True)), {}
        )
        self.volatile_depth = _note_depth(note, inp.authors_note_depth)

    def _default_context(self) -> MacroContext:
        inp, card = self.inp, self.card
        return MacroContext(
            char=inp.speaker,
            user=inp.user_name,
            persona=inp.persona_description,
            description=card.description,
            scenario=card.scenario,
            personality=card.personality,
            last_message=self.visible[-1].text if self.visible else "",
        )

    def sub(self, text: str, ctx: MacroContext | None = None) -> str:
        return substitute(text, ctx or self.ctx)

    def run(self) -> Prompt:
        inp = self.inp
        parts = [self.build(section) for section in inp.sections if section.get("enabled", True)]
        history_part = next((part for part in parts if part.is_history), None)
        unreported: set[int] = set()
        if history_part is None:
            # Depth injections need a history block; without one they go last, as after an empty chat.
            history_part = _Part("Chat history", "marker", is_history=True)
            parts.append(history_part)
            unreported.add(id(history_part))
        world_depth = self.world_at_depth()
        parts.insert(parts.index(history_part) + 1, world_depth)
        if not world_depth.messages:
            unreported.add(id(world_depth))
        notes = self.depth_prompts()
        parts.insert(parts.index(history_part) + 1, notes)
        if not notes.messages:
            unreported.add(id(notes))
        if inp.mode == "continue":
            parts.append(_Part("Continue", "literal", [_msg("system", CONTINUE_NUDGE)]))
        elif inp.mode == "impersonate":
            parts.append(_Part("Impersonate", "literal", [_msg("system", self.sub(IMPERSONATE_NUDGE))]))
        elif inp.group_nudge.strip():
            parts.append(_Part("Group nudge", "literal", [_msg("system", self.sub(inp.group_nudge))]))

        tokens = {id(part): sum(self.count(m["content"]) for m in part.messages) for part in parts}
        budget = inp.context_size - inp.max_tokens
        fixed = sum(tokens.values())
        if id(history_part) in unreported:
            kept, history_tokens = [], 0
        else:
            kept, history_tokens = self.fit_history(budget - fixed)
        history_part.messages = kept
        tokens[id(history_part)] = history_tokens

        injections = self.injections(parts)
        block = _inject(kept, injections)
        messages: list[dict] = []
        stable: int | None = None
        for part in parts:
            if part is history_part:
                moving = {id(injection.message) for injection in injections}
                first = next((i for i, m in enumerate(block) if id(m) in moving), len(block))
                stable = len(messages) + first
                messages.extend(block)
            elif part.depth is None and part is not world_depth and part is not notes:
                messages.extend(part.messages)

        reports = [
            SectionReport(part.name, part.kind, tokens[id(part)], len(part.messages))
            for part in parts
            if id(part) not in unreported
        ]
        return Prompt(
            messages=messages,
            sections=reports,
            history_kept=(self.kept_seqs[0], self.kept_seqs[-1]) if self.kept_seqs else None,
            history_dropped=len(self.visible) - len(self.kept_seqs),
            total_tokens=fixed + history_tokens,
            budget=budget,
            stable_messages=(stable or 0) if inp.cache_friendly else 0,
        )

    # Sections

    def build(self, section: dict) -> _Part:
        kind = section.get("kind", "literal")
        marker = section.get("marker") or ""
        name = section.get("name") or marker.replace("_", " ").capitalize() or "Section"
        if kind == "marker" and marker != "main_prompt":
            return self.build_marker(section, marker, name)
        if kind == "marker" or section.get("identifier") == "main":
            text = self.overridden(section, self.card.system_prompt)
        else:
            text = self.sub(section.get("text") or "")
        part = _Part(name, "marker" if kind == "marker" else "literal")
        part.add(_role(section.get("role")), text)
        if section.get("injection") == "depth":
            part.depth = _depth(section.get("depth"))
        return part

    def overridden(self, section: dict, override: str) -> str:
        """Return the section's text, or the card's override of it ({{original}} = the section's text).

        A section with `forbid_overrides` keeps its own text, as SillyTavern does.
        """
        original = section.get("text") or ""
        if override.strip() and not section.get("forbid_overrides"):
            return self.sub(ORIGINAL_RE.sub(lambda _: original, override))
        return self.sub(original)

    def build_marker(self, section: dict, marker: str, name: str) -> _Part:
        part = _Part(name, "marker")
        if marker == "chat_history":
            part.is_history = True
            return part
        if marker == "authors_note":
            text = self.authors_note()
            part.add(_role(self.inp.authors_note_role), text)
            part.depth = _note_depth(section, self.inp.authors_note_depth)
            return part
        if marker == "post_history":
            text = self.overridden(section, self.card.post_history_instructions)
            part.add(_role(section.get("role")), text)
            if section.get("injection") == "depth":
                part.depth = _depth(section.get("depth"))
            return part
        if marker == "example_dialogue":
            for text in self.example_dialogue():
                part.add("system", text)
            return part
        if marker == "memory" and self.inp.cache_friendly:
            part.add("system", self.memory())
            part.depth = self.volatile_depth
            return part
        builder = {
            "world_info_before": lambda: self.world_text(Position.BEFORE_CHAR),
            "world_info_after": lambda: self.world_text(Position.AFTER_CHAR),
            "char_description": self.char_description,
            "char_personality": self.char_personality,
            "scenario": self.scenario,
            "persona": lambda: persona_text(self.inp, self.ctx),
            "memory": self.memory,
        }.get(marker)
        if builder:
            part.add("system", builder())
        return part

    def world_text(self, position: int) -> str:
        return self.sub("\n".join(i.content for i in self.world if i.position == position and self.steady(i)))

    def steady(self, insert: WorldInsert) -> bool:
        """Whether an entry stays in its own position: always, except an activated one in cache mode."""
        return insert.constant or not self.inp.cache_friendly

    def add_activated_world(self, part: _Part) -> None:
        """Cache mode: the activated (not constant) entries of the fixed positions, in one message at
        the author's note depth (reported with the world info at depth)."""
        fixed = (Position.BEFORE_CHAR, Position.AFTER_CHAR, Position.EXAMPLES_TOP, Position.EXAMPLES_BOTTOM)
        text = "\n".join(i.content for i in self.world if i.position in fixed and not self.steady(i))
        if text.strip():
            message = _msg("system", self.sub(text))
            part.messages.append(message)
            self.world_injections.append(_Injection(self.volatile_depth, (1, -1), message))

    def card_texts(self, field_name: str, label: Callable[[str], str]) -> str:
        """Join one field of every card; with several cards, {{char}} in each is that card's name."""
        cards = self.inp.characters or [self.card]
        if len(cards) == 1:
            value = getattr(cards[0], field_name)
            return self.sub(label("{{char}}") + value) if value.strip() else ""
        lines = []
        for card in cards:
            value = getattr(card, field_name)
            if value.strip():
                ctx = dataclasses.replace(
                    self.ctx,
                    char=card.nickname or card.name,
                    description=card.description,
                    personality=card.personality,
                    scenario=card.scenario,
                )
                lines.append(label(card.name) + self.sub(value, ctx))
        return "\n".join(lines)

    def char_description(self) -> str:
        single = len(self.inp.characters) <= 1
        return self.card_texts("description", lambda name: "" if single else f"{name}: ")

    def char_personality(self) -> str:
        return self.card_texts("personality", lambda name: f"{name}'s personality: ")

    def scenario(self) -> str:
        single = len(self.inp.characters) <= 1
        return self.card_texts("scenario", lambda name: "Scenario: " if single else f"Scenario ({name}): ")

    def example_dialogue(self) -> list[str]:
        texts = [self.world_text(Position.EXAMPLES_TOP)]
        for block in START_RE.split(self.card.mes_example):
            if block.strip():
                texts.append(self.sub("Example dialogue:\n" + block.strip()))
        texts.append(self.world_text(Position.EXAMPLES_BOTTOM))
        return texts

    def memory(self) -> str:
        memory = self.inp.memory_text
        if not memory.strip():
            return ""
        template = self.inp.memory_template
        if MEMORY_RE.search(template):
            text = MEMORY_RE.sub(lambda _: memory, template)
        else:
            # A template without the slot still must not lose what recall found.
            text = f"{template}\n{memory}" if template else memory
        return self.sub(text)

    def authors_note(self) -> str:
        pieces = [
            "\n".join(i.content for i in self.world if i.position == Position.AN_TOP),
            self.inp.authors_note,
            "\n".join(i.content for i in self.world if i.position == Position.AN_BOTTOM),
        ]
        return self.sub("\n".join(piece for piece in pieces if piece.strip()))

    def world_at_depth(self) -> _Part:
        """Group position-4 world info by (depth, role) into one message each, deepest first."""
        groups: dict[tuple[int, str], list[str]] = {}
        for insert in self.world:
            if insert.position == Position.AT_DEPTH:
                key = (_depth(insert.depth), WORLD_ROLES.get(insert.role, "system"))
                groups.setdefault(key, []).append(insert.content)
        part = _Part(WORLD_AT_DEPTH_NAME, "marker")
        for rank, key in enumerate(sorted(groups, key=lambda key: (-key[0], ROLES.index(key[1])))):
            message = _msg(key[1], self.sub("\n".join(groups[key])))
            part.messages.append(message)
            self.world_injections.append(_Injection(key[0], (2, rank), message))
        if self.inp.cache_friendly:
            self.add_activated_world(part)
        return part

    def depth_prompts(self) -> _Part:
        """One message per Character's Note, at its depth and role, with {{char}} its own card's.

        At a depth they share, they come after the sections sent there (the author's note) and
        before world info, the order SillyTavern joins its extension prompts in.
        """
        part = _Part(DEPTH_PROMPT_NAME, "marker")
        for rank, note in enumerate(self.inp.depth_prompts):
            text = self.sub(note.text, dataclasses.replace(self.ctx, char=note.char))
            if not text.strip():
                continue
            message = _msg(_role(note.role), text)
            part.messages.append(message)
            self.note_injections.append(_Injection(_depth(note.depth), (1, rank), message))
        return part

    # History

    def fit_history(self, room: int) -> tuple[list[dict], int]:
        """Take visible messages newest first while they fit in `room`; stop at the first that does not."""
        prefix_tokens: dict[str, int] = {}
        taken: list[tuple[HistoryMessage, int]] = []
        used = 0
        for message in reversed(self.visible):
            tokens = message.tokens if message.tokens is not None else self.count(message.text)
            prefix = self.prefix(message)
            if prefix:
                if prefix not in prefix_tokens:
                    prefix_tokens[prefix] = self.count(prefix)
                tokens += prefix_tokens[prefix]
            if used + tokens > room:
                break
            used += tokens
            taken.append((message, tokens))
        taken.reverse()
        align = self.inp.history_align
        if align > 0 and len(taken) < len(self.visible) and taken:
            # Drop a whole block: the window starts at a multiple of `align`, so it stays put
            # (and the prompt's prefix with it) until the history outgrows the next block.
            start = -(-taken[0][0].seq // align) * align
            aligned = [(m, t) for m, t in taken if m.seq >= start]
            if aligned:
                used -= sum(t for _, t in taken[: len(taken) - len(aligned)])
                taken = aligned
        taken = [m for m, _ in taken]
        self.kept_seqs = [message.seq for message in taken]
        return [_msg(_role(m.role), self.prefix(m) + m.text) for m in taken], used

    def prefix(self, message: HistoryMessage) -> str:
        return f"{message.name}: " if self.inp.prefix_names and message.name else ""

    def injections(self, parts: list[_Part]) -> list[_Injection]:
        result = []
        for index, part in enumerate(parts):
            if part.depth is not None:
                result.extend(_Injection(part.depth, (0, index), message) for message in part.messages)
        result += self.note_injections + self.world_injections
        return result


def _inject(history: list[dict], injections: list[_Injection]) -> list[dict]:
    """Insert each injection `depth` messages from the end; deeper than the history means at its start."""
    size = len(history)
    slots: dict[int, list[_Injection]] = {}
    for injection in injections:
        slots.setdefault(max(0, size - injection.depth), []).append(injection)
    block: list[dict] = []
    for index in range(size + 1):
        # Clamped injections share slot 0; the deeper one still comes first.
        for injection in sorted(slots.get(index, ()), key=lambda i: (-i.depth, i.rank)):
            block.append(injection.message)
        if index < size:
            block.append(history[index])
    return block


def persona_text(inp: PromptInput, ctx: MacroContext) -> str:
    """Return the Persona section's text: the writer's description, macros filled from `ctx`.

    In a shared room every other person with a description follows as "Name: description", and
    the writer's own leads as "Name: description" too, so the model can tell whose is whose.
    {{user}} in another's description is that person's name; {{persona}} stays the writer's.
    """
    own = substitute(inp.persona_description, ctx)
    others = [person for person in inp.others if person.description.strip()]
    if not others:
        return own
    lines = [f"{ctx.user}: {own}"] if own.strip() else []
    for person in others:
        theirs = dataclasses.replace(ctx, user=person.name)
        lines.append(f"{person.name}: {substitute(person.description, theirs)}")
    return "\n".join(lines)


def _speaking_card(inp: PromptInput) -> CardInfo:
    for card in inp.characters:
        if card.name == inp.speaker:
            return card
    return inp.characters[0] if inp.characters else CardInfo(name=inp.speaker)


def _msg(role: str, content: str) -> dict:
    return {"role": role, "content": content}


def _role(role: object) -> str:
    return role if role in ROLES else "system"


def _note_depth(section: dict, chat_depth: int) -> int:
    """The author's note's depth: its section's own when the preset injects it, else the chat's."""
    return _depth(section.get("depth") if section.get("injection") == "depth" else chat_depth)


def _depth(depth: object) -> int:
    return max(0, depth) if isinstance(depth, int) else 4
