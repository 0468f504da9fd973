"""Which instruct template, context template and system prompt a text-completion connection writes with.

A connection names each as "bundled:<name>" (the templates OrbChat ships,
`orbchat.prompting.formats`) or "mine:<id>" (one its owner imported); "" means none.
"""

from __future__ import annotations

from orbchat.connections.models import Connection
from orbchat.library.models import ContextTemplate, InstructTemplate, SystemPrompt
from orbchat.prompting import formats, instruct
from orbchat.prompting.textmode import TextFormat

BUNDLED, MINE = "bundled:", "mine:"
KINDS = {"instruct": InstructTemplate, "context": ContextTemplate, "system": SystemPrompt}
BUNDLED_DATA = {"instruct": formats.INSTRUCT, "context": formats.CONTEXT, "system": {}}


def choices(*, owner, kind: str) -> list[tuple[str, str]]:
    """Return the (value, label) pairs a person can pick for `kind` ("instruct", "context", "system")."""
    none_label = {
        "instruct": "None (plain “Name: text” lines)",
        "context": "Default story string",
        "system": "The preset's main prompt",
    }[kind]
    options = [("", none_label)]
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


def text_format_for(connection: Connection) -> TextFormat | None:
    """Return how the connection writes its prompt text; None for a chat-completion connection."""
    if not connection.is_text_completion:
        return None
    owner = connection.owner_id
    ins = template_data(owner_id=owner, kind="instruct", value=connection.instruct_template)
    ctx = template_data(owner_id=owner, kind="context", value=connection.context_template) or {}
    system = template_data(owner_id=owner, kind="system", value=connection.system_prompt)
    return TextFormat(
        instruct=instruct.Instruct.from_st(ins) if ins is not None else None,
        context=instruct.Context.from_st(ctx),
        system_prompt=str(system.get("content") or "") if system is not None else None,
        allow_post_history=bool(ctx.get("allow_jailbreak")),
    )
