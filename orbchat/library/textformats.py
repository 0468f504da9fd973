"""Which instruct template, context template and system prompt a text-completion connection writes with.

A connection names each as "bundled:<name>" (the templates OrbChat ships,
`orbchat.prompting.formats`), "mine:<id>" (one its owner imported), "auto" (instruct and context
only: chosen by the model's name when the prompt is built) or "" (none).

"Automatic" works as SillyTavern's auto-select: the instruct template is the first whose
`activation_regex` matches the connection's model name, the owner's imported templates (by name)
before the bundled ones (in `formats.INSTRUCT`'s order); none matching, ChatML. The context
template is the one with the same name as the instruct template in use (SillyTavern's "bind to
context"), imported before bundled; none by that name, the bundled one that goes with it.
"""

from __future__ import annotations

from dataclasses import dataclass

from orbchat.connections import providers
from orbchat.connections.models import Connection
from orbchat.library.models import ContextTemplate, InstructTemplate, SystemPrompt
from orbchat.prompting import autoselect, formats, instruct
from orbchat.prompting.textmode import TextFormat

BUNDLED, MINE, AUTO = "bundled:", "mine:", "auto"
KINDS = {"instruct": InstructTemplate, "context": ContextTemplate, "system": SystemPrompt}
BUNDLED_DATA = {"instruct": formats.INSTRUCT, "context": formats.CONTEXT, "system": {}}
AUTO_LABEL = "Automatic (by model name)"


def choices(*, owner, kind: str) -> list[tuple[str, str]]:
    """Return the (value, label) pairs a person can pick for `kind` ("instruct", "context", "system")."""
    none_label = {
        "instruct": "None (plain “Name: text” lines)",
        "context": "Default story string",
        "system": "The preset's main prompt",
    }[kind]
    options = [(AUTO, AUTO_LABEL)] if kind in ("instruct", "context") else []
    options += [("", none_label)]
    options += [(BUNDLED + name, f"{name} (bundled)") for name in BUNDLED_DATA[kind]]
    mine = KINDS[kind].objects.filter(owner=owner).only("pk", "name")
    options += [(f"{MINE}{t.pk}", f"{t.name} (imported)") for t in mine]
    return options


def template_data(*, owner_id: int, kind: str, value: str) -> dict | None:
    """Return the SillyTavern fields `value` names; None when it names nothing of the owner's."""
    if value.startswith(BUNDLED):
        return BUNDLED_DATA[kind].get(value.removeprefix(BUNDLED))
    if value.startswith(MINE) and value.removeprefix(MINE).isdigit():
        found = KINDS[kind].objects.filter(owner_id=owner_id, pk=int(value.removeprefix(MINE))).first()
        return dict(found.data) if found is not None else None
    return None


@dataclass(frozen=True)
class Chosen:
    """One template as the prompt uses it: its fields (None: no template), name and how it was chosen."""

    data: dict | None
    name: str = ""
    label: str = ""


def _label(name: str, bundled: bool) -> str:
    return f"{name} ({'bundled' if bundled else 'imported'})"


def model_name(connection: Connection) -> str:
    """The model's name as the person typed it, without the provider's route prefix."""
    prefix = providers.PROVIDERS.get(connection.provider, ("", "", False))[0]
    return connection.model.removeprefix(prefix) if prefix else connection.model


def _named(*, owner_id: int, kind: str, value: str) -> Chosen:
    """The template the connection names itself (not automatic)."""
    if value.startswith(BUNDLED):
        name = value.removeprefix(BUNDLED)
        data = BUNDLED_DATA[kind].get(name)
        return Chosen(data, name, _label(name, True)) if data is not None else Chosen(None)
    if value.startswith(MINE) and value.removeprefix(MINE).isdigit():
        found = KINDS[kind].objects.filter(owner_id=owner_id, pk=int(value.removeprefix(MINE))).first()
        if found is not None:
            return Chosen(dict(found.data), found.name, _label(found.name, False))
    return Chosen(None)


def _auto_instruct(*, owner_id: int, model: str) -> Chosen:
    mine = list(InstructTemplate.objects.filter(owner_id=owner_id).order_by("name", "pk"))
    candidates = [
        (f"{MINE}{t.pk}", t.data.get("activation_regex") if isinstance(t.data, dict) else None) for t in mine
    ]
    candidates += [(BUNDLED + name, data.get("activation_regex")) for name, data in formats.INSTRUCT.items()]
    key = autoselect.first_match(candidates, model)
    if key is None:
        name = formats.DEFAULT_INSTRUCT
        how = f"{AUTO_LABEL}: no template's activation regex matches “{model}”, so the default"
        return Chosen(formats.INSTRUCT[name], name, f"{_label(name, True)} — {how}")
    if key.startswith(MINE):
        found = next(t for t in mine if f"{MINE}{t.pk}" == key)
        name, data, bundled = found.name, dict(found.data), False
    else:
        name = key.removeprefix(BUNDLED)
        data, bundled = formats.INSTRUCT[name], True
    return Chosen(
        data, name, f"{_label(name, bundled)} — {AUTO_LABEL}: its activation regex matches “{model}”"
    )


def _auto_context(*, owner_id: int, instruct_name: str) -> Chosen:
    mine = ContextTemplate.objects.filter(owner_id=owner_id, name=instruct_name).order_by("pk").first()
    if mine is not None and instruct_name:
        how = f"{AUTO_LABEL}: the same name as the instruct template"
        return Chosen(dict(mine.data), mine.name, f"{_label(mine.name, False)} — {how}")
    name = formats.context_for(instruct_name) if instruct_name else "Default"
    how = (
        "the same name as the instruct template"
        if name == instruct_name
        else "no context template has the instruct template's name, so the default"
    )
    return Chosen(formats.CONTEXT[name], name, f"{_label(name, True)} — {AUTO_LABEL}: {how}")


def text_format_for(connection: Connection) -> TextFormat | None:
    """Return how the connection writes its prompt text; None for a chat-completion connection.

    Automatic choices are resolved here, each time a prompt is built, from the connection's
    model name and the owner's templates as they are now."""
    if not connection.is_text_completion:
        return None
    owner = connection.owner_id
    if connection.instruct_template == AUTO:
        ins = _auto_instruct(owner_id=owner, model=model_name(connection))
    else:
        ins = _named(owner_id=owner, kind="instruct", value=connection.instruct_template)
    if connection.context_template == AUTO:
        ctx = _auto_context(owner_id=owner, instruct_name=ins.name)
    else:
        ctx = _named(owner_id=owner, kind="context", value=connection.context_template)
    system = template_data(owner_id=owner, kind="system", value=connection.system_prompt)
    context_data = ctx.data or {}
    return TextFormat(
        instruct=instruct.Instruct.from_st(ins.data) if ins.data is not None else None,
        context=instruct.Context.from_st(context_data),
        system_prompt=str(system.get("content") or "") if system is not None else None,
        allow_post_history=bool(context_data.get("allow_jailbreak")),
        instruct_label=ins.label or "None (plain “Name: text” lines)",
        context_label=ctx.label or "Default story string",
    )
