"""Gather what a turn's prompt needs from the database and hand it to the pure assembler.

Reads only a bounded tail of the history (pages from the newest back until the context budget
is full), so a turn's cost does not grow with the length of the chat.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass, field, replace

from django.db.models import F, Q

from orbchat.accounts.models import User
from orbchat.connections import gateway
from orbchat.connections.models import Connection, ModelRoles
from orbchat.connections.selectors import model_roles_get
from orbchat.library.models import Persona, Preset, WorldBook, default_memory_template
from orbchat.library.presets import DEFAULT_SAMPLERS, default_sections
from orbchat.library.selectors import persona_default
from orbchat.library.textformats import text_format_for
from orbchat.library.worldtest import book_for_activation
from orbchat.prompting import assemble, macros, textmode, worldinfo
from rooms import memory_port, textturn, tokens
from rooms.models import Member, Message, Room, Seat, Variant
from rooms.options import room_options
from rooms.services import (
    NARRATOR,
    Writer,
    chat_variables,
    room_persona,
    seated,
    user_persona,
    user_writer,
)

DEFAULT_CONTEXT = 8192
HISTORY_PAGE = 200
WORLD_INFO_SHARE = 0.25  # the one world-info budget, shared by every book: this share of the context


class NoChatModel(Exception):
    """The host has not connected a Chat model."""


@dataclass(frozen=True)
class TurnContext:
    """What a turn is planned from, read once at its start: the room with its host, the host's
    Chat model, the preset and the room's persona (one query), and the persona the host writes as.

    A turn reads it once and hands it down; the next turn reads it again, so an edit to the card,
    persona, preset or model between turns is always seen.
    """

    room: Room
    persona: Persona | None
    # Who writes when it is not the host (a member's draft): the account a persona-less writer is
    # named after. None: the host.
    account: User | None = None

    @classmethod
    def read(cls, room_id: int) -> TurnContext:
        room = Room.objects.select_related("host__model_roles__chat", "preset", "persona").get(pk=room_id)
        return cls.of(room)

    @classmethod
    def of(cls, room: Room) -> TurnContext:
        """The context of a room already read (the host's persona is read here)."""
        return cls(room=room, persona=room_persona(room))

    def writer(self, user) -> Writer:
        """Who `user` writes as in this room: the host as the persona read here, a member as theirs."""
        if user.pk == self.room.host_id:
            return Writer.of(user, self.persona)
        return user_writer(self.room, user)

    def as_writer(self, user) -> TurnContext:
        """This context with `user`'s persona as {{user}}: for a draft written in their voice."""
        if user.pk == self.room.host_id:
            return self
        return replace(self, persona=user_persona(self.room, user), account=user)

    @property
    def user_name(self) -> str:
        """{{user}}: the writer's persona's name, or else their account's name."""
        return Writer.of(self.account or self.room.host, self.persona).name


@dataclass
class TurnPlan:
    """Everything a generation needs, decided before the first byte goes to the provider."""

    connection: Connection
    target: gateway.Target
    params: dict
    prompt: assemble.Prompt
    world_info: list[dict] = field(default_factory=list)
    world_info_state: dict = field(default_factory=dict)
    recall: memory_port.Outcome | None = None  # None: no recall for this kind of turn (impersonate)
    host_id: int | None = None
    speaker: str = ""  # the reply's speaker name (the Narrator's in Narrator mode)
    text_prompt: str | None = None  # a text-completion connection's prompt (None: chat messages)
    # Which instruct and context templates wrote it, and how they were chosen (text completion only).
    text_templates: dict | None = None
    # The chat's and the host's variables as the prompt's macros left them (kept when the turn runs).
    variables: dict | None = None
    global_variables: dict | None = None

    def preview(self) -> dict:
        """Return the JSON the host's Preview shows."""
        recall = self.recall.preview() if self.recall else {"recalled": [], "memory_cut": []}
        return {
            **recall,
            "messages": self.prompt.messages,
            "sections": [vars(s) for s in self.prompt.sections],
            "history_kept": self.prompt.history_kept,
            "history_dropped": self.prompt.history_dropped,
            "total_tokens": self.prompt.total_tokens,
            "budget": self.prompt.budget,
            "free": max(0, self.prompt.budget - self.prompt.total_tokens),
            "world_info": self.world_info,
            "params": self.params,
            "text_prompt": self.text_prompt,
            "text_templates": self.text_templates,
        }


def _history_tail(
    room: Room, *, budget: int, exclude_message_id: int | None
) -> list[assemble.HistoryMessage]:
    """Return the newest messages whose stored token counts fill the budget, oldest first.

    Reads newest first, a window of message numbers at a time (at most HISTORY_PAGE rows a
    query), so the cost follows the budget and not the length of the chat. The window keeps each
    query a short range of the (room, seq) index whatever the database's statistics say: a
    LIMIT over the whole room let PostgreSQL, with statistics older than a bulk import, sort all
    of a 100,000-message room for every turn. A window that comes back sparse (hidden or deleted
    messages) makes the next one wider.
    """
    shown = [Variant.State.DONE, Variant.State.STOPPED, Variant.State.STREAMING]
    # One join per window: each message with its active variant.
    messages = Message.objects.filter(
        room=room, hidden=False, variants__index=F("active_index"), variants__state__in=shown
    )
    if exclude_message_id is not None:
        messages = messages.exclude(pk=exclude_message_id)
    rows: list[assemble.HistoryMessage] = []
    used = 0
    # How many rows to read: whole pages of HISTORY_PAGE up to the one in which the budget fills.
    # World info scans further back than the prompt keeps (a book's scan depth), as it always has.
    want: int | None = 0 if budget < 0 else None
    width = HISTORY_PAGE
    top: int | None = None  # the first window is open above: a message saved since `room` was read counts
    low = room.next_seq - width
    while want is None or len(rows) < want:
        window = messages.filter(seq__gte=low) if top is None else messages.filter(seq__gte=low, seq__lt=top)
        page = list(
            window.order_by("-seq").values_list(
                "seq", "kind", "speaker_name", "variants__text", "variants__tokens"
            )[:HISTORY_PAGE]
        )
        for seq, kind, name, text, count in page:
            role = "user" if kind == Message.Kind.HUMAN else "assistant"
            rows.append(
                assemble.HistoryMessage(seq=seq, role=role, name=name, text=text, tokens=count or None)
            )
            used += count or 0
            if want is None and used > budget:
                want = -(-len(rows) // HISTORY_PAGE) * HISTORY_PAGE
        if len(page) == HISTORY_PAGE:
            top, width = page[-1][0], HISTORY_PAGE  # the window holds more: go on below the oldest read
        elif low <= 0:
            break  # the start of the chat
        else:
            top = low
            if len(page) < HISTORY_PAGE // 2:
                width *= 4
        low = top - width
    if want is not None:
        del rows[want:]
    rows.reverse()
    return rows


def _books(room: Room, seats: list[Seat], persona) -> list[worldinfo.Book]:
    """Return the books in play, each with its kind: the chat's and the persona's (always first,
    as SillyTavern puts chat and persona lore first), the cards' and the host's global ones."""
    characters = [s.character_id for s in seats if s.character_id is not None]
    match = Q(rooms=room) | Q(owner=room.host_id, is_global=True) | Q(characters__in=characters)
    if persona is not None:
        match |= Q(personas=persona)
    # Only the host's own books: a book that came with another person's card stays theirs.
    found = WorldBook.objects.filter(match, owner=room.host_id)
    ids = set(found.values_list("pk", flat=True))
    if not ids:
        return []
    first = Q(rooms=room) if persona is None else Q(rooms=room) | Q(personas=persona)
    chat = set(found.filter(first).values_list("pk", flat=True))
    cards = set(found.filter(characters__in=characters).values_list("pk", flat=True)) if characters else set()
    books = []
    for book in WorldBook.objects.filter(pk__in=ids).prefetch_related("entries").order_by("pk"):
        if book.pk in chat:
            kind = worldinfo.BookKind.CHAT
        elif book.pk in cards:
            kind = worldinfo.BookKind.CHARACTER
        else:
            kind = worldinfo.BookKind.GLOBAL
        books.append(replace(book_for_activation(book), kind=kind))
    return books


def _card(seat: Seat, host_id: int) -> assemble.CardInfo:
    """Return the seat's card as the prompt uses it.

    A card belongs to whoever made it: in a room handed to another host, the previous host's
    characters keep their seats but speak from their name alone, their private fields unread.
    """
    c = seat.character
    if c is None or c.owner_id != host_id:
        return assemble.CardInfo(name=seat.name)
    return assemble.CardInfo(
        name=c.name,
        description=c.description,
        personality=c.personality,
        scenario=c.scenario,
        mes_example=c.mes_example,
        system_prompt=c.system_prompt,
        post_history_instructions=c.post_history_instructions,
        nickname=c.nickname,
    )


def world_info_budget(books: list[worldinfo.Book], context_size: int) -> int:
    """The one world-info budget of a turn: 0 (the largest book budget) when a book sets its own."""
    if any(book.token_budget > 0 for book in books):
        return 0
    return int(context_size * WORLD_INFO_SHARE)


def depth_prompts(*, speaker: Seat | None, seats: list[Seat], host_id: int) -> list[assemble.DepthPrompt]:
    """Return the Character's Notes of a turn, as SillyTavern picks them.

    Alone, the speaker's; with several characters, every seated card's but those of muted seats
    (the speaker's always), each with {{char}} its own character. Only the host's own cards count.
    """
    if len(seats) > 1 or speaker is None:
        chosen = [s for s in seats if not s.muted or (speaker is not None and s.pk == speaker.pk)]
    else:
        chosen = [speaker]
    notes = []
    for seat in chosen:
        c = seat.character
        note = c.depth_prompt if c is not None and c.owner_id == host_id else None
        if note is not None:
            text, depth, role = note
            notes.append(assemble.DepthPrompt(text=text, char=c.macro_name, depth=depth, role=role))
    return notes


def group_nudge(*, speaker: Seat | None, seats: list[Seat], own_cards: bool) -> str:
    """Say who writes the reply when several characters share the room ('' for a solo chat)."""
    if speaker is None:
        names = ", ".join(s.name for s in seats)
        return (
            f"[Write the next part of the scene as the narrator, voicing {names} as the story needs. "
            "Do not write {{user}}'s lines.]"
        )
    others = [s.name for s in seats if s.pk != speaker.pk]
    if not others:
        return ""
    if own_cards:
        return f"[Write the next reply only as {{{{char}}}}. Also in the scene: {', '.join(others)}.]"
    return "[Write the next reply only as {{char}}.]"


def plan_turn(
    *,
    turn: TurnContext,
    seat: Seat | None,
    mode: str = "normal",
    exclude_message_id: int | None = None,
    seats: list[Seat] | None = None,
    on_recalling: Callable[[], None] | None = None,
) -> TurnPlan:
    """Decide the prompt and parameters of one turn, as the room's host.

    `seat` None is the Narrator (Narrator reply mode): every card is in the prompt.
    `on_recalling` is called just before memory recall runs, when there is memory to read (the
    room's icon says so).
    """
    room = turn.room
    connection = chat_connection(room)
    if connection is None:
        raise NoChatModel("No Chat model is connected. The host can connect one in Settings → Models.")
    prompt_input, samplers, activation = prompt_input_for(
        turn=turn,
        seat=seat,
        connection=connection,
        mode=mode,
        exclude_message_id=exclude_message_id,
        seats=seats,
    )
    text_format = text_format_for(connection)
    original_input = prompt_input
    if text_format is not None:
        prompt_input = textmode.prepare(prompt_input, text_format)
    prompt = assemble.assemble(prompt_input)
    outcome = None
    if mode != "impersonate":
        prompt, outcome = memory_port.with_memory(
            room=room, seat=seat, prompt_input=prompt_input, prompt=prompt, on_recalling=on_recalling
        )
    max_tokens = prompt_input.max_tokens
    params = {
        "temperature": samplers["temperature"],
        "top_p": samplers["top_p"],
        "max_tokens": max_tokens,
        "frequency_penalty": samplers["frequency_penalty"],
        "presence_penalty": samplers["presence_penalty"],
    }
    if samplers["stop"]:
        params["stop"] = samplers["stop"]
    if samplers["seed"] is not None:
        params["seed"] = samplers["seed"]
    text_prompt = None
    if text_format is not None:
        text_prompt, params = textturn.text_request(
            original=original_input,
            prepared=prompt_input,
            prompt=prompt,
            fmt=text_format,
            samplers=samplers,
            connection=connection,
        )
    world_info = [
        {"book": a.book_id, "entry": a.entry.comment or ", ".join(a.entry.keys), "reason": a.reason}
        for a in activation.activated
    ]
    return TurnPlan(
        connection=connection,
        target=gateway.target_for(connection, owner=room.host),
        params=params,
        prompt=prompt,
        world_info=world_info,
        world_info_state=activation.state.to_json(),
        recall=outcome,
        host_id=room.host_id,
        speaker=seat.name if seat else NARRATOR,
        text_prompt=text_prompt,
        text_templates=(
            {"instruct": text_format.instruct_label, "context": text_format.context_label}
            if text_format is not None
            else None
        ),
        variables=original_input.macro_context.variables if original_input.macro_context else None,
        global_variables=(
            original_input.macro_context.global_variables if original_input.macro_context else None
        ),
    )


def host_roles(room: Room) -> ModelRoles:
    """Return the host's model roles (read with the room by `TurnContext.read`)."""
    try:
        return room.host.model_roles
    except ModelRoles.DoesNotExist:
        return model_roles_get(user=room.host)


def chat_connection(room: Room) -> Connection | None:
    """Return the host's Chat model connection."""
    return host_roles(room).chat


def other_people(turn: TurnContext, *, user_name: str) -> list[assemble.PersonInfo]:
    """Return the people in a shared room besides the one `turn` writes as: the host as the
    room's persona and every active member as theirs (their default when they chose none), in
    the order they joined. A room without members has none, so a solo prompt is unchanged."""
    room = turn.room
    members = list(
        Member.objects.filter(room=room, state=Member.State.ACTIVE).select_related("persona", "user")
    )
    if not members:
        return []
    writer = turn.persona
    people: list[assemble.PersonInfo] = []
    everyone = [(room_persona(room), room.host)]
    everyone += [(m.persona or persona_default(user=m.user), m.user) for m in members]
    for persona, account in everyone:
        name = Writer.of(account, persona).name
        if (writer is not None and persona is not None and persona.pk == writer.pk) or name == user_name:
            continue
        people.append(assemble.PersonInfo(name=name, description=persona.description if persona else ""))
    return people


def prompt_input_for(
    *,
    turn: TurnContext,
    seat: Seat | None,
    connection: Connection | None,
    mode: str = "normal",
    exclude_message_id: int | None = None,
    seats: list[Seat] | None = None,
    draft: str | None = None,
) -> tuple[assemble.PromptInput, dict, worldinfo.Result]:
    """Read what the prompt needs; `draft` is a hypothetical next message from the host (dry runs)."""
    room = turn.room
    preset = room.preset or Preset.objects.filter(owner=room.host).order_by("pk").first()
    samplers = (
        {name: getattr(preset, name) for name in DEFAULT_SAMPLERS} if preset else dict(DEFAULT_SAMPLERS)
    )
    samplers["extra"] = dict(preset.extra) if preset else {}  # a text-completion preset's other samplers
    context_size = (
        samplers["context_size"] or (connection and gateway.context_size(connection)) or DEFAULT_CONTEXT
    )
    max_tokens = samplers["max_tokens"]
    count = (
        tokens.counter_for(connection.model.split("/", 1)[-1])
        if connection
        else assemble.default_count_tokens
    )

    options = room_options(room)
    seats = seats if seats is not None else list(seated(room))
    persona = turn.persona
    user_name = turn.user_name
    history = _history_tail(room, budget=context_size - max_tokens, exclude_message_id=exclude_message_id)
    if draft is not None:
        history.append(
            assemble.HistoryMessage(
                seq=room.next_seq, role="user", name=user_name, text=draft, tokens=count(draft)
            )
        )

    books = _books(room, seats, persona)
    last_message = history[-1].text if history else ""
    speaker_card = _card(seat, room.host_id) if seat else assemble.CardInfo(name=NARRATOR)
    speaker_name = seat.name if seat else NARRATOR
    macro_context = macros.MacroContext(
        char=speaker_card.nickname or speaker_name,
        user=user_name,
        persona=persona.description if persona else "",
        description=speaker_card.description,
        scenario=speaker_card.scenario,
        personality=speaker_card.personality,
        last_message=last_message,
        chat_id=str(room.pk),
        variables=chat_variables(room),
        global_variables=copy.deepcopy(room.host.variables),
    )
    tags = seat.character.tags if seat is not None and seat.character_id is not None else None
    # As SillyTavern scans: speaker names with the text, {{char}}/{{user}} expanded in keys and
    # content, character filters against the speaker, timed effects counted in visible messages,
    # and one budget shared by every book: a share of the context, or the largest budget a book
    # in play sets for itself (as a card's own lorebook may).
    activation = worldinfo.activate(
        books,
        [(h.name, h.text) for h in history],
        message_count=Message.objects.filter(room=room, hidden=False).count(),
        state=worldinfo.TimedState.from_json(room.world_info_state),
        count_tokens=count,
        settings=worldinfo.Settings(token_budget=world_info_budget(books, context_size)),
        substitute=lambda text: macros.substitute(text, macro_context),
        character=worldinfo.Character(name=speaker_name, tags=tuple(tags) if tags is not None else None),
    )
    inserts = [
        assemble.WorldInsert(
            content=a.entry.content,
            position=a.entry.position,
            depth=a.entry.depth,
            role=a.entry.role,
            order=a.entry.order,
            constant=a.entry.constant,
        )
        for a in activation.activated
    ]
    if seat is None:
        cards = [_card(s, room.host_id) for s in seats]
    elif options.own_cards:
        cards = [speaker_card]
    else:
        cards = [speaker_card] + [_card(s, room.host_id) for s in seats if s.pk != seat.pk]
    prompt_input = assemble.PromptInput(
        sections=list(preset.sections) if preset else default_sections(),
        characters=cards,
        speaker=speaker_name,
        user_name=user_name,
        persona_description=persona.description if persona else "",
        others=other_people(turn, user_name=user_name),
        world_info=inserts,
        authors_note=room.authors_note,
        authors_note_depth=room.authors_note_depth,
        authors_note_role=room.authors_note_role,
        history=history,
        memory_template=preset.memory_template if preset else default_memory_template(),
        context_size=context_size,
        max_tokens=max_tokens,
        macro_context=macro_context,
        prefix_names=len(seats) > 1 or seat is None or Member.objects.filter(room=room).exists(),
        mode=mode,
        group_nudge=group_nudge(speaker=seat, seats=seats, own_cards=options.own_cards),
        count_tokens=count,
        depth_prompts=depth_prompts(speaker=seat, seats=seats, host_id=room.host_id),
        cache_friendly=True,
    )
    return prompt_input, samplers, activation
