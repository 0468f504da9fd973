"""Render a turn as one text-completion prompt with an instruct template and a context template (pure).

The rules follow SillyTavern's text-completion path: the context template's story string (a
Handlebars template over the card's fields), the example messages split at `<START>`, the chat
start line, every message wrapped in the instruct template's sequences and suffixes (first/last
sequences, names behaviour, system-as-user), the line that opens the reply, and the stop strings.

No Django, no I/O: the caller passes the story fields, the prompt's messages in order and a
`substitute` function that fills macros ({{char}}, {{user}}, {{trim}}, ...).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field, fields, replace

__all__ = [
    "Context",
    "Instruct",
    "StoryFields",
    "TextPrompt",
    "Turn",
    "render",
    "render_messages",
    "render_story_string",
    "stop_strings",
]

NAMES_NONE, NAMES_FORCE, NAMES_ALWAYS = "none", "force", "always"

# A context template's `story_string_position` (SillyTavern's extension_prompt_types). Only "in
# chat" moves the story string; SillyTavern writes every other value at the top of the prompt.
STORY_IN_PROMPT, STORY_IN_CHAT, STORY_BEFORE_PROMPT = 0, 1, 2
# `story_string_role` (extension_prompt_roles): who the story string speaks as in the chat.
STORY_ROLES = {0: "system", 1: "user", 2: "assistant"}

DEFAULT_STORY_STRING = (
    "{{#if system}}{{system}}\n{{/if}}{{#if wiBefore}}{{wiBefore}}\n{{/if}}"
    "{{#if description}}{{description}}\n{{/if}}"
    "{{#if personality}}{{char}}'s personality: {{personality}}\n{{/if}}"
    "{{#if scenario}}Scenario: {{scenario}}\n{{/if}}{{#if wiAfter}}{{wiAfter}}\n{{/if}}"
    "{{#if persona}}{{persona}}\n{{/if}}"
)


def _text(value: object) -> str:
    return value if isinstance(value, str) else ""


@dataclass(frozen=True)
class Instruct:
    """An instruct template: SillyTavern's field names and defaults."""

    input_sequence: str = ""
    output_sequence: str = ""
    system_sequence: str = ""
    input_suffix: str = ""
    output_suffix: str = ""
    system_suffix: str = ""
    first_input_sequence: str = ""
    last_input_sequence: str = ""
    first_output_sequence: str = ""
    last_output_sequence: str = ""
    last_system_sequence: str = ""
    stop_sequence: str = ""
    system_sequence_prefix: str = ""
    system_sequence_suffix: str = ""
    story_string_prefix: str = ""
    story_string_suffix: str = ""
    user_alignment_message: str = ""
    wrap: bool = True
    macro: bool = True
    names_behavior: str = NAMES_FORCE
    system_same_as_user: bool = False
    skip_examples: bool = False

    @classmethod
    def from_st(cls, data: dict) -> Instruct:
        """Read a SillyTavern instruct template; older files' `names`/`names_force_groups` are understood."""
        values = _st_values(cls, data)
        if values.get("names_behavior", NAMES_NONE) not in (NAMES_NONE, NAMES_FORCE, NAMES_ALWAYS):
            del values["names_behavior"]
        if "names_behavior" not in values and ("names" in data or "names_force_groups" in data):
            if data.get("names"):
                values["names_behavior"] = NAMES_ALWAYS
            elif data.get("names_force_groups"):
                values["names_behavior"] = NAMES_FORCE
            else:
                values["names_behavior"] = NAMES_NONE
        return cls(**values)


@dataclass(frozen=True)
class Context:
    """A context template: SillyTavern's field names and defaults."""

    story_string: str = DEFAULT_STORY_STRING
    example_separator: str = ""
    chat_start: str = ""
    use_stop_strings: bool = False
    names_as_stop_strings: bool = True
    always_force_name2: bool = True
    single_line: bool = False
    story_string_position: int = STORY_IN_PROMPT
    story_string_depth: int = 1
    story_string_role: int = 0

    @classmethod
    def from_st(cls, data: dict) -> Context:
        values = _st_values(cls, data)
        if values.get("story_string_role") not in (None, *STORY_ROLES):
            del values["story_string_role"]
        if "story_string_depth" in values:
            values["story_string_depth"] = max(0, values["story_string_depth"])
        return cls(**values)

    @property
    def story_in_chat(self) -> bool:
        return self.story_string_position == STORY_IN_CHAT


def _number(value: object) -> int | None:
    """A whole number as a SillyTavern file writes it (5, 5.0 or "5"); None for anything else."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    if isinstance(value, str) and re.fullmatch(r"\s*-?\d+\s*", value):
        return int(value)
    return None


def _st_values(cls: type, data: dict) -> dict:
    """The fields of `cls` that a SillyTavern file sets: switches as booleans, numbers as whole
    numbers (one that is not a number keeps the default), the rest as text."""
    values: dict = {}
    for f in fields(cls):
        if f.name not in data:
            continue
        if f.type == "bool":
            values[f.name] = bool(data[f.name])
        elif f.type == "int":
            number = _number(data[f.name])
            if number is not None:
                values[f.name] = number
        else:
            values[f.name] = _text(data[f.name])
    return values


@dataclass(frozen=True)
class StoryFields:
    """What the story string may name; `examples` is the card's example messages as written."""

    char: str
    user: str
    system: str = ""
    description: str = ""
    personality: str = ""
    scenario: str = ""
    persona: str = ""
    wi_before: str = ""
    wi_after: str = ""
    examples: str = ""


@dataclass(frozen=True)
class Turn:
    """One message of the prompt in order. `name` is the speaker of a chat message ("" for
    injected text such as memory or the author's note, which is written as system text)."""

    role: str  # "user" | "assistant" | "system"
    text: str
    name: str = ""
    # Sent into the chat (memory, the author's note, world info at a depth), not a chat message:
    # a story string's depth counts chat messages only.
    injected: bool = False


@dataclass(frozen=True)
class TextPrompt:
    text: str
    stop: list[str] = field(default_factory=list)


# Handlebars, as far as story strings use it: {{#if x}}…{{else}}…{{/if}}, {{#unless x}}…{{/unless}},
# and {{x}} for the story fields. Anything else is left for the macro pass.
_BLOCK = re.compile(r"\{\{\s*(#if|#unless|else|/if|/unless)\s*([\w.]*)\s*\}\}")
STORY_NAMES = (
    "description personality persona scenario system char user wiBefore wiAfter loreBefore loreAfter "
    "mesExamples mesExamplesRaw"
).split()
_VARIABLE = re.compile(r"\{\{\s*(" + "|".join(STORY_NAMES) + r")\s*\}\}")


def _parse(template: str) -> list:
    """Return a tree: strings and (kind, name, then_nodes, else_nodes) tuples."""
    root: list = []
    stack: list[tuple[list, list, str, str, list]] = []  # (parent, then, kind, name, else)
    current = root
    pos = 0
    for match in _BLOCK.finditer(template):
        current.append(template[pos : match.start()])
        pos = match.end()
        tag, name = match.group(1), match.group(2)
        if tag in ("#if", "#unless"):
            then: list = []
            stack.append((current, then, tag, name, []))
            current = then
        elif tag == "else" and stack:
            parent, then, kind, block_name, otherwise = stack[-1]
            current = otherwise
        elif tag in ("/if", "/unless") and stack:
            parent, then, kind, block_name, otherwise = stack.pop()
            parent.append((kind, block_name, then, otherwise))
            current = parent
        else:
            current.append(match.group(0))
    current.append(template[pos:])
    while stack:  # an unclosed block ends with the template
        parent, then, kind, block_name, otherwise = stack.pop()
        parent.append((kind, block_name, then, otherwise))
    return root


def _emit(nodes: list, params: dict[str, str]) -> str:
    out = []
    for node in nodes:
        if isinstance(node, str):
            out.append(_VARIABLE.sub(lambda m: params.get(m.group(1), ""), node))
            continue
        kind, name, then, otherwise = node
        truthy = bool(params.get(name, ""))
        if kind == "#unless":
            truthy = not truthy
        out.append(_emit(then if truthy else otherwise, params))
    return "".join(out)


def render_story_string(
    template: str, params: dict[str, str], substitute: Callable[[str], str], *, instruct: Instruct | None
) -> str:
    """Render the story string as SillyTavern does: blocks and fields, then macros, no leading
    newlines, and a closing newline unless an instruct template without wrap is in use."""
    output = substitute(_emit(_parse(template), params))
    output = re.sub(r"^\n+", "", output)
    if output and not output.endswith("\n") and (instruct is None or instruct.wrap):
        output += "\n"
    return output


def _system_prompt(system: str, instruct: Instruct | None) -> str:
    if instruct is None:
        return system
    separator = "\n" if instruct.wrap else ""
    if instruct.system_sequence_prefix:
        system = instruct.system_sequence_prefix.replace("{{name}}", "System") + separator + system
    if instruct.system_sequence_suffix:
        system = system + separator + instruct.system_sequence_suffix
    return system


_NAME_MACRO = re.compile(r"\{\{name\}\}", re.IGNORECASE)

FIRST, LAST = "first", "last"


class _Renderer:
    def __init__(
        self,
        *,
        instruct: Instruct | None,
        context: Context,
        speaker: str,
        user: str,
        group: bool,
        substitute: Callable[[str], str],
    ) -> None:
        self.instruct, self.context = instruct, context
        self.speaker, self.user, self.group = speaker, user, group
        self.substitute = substitute
        self.separator = "\n" if instruct is not None and instruct.wrap else ""

    def _fill(self, text: str, name: str) -> str:
        if self.instruct is not None and self.instruct.macro:
            text = _NAME_MACRO.sub(lambda _: name or "System", self.substitute(text))
        return text

    def message(self, turn: Turn, force: str | None = None) -> str:
        """One chat message (SillyTavern's formatInstructModeChat / formatMessageHistoryItem)."""
        narrator = turn.role == "system"
        is_user = turn.role == "user"
        name = turn.name or ("" if narrator else (self.user if is_user else self.speaker))
        ins = self.instruct
        if ins is None:
            return f"{name}: {turn.text}\n" if turn.name and not narrator else f"{turn.text}\n"
        include_names = not narrator and ins.names_behavior == NAMES_ALWAYS
        if not narrator and ins.names_behavior == NAMES_FORCE and self.group and name != self.user:
            include_names = True
        if narrator:
            prefix = ins.input_sequence if ins.system_same_as_user else ins.system_sequence
            suffix = ins.input_suffix if ins.system_same_as_user else ins.system_suffix
        elif is_user:
            prefix = {
                FIRST: ins.first_input_sequence,
                LAST: ins.last_input_sequence,
            }.get(force or "", "") or ins.input_sequence
            suffix = ins.input_suffix
        else:
            prefix = {
                FIRST: ins.first_output_sequence,
                LAST: ins.last_output_sequence,
            }.get(force or "", "") or ins.output_sequence
            suffix = ins.output_suffix
        prefix, suffix = self._fill(prefix, name), self._fill(suffix, name)
        if not suffix and ins.wrap:
            suffix = "\n"
        body = f"{name}: {turn.text}{suffix}" if include_names and name else turn.text + suffix
        return self.separator.join(part for part in (prefix, body) if part)

    def reply_line(self, *, impersonate: bool, quiet: bool = False) -> str:
        """What opens the reply (SillyTavern's formatInstructModePrompt, or "Name:" without instruct).

        `quiet`: a neutral prompt (a task, not the chat): the last system sequence if the template
        has one, else the output sequence, and no name."""
        ins = self.instruct
        name = self.user if impersonate else self.speaker
        if ins is None:
            return f"\n{name}:" if impersonate or self.context.always_force_name2 else ""
        include_names = (
            bool(name)
            and not quiet
            and (ins.names_behavior == NAMES_ALWAYS or (self.group and ins.names_behavior == NAMES_FORCE))
        )
        if impersonate:
            sequence = ins.input_sequence
        elif quiet:
            sequence = ins.last_system_sequence or ins.output_sequence
        else:
            sequence = ins.last_output_sequence or ins.output_sequence
        filler = ""
        # Mistral-style templates: the normal output sequence ends with a space the last one lacks.
        if (
            include_names
            and ins.last_output_sequence
            and ins.output_sequence
            and sequence == ins.last_output_sequence
            and ins.output_sequence[-1:].isspace()
            and not ins.last_output_sequence[-1:].isspace()
        ):
            filler = ins.output_sequence[-1]
        sequence = self._fill(sequence, name)
        sep = self.separator
        text = sep + sequence + sep + filler + f"{name}:" if include_names else sep + sequence
        return (text.rstrip() if ins.wrap else text) + ("" if include_names else sep)

    def examples(self, raw: str) -> tuple[list[str], list[str]]:
        """Return (examples as sent, examples before instruct formatting), one string per block."""
        text = self.substitute(raw).replace("\r", "")
        if not text.strip() or text.strip() == "<START>":
            return [], []
        if not re.match(r"<START>", text, re.IGNORECASE):
            text = "<START>\n" + text.strip()
        separator = self.substitute(self.context.example_separator)
        heading = f"{separator}\n" if separator else ("<START>\n" if self.instruct is not None else "")
        blocks = [f"{heading}{block.strip()}\n" for block in re.split(r"<START>", text, flags=re.I)[1:]]
        if self.instruct is None:
            return blocks, blocks
        return self._instruct_examples(blocks), blocks

    def _instruct_examples(self, blocks: list[str]) -> list[str]:
        ins = self.instruct
        separator_text = self.substitute(self.context.example_separator)
        heading = f"{separator_text}\n" if separator_text else ""
        if ins.skip_examples:
            return [re.sub(r"<START>\n", lambda _: heading, b, count=1, flags=re.I) for b in blocks]
        include_names = ins.names_behavior == NAMES_ALWAYS or (
            self.group and ins.names_behavior == NAMES_FORCE
        )
        prefixes = {"user": ins.input_sequence, "char": ins.output_sequence}
        suffixes = {"user": ins.input_suffix, "char": ins.output_suffix}
        if ins.macro:
            names = {"user": self.user, "char": self.speaker}
            prefixes = {k: self._fill(v, names[k]) for k, v in prefixes.items()}
            suffixes = {k: self._fill(v, names[k]) for k, v in suffixes.items()}
            suffixes = {k: v or ("\n" if ins.wrap else "") for k, v in suffixes.items()}
        out: list[str] = []
        for block in blocks:
            cleaned = re.sub(r"<START>", "{Example Dialogue:}", block, count=1, flags=re.I)
            lines = _split_examples(cleaned, self.user, self.speaker)
            if not lines:
                continue
            if heading:
                out.append(heading)
            for who, content in lines:
                name = self.user if who == "user" else self.speaker
                with_name = include_names or (ins.names_behavior == NAMES_FORCE and who == "user")
                body = f"{name}: {content}" if with_name else content
                out.append(self.separator.join(p for p in (prefixes[who], body + suffixes[who]) if p))
        if not out:
            return [re.sub(r"<START>\n", lambda _: heading, b, count=1, flags=re.I) for b in blocks]
        return out


def _split_examples(block: str, user: str, char: str) -> list[tuple[str, str]]:
    """Split one example block into (who, text) messages by their "Name:" lines; the first line
    is the block's heading (SillyTavern's parseExampleIntoIndividual)."""
    result: list[tuple[str, str]] = []
    lines: list[str] = []
    who = ""

    def close() -> None:
        name = user if who == "user" else char
        result.append((who, "\n".join(lines).replace(name + ":", "", 1).strip()))
        lines.clear()

    for line in block.split("\n")[1:]:
        if line.startswith(user + ":"):
            if who == "char":
                close()
            who = "user"
        elif line.startswith(char + ":"):
            if who == "user":
                close()
            who = "char"
        lines.append(line)
    if who:
        close()
    return result


def stop_strings(
    *,
    instruct: Instruct | None,
    context: Context,
    speaker: str,
    user: str,
    others: Sequence[str] = (),
    impersonate: bool = False,
    continue_after_user: bool = False,
    custom: Sequence[str] = (),
    substitute: Callable[[str], str] = lambda text: text,
) -> list[str]:
    """Return the stop strings SillyTavern sends for this prompt (getStoppingStrings), unique, in order."""
    result: list[str] = []
    if context.names_as_stop_strings:
        char_line, user_line = f"\n{speaker}:", f"\n{user}:"
        result.append(char_line if impersonate else user_line)
        result.append(user_line)
        if continue_after_user:
            result.append(char_line)
        result.extend(f"\n{name}:" for name in others if name and name != speaker)
    if instruct is not None:
        combined = "\n".join(
            [
                instruct.stop_sequence,
                _NAME_MACRO.sub(lambda _: user, instruct.input_sequence),
                _NAME_MACRO.sub(lambda _: speaker, instruct.output_sequence),
                _NAME_MACRO.sub(lambda _: speaker, instruct.first_output_sequence),
                _NAME_MACRO.sub(lambda _: speaker, instruct.last_output_sequence),
                _NAME_MACRO.sub(lambda _: "System", instruct.system_sequence),
                _NAME_MACRO.sub(lambda _: "System", instruct.last_system_sequence),
            ]
        )
        for line in dict.fromkeys(combined.split("\n")):
            if line.strip():
                wrapped = "\n" + line if instruct.wrap else line
                result.append(substitute(wrapped) if instruct.macro else wrapped)
    if context.use_stop_strings:
        if context.chat_start:
            result.append("\n" + substitute(context.chat_start))
        if context.example_separator:
            result.append("\n" + substitute(context.example_separator))
    result.extend(s for s in custom if s)
    if context.single_line:
        result.insert(0, "\n")
    return list(dict.fromkeys(result))


def render(
    *,
    instruct: Instruct | None,
    context: Context,
    story: StoryFields,
    turns: Sequence[Turn],
    substitute: Callable[[str], str],
    mode: str = "normal",
    group: bool = False,
    chat_begins: bool = True,
    others: Sequence[str] = (),
    custom_stop: Sequence[str] = (),
) -> TextPrompt:
    """Return the whole text prompt and its stop strings.

    `instruct` None writes "Name: text" lines (SillyTavern with instruct mode off). `turns` are the
    prompt's messages after the story string, in order. `mode` "continue" leaves the last message
    open for the model to go on; "impersonate" opens a line for {{user}}. `chat_begins`: the first
    turn is the chat's first message (it takes the first input/output sequence). `others`: the
    other characters in a group, whose "Name:" lines stop the reply.
    """
    r = _Renderer(
        instruct=instruct,
        context=context,
        speaker=story.char,
        user=story.user,
        group=group,
        substitute=substitute,
    )
    examples, raw_examples = r.examples(story.examples)
    system = _system_prompt(substitute(story.system), instruct) if story.system else ""
    params = {
        "description": story.description,
        "personality": story.personality,
        "persona": story.persona,
        "scenario": story.scenario,
        "system": system,
        "char": story.char,
        "user": story.user,
        "wiBefore": story.wi_before,
        "wiAfter": story.wi_after,
        "loreBefore": story.wi_before,
        "loreAfter": story.wi_after,
        "mesExamples": "".join(examples),
        "mesExamplesRaw": "".join(raw_examples),
    }
    story_text = render_story_string(context.story_string, params, substitute, instruct=instruct)
    if instruct is not None and story_text and not context.story_in_chat:
        story_text = _wrap_story(story_text, instruct, substitute)
    # A story string that places the examples itself gets them once.
    if re.search(r"\{\{\s*mesExamples(Raw)?\s*\}\}", context.story_string):
        examples = []

    turns = [t for t in turns if t.text.strip() or t.role != "system"]
    if context.story_in_chat:
        turns = _story_in_chat(turns, story_text, context, story, continuing=mode == "continue")
        story_text = ""
    last_user = max((i for i, t in enumerate(turns) if t.role == "user"), default=-1)
    lines: list[str] = []
    for index, turn in enumerate(turns):
        force = None
        if instruct is not None:
            if index == 0 and chat_begins:
                force = FIRST
            if index == last_user:
                force = LAST
            if mode == "continue" and index == len(turns) - 1:
                force = LAST
        line = r.message(turn, force)
        if mode == "continue" and index == len(turns) - 1:
            cut = line.rfind(turn.text)
            line = line[: cut + len(turn.text)] if cut >= 0 else line
        lines.append(line)
    if instruct is not None and instruct.user_alignment_message and (not turns or turns[0].role != "user"):
        alignment = Turn(role="user", text=instruct.user_alignment_message, name=story.user)
        lines.insert(0, r.message(alignment, FIRST))
    if lines and mode != "continue" and (instruct is None or instruct.wrap):
        lines[-1] = re.sub(r"\n?$", "", lines[-1], count=1)
    if mode != "continue":
        lines.append(_reply_suffix(r, lines, impersonate=mode == "impersonate"))
    chat = "".join(lines)
    if context.chat_start:
        chat = substitute(context.chat_start + "\n") + chat
    continue_after_user = mode == "continue" and bool(turns) and turns[-1].role == "user"
    stop = stop_strings(
        instruct=instruct,
        context=context,
        speaker=story.char,
        user=story.user,
        others=others,
        impersonate=mode == "impersonate",
        continue_after_user=continue_after_user,
        custom=custom_stop,
        substitute=substitute,
    )
    return TextPrompt(text=(story_text + "".join(examples) + chat).replace("\r", ""), stop=stop)


def _wrap_story(text: str, ins: Instruct, substitute: Callable[[str], str]) -> str:
    """The instruct template's story string prefix and suffix around the story string at the top
    of the prompt (SillyTavern's formatInstructModeStoryString; in the chat, the message's own
    sequences wrap it instead)."""
    if ins.story_string_prefix:
        prefix = _NAME_MACRO.sub(lambda _: "System", substitute(ins.story_string_prefix))
        text = prefix + ("\n" if ins.wrap else "") + text
    if ins.story_string_suffix:
        text += substitute(ins.story_string_suffix)
    return text


def _story_in_chat(
    turns: list[Turn], story_text: str, context: Context, story: StoryFields, *, continuing: bool
) -> list[Turn]:
    """Send the story string into the chat, `story_string_depth` chat messages from the end, as
    SillyTavern's in-chat injection does: trimmed, as a message of `story_string_role` (the
    user's or the character's, named, or system text), after whatever else is sent at that depth.
    Depth 0 is after the newest message (1 when continuing, so the continued message stays last);
    deeper than the chat, it is before the first message."""
    text = story_text.strip()
    if not text:
        return turns
    role = STORY_ROLES.get(context.story_string_role, "system")
    name = {"user": story.user, "assistant": story.char}.get(role, "")
    message = Turn(role=role, text=text, name=name, injected=True)
    depth = context.story_string_depth
    if continuing and depth == 0:
        depth = 1
    chat = [index for index, turn in enumerate(turns) if not turn.injected]
    at = len(turns) if depth == 0 or not chat else chat[max(0, len(chat) - depth)]
    return [*turns[:at], message, *turns[at:]]


def render_messages(instruct: Instruct | None, messages: Sequence[dict]) -> TextPrompt:
    """Write chat-completion messages that set a task (not a chat) as one text-completion prompt.

    With an instruct template: a system message takes the system prefix and suffix when the
    template has those and no system sequence (as SillyTavern writes a system prompt), else the
    system sequence (the input sequence when the template writes system text as the user's); a
    user message the input sequence (the last one
    the last input sequence), an assistant message the output sequence, none of them named; then
    the line that opens the reply as SillyTavern opens a neutral prompt (the last system sequence,
    else the output sequence). The stop strings are the template's sequences and stop sequence.
    Without one, each message's text is a line of its own.
    """
    texts = [(m.get("role"), _text(m.get("content"))) for m in messages]
    if instruct is None:
        return TextPrompt(text="".join(f"{text}\n" for _, text in texts))
    ins = replace(instruct, names_behavior=NAMES_NONE)
    r = _Renderer(
        instruct=ins, context=Context(), speaker="Assistant", user="User", group=False, substitute=str
    )
    turns = [
        Turn(role=role if role in ("user", "assistant") else "system", text=text) for role, text in texts
    ]
    last_user = max((i for i, t in enumerate(turns) if t.role == "user"), default=-1)
    wrap_system = not ins.system_sequence and bool(ins.system_sequence_prefix or ins.system_sequence_suffix)
    lines = []
    for index, turn in enumerate(turns):
        if turn.role == "system" and wrap_system:
            lines.append(_system_prompt(turn.text, ins) + r.separator)
        else:
            lines.append(r.message(turn, LAST if index == last_user else None))
    if lines and ins.wrap:
        lines[-1] = re.sub(r"\n?$", "", lines[-1], count=1)
    lines.append(r.reply_line(impersonate=False, quiet=True))
    stop = stop_strings(
        instruct=ins, context=Context(names_as_stop_strings=False), speaker="Assistant", user="User"
    )
    return TextPrompt(text="".join(lines).replace("\r", ""), stop=stop)


def _reply_suffix(r: _Renderer, lines: list[str], *, impersonate: bool) -> str:
    line = r.reply_line(impersonate=impersonate)
    if r.instruct is None and lines and line.startswith("\n") and lines[-1].endswith("\n"):
        return line[1:]
    return line
