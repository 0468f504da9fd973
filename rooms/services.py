"""Writes to rooms. Every change goes through here and broadcasts after commit."""

from __future__ import annotations

import copy
import datetime as dt
import time
from collections.abc import Callable
from dataclasses import dataclass, replace
from dataclasses import fields as dataclass_fields
from typing import TypeVar

from django.conf import settings
from django.db import IntegrityError, OperationalError, connection, transaction
from django.db.models import F
from django.utils import timezone

from orbchat.accounts.models import User
from orbchat.accounts.services import user_variables_set
from orbchat.library.models import Character, Persona
from orbchat.library.selectors import persona_default
from orbchat.prompting import macros
from rooms import events, signals, tokens
from rooms.models import Member, Message, Presence, Room, Seat, Variant
from rooms.options import RoomOptions, room_options

NARRATOR = "Narrator"  # speaker of a Narrator-mode message, which voices every character
# A generation that has not written for this long is taken as dead (its process ended).
STALE_GENERATION = dt.timedelta(seconds=90)
# Seconds between attempts at a write that found the database locked: about 5 s in all.
LOCKED_RETRY_DELAYS = (0.25, 0.5, 1.0, 1.5, 2.0)
BUSY = "Your message was not saved: the database is busy. Try again."

T = TypeVar("T")


class TurnBusy(Exception):
    """Another reply is being written in this room."""


class ActionRefused(Exception):
    """The action does not apply here; the message says why in plain words."""


def retry_when_locked(write: Callable[[], T], *, refusal: str = BUSY) -> T:
    """Run the write, and again after a pause each time SQLite reports the database locked.

    SQLite lets one connection write at a time; a writer that waits past its busy timeout gets
    "database is locked". When the database is still locked after the last attempt, raise
    ActionRefused(`refusal`), so the person hears that nothing was saved. Inside an open
    transaction nothing can be tried again, and the error goes up unchanged.
    """
    for delay in LOCKED_RETRY_DELAYS:
        try:
            return write()
        except OperationalError as exc:
            if not _retryable(exc):
                raise
        time.sleep(delay)
    try:
        return write()
    except OperationalError as exc:
        if not _retryable(exc):
            raise
        raise ActionRefused(refusal) from exc


def _retryable(exc: OperationalError) -> bool:
    return "database is locked" in str(exc) and not connection.in_atomic_block


def _check_text(text: str) -> None:
    """Refuse a message text that is empty or longer than MAX_MESSAGE_CHARS."""
    if not text.strip():
        raise ActionRefused("A message cannot be empty.")
    limit = settings.MAX_MESSAGE_CHARS
    if len(text) > limit:
        raise ActionRefused(f"Messages are limited to {limit:,} characters (this one has {len(text):,}).")


def _take_seq(room: Room) -> int:
    """Reserve the room's next seq (the row lock serialises concurrent senders)."""
    # UPDATE … RETURNING: PostgreSQL, and SQLite from 3.35 (the release that returns from inserts).
    if connection.vendor in ("sqlite", "postgresql") and connection.features.can_return_columns_from_insert:
        # One statement instead of a locking read and a write: the UPDATE takes the same lock.
        seq = _increment_seq(room.pk) - 1
    else:
        seq = Room.objects.select_for_update().get(pk=room.pk).next_seq
        Room.objects.filter(pk=room.pk).update(next_seq=F("next_seq") + 1, last_activity=timezone.now())
    room.next_seq = seq + 1
    return seq


def _increment_seq(room_id: int) -> int:
    """Add one to the room's next_seq, stamp its last activity, and return the new next_seq."""
    meta, quote = Room._meta, connection.ops.quote_name
    table, pk = quote(meta.db_table), quote(meta.pk.column)
    seq, activity = quote(meta.get_field("next_seq").column), quote(meta.get_field("last_activity").column)
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {table} SET {seq} = {seq} + 1, {activity} = %s WHERE {pk} = %s RETURNING {seq}",
            [connection.ops.adapt_datetimefield_value(timezone.now()), room_id],
        )
        row = cursor.fetchone()
    if row is None:
        raise Room.DoesNotExist("Room matching query does not exist.")
    return row[0]


def room_persona(room: Room) -> Persona | None:
    """Return the persona the host writes as here: the room's own, else the host's default."""
    if room.persona_id is not None:
        return room.persona
    return persona_default(user=room.host)


def user_persona(room: Room, user: User) -> Persona | None:
    """Return the persona `user` writes as here: the room's for its host, their own otherwise."""
    if user.pk == room.host_id:
        return room_persona(room)
    member = Member.objects.filter(room=room, user=user).select_related("persona").first()
    return (member.persona if member else None) or persona_default(user=user)


@dataclass(frozen=True)
class Writer:
    """Who a person's message is written as: their persona there (None: none) and its name."""

    persona: Persona | None
    name: str

    @classmethod
    def of(cls, user: User, persona: Persona | None) -> Writer:
        return cls(persona=persona, name=persona.name if persona else user.get_username())


def user_writer(room: Room, user: User) -> Writer:
    """Return who `user` writes as in `room` now."""
    return Writer.of(user, user_persona(room, user))


def user_display_name(room: Room, user: User) -> str:
    return user_writer(room, user).name


def _greeting_post(*, room: Room, seat: Seat, character: Character, in_group: bool) -> Message | None:
    """Post the character's greeting, its alternates as swipes; in a room with several
    characters its group-only greetings too. None when the card has no greeting."""
    greetings = [g for g in [character.first_mes, *character.alternate_greetings] if g.strip()]
    if in_group:
        greetings += character.group_only_greetings
    if not greetings:
        return None
    message = Message.objects.create(
        room=room, seq=_take_seq(room), kind=Message.Kind.CHARACTER, seat=seat, speaker_name=character.name
    )
    context = _greeting_context(room, character)
    Variant.objects.bulk_create(
        [
            Variant(message=message, room=room, index=i, text=text, tokens=tokens.count(text))
            for i, text in enumerate(macros.substitute(g, context) for g in greetings)
        ]
    )
    variables_save(room=room, variables=context.variables, global_variables=context.global_variables)
    return message


def _greeting_context(room: Room, character: Character) -> macros.MacroContext:
    persona = room_persona(room)
    return macros.MacroContext(
        char=character.macro_name,
        user=persona.name if persona else room.host.get_username(),
        persona=persona.description if persona else "",
        description=character.description,
        scenario=character.scenario,
        personality=character.personality,
        chat_id=str(room.pk),
        variables=chat_variables(room),
        global_variables=copy.deepcopy(room.host.variables),
    )


def chat_variables(room: Room) -> dict:
    """Return a copy of the chat's variables: SillyTavern keeps them in `chat_metadata.variables`,
    which an imported chat brings and an export gives back."""
    metadata = room.chat_header.get("chat_metadata") if isinstance(room.chat_header, dict) else None
    variables = metadata.get("variables") if isinstance(metadata, dict) else None
    return copy.deepcopy(variables) if isinstance(variables, dict) else {}


def variables_save(*, room: Room, variables: dict | None, global_variables: dict | None) -> None:
    """Keep what {{setvar}} and the other variable macros changed while a text was written:
    the chat's in its `chat_metadata`, the global ones with the host."""
    if variables is not None and variables != chat_variables(room):
        with transaction.atomic():
            header = Room.objects.select_for_update().values_list("chat_header", flat=True).get(pk=room.pk)
            header = header if isinstance(header, dict) else {}
            metadata = header.get("chat_metadata") if isinstance(header.get("chat_metadata"), dict) else {}
            room.chat_header = {**header, "chat_metadata": {**metadata, "variables": variables}}
            Room.objects.filter(pk=room.pk).update(chat_header=room.chat_header)
    if global_variables is not None and global_variables != room.host.variables:
        room.host.variables = global_variables
        user_variables_set(user_id=room.host_id, variables=global_variables)


def turn_state_save(
    *, room: Room, world_info_state: dict, variables: dict | None, global_variables: dict | None
) -> None:
    """Keep what a turn's prompt changed: the world-info timers (sticky, cooldown) and variables."""
    if world_info_state != room.world_info_state:
        room.world_info_state = world_info_state
        Room.objects.filter(pk=room.pk).update(world_info_state=world_info_state)
    variables_save(room=room, variables=variables, global_variables=global_variables)


def _offer_group_greetings(room: Room, seats: list[Seat]) -> None:
    """Add each seated card's group-only greetings as swipes of its greeting (once: a greeting
    that already offers them is left as it is)."""
    for seat in seats:
        character = seat.character
        if character is None or not character.group_only_greetings:
            continue
        message = room.messages.filter(seat=seat, kind=Message.Kind.CHARACTER).order_by("seq").first()
        if message is None:
            continue
        context = _greeting_context(room, character)
        offered = set(message.variants.values_list("text", flat=True))
        texts = [macros.substitute(g, context) for g in character.group_only_greetings]
        if offered & set(texts):
            continue
        variables_save(room=room, variables=context.variables, global_variables=context.global_variables)
        start = message.variants.count()
        Variant.objects.bulk_create(
            [
                Variant(message=message, room=room, index=start + i, text=text, tokens=tokens.count(text))
                for i, text in enumerate(texts)
            ]
        )


@transaction.atomic
def room_create_from_character(*, host: User, character: Character) -> Room:
    """Start a chat: the character is seated and its greeting (with alternates as swipes) is message 0."""
    room = Room.objects.create(host=host, title=character.name, preset=host.presets.order_by("pk").first())
    seat = Seat.objects.create(
        room=room, character=character, name=character.name, talkativeness=character.talkativeness
    )
    Presence.objects.create(seat=seat, joined_seq=0)
    _greeting_post(room=room, seat=seat, character=character, in_group=False)
    return room


@transaction.atomic
def room_create_group(
    *, host: User, characters: list[Character], title: str = "", options: RoomOptions | None = None
) -> Room:
    """Start a group chat: every character is seated and, as in a SillyTavern group chat, each
    posts its greeting in the order given, its group-only greetings offered as swipes."""
    if len(characters) < 2:
        raise ActionRefused("A group chat needs at least two characters.")
    if any(character.owner_id != host.pk for character in characters):
        raise ActionRefused("A group chat can seat only characters from your own library.")
    names = ", ".join(character.name for character in characters)
    room = Room.objects.create(
        host=host,
        title=(title.strip() or names)[:300],
        preset=host.presets.order_by("pk").first(),
        settings=(options or RoomOptions()).to_json(),
    )
    seats = []
    for character in characters:
        seat = Seat.objects.create(
            room=room, character=character, name=character.name, talkativeness=character.talkativeness
        )
        Presence.objects.create(seat=seat, joined_seq=0)
        seats.append(seat)
    for seat, character in zip(seats, characters, strict=True):
        _greeting_post(room=room, seat=seat, character=character, in_group=True)
    return room


@transaction.atomic
def room_update(*, room: Room, **fields) -> Room:
    books = fields.pop("world_books", None)
    for name, value in fields.items():
        setattr(room, name, value)
    # Only these fields: a full save would write back a stale next_seq while turns are running.
    room.save(update_fields=list(fields))
    if books is not None:
        room.world_books.set(books)
    return room


@transaction.atomic
def room_settings_update(*, room: Room, **fields) -> Room:
    """Change the fields named, play options (`RoomOptions` names) among them; an option not
    named keeps its value.

    The options are merged into the settings as stored now, read under the row's lock: two tabs
    saving different options at the same instant both keep theirs.
    """
    names = {option.name for option in dataclass_fields(RoomOptions)}
    play = {name: fields.pop(name) for name in list(fields) if name in names}
    if play:
        room.settings = Room.objects.select_for_update().values_list("settings", flat=True).get(pk=room.pk)
        fields["settings"] = {**room.settings, **replace(room_options(room), **play).to_json()}
    return room_update(room=room, **fields)


@transaction.atomic
def room_delete(*, room: Room) -> None:
    room.delete()


def message_create(*, room: Room, author: User, text: str, writer: Writer | None = None) -> Message:
    """Save a person's message at the room's next seq and show it to everyone in the room.

    The message keeps the persona it is written as (its name and its picture), whatever its
    author writes as later. `writer` is that persona when the caller has read it already (a
    turn's `TurnContext`); otherwise it is read here.

    A locked database is waited for (`retry_when_locked`): the message is saved, or the
    ActionRefused raised says it was not.
    """
    text = text.strip()
    _check_text(text)
    writer = writer or user_writer(room, author)
    return retry_when_locked(lambda: _message_save(room=room, author=author, text=text, writer=writer))


@transaction.atomic
def _message_save(*, room: Room, author: User, text: str, writer: Writer) -> Message:
    message = Message.objects.create(
        room=room,
        seq=_take_seq(room),
        kind=Message.Kind.HUMAN,
        author=author,
        speaker_name=writer.name,
        persona=writer.persona,
    )
    Variant.objects.create(message=message, room=room, index=0, text=text, tokens=tokens.count(text))
    events.message_added(message)
    return message


def seated(room: Room):
    """The room's seats with an open presence, in seat order."""
    return room.seats.filter(presences__left_seq__isnull=True).select_related("character").distinct()


@transaction.atomic
def seat_add(*, room: Room, character: Character) -> Seat:
    """Seat a character from the next message on; a character seated before gets its seat back."""
    seat = room.seats.filter(character=character).first()
    if seat and seat.presences.filter(left_seq__isnull=True).exists():
        raise ActionRefused(f"{character.name} is already seated.")
    locked = Room.objects.select_for_update().get(pk=room.pk)
    if seat is None:
        seat = Seat.objects.create(
            room=room, character=character, name=character.name, talkativeness=character.talkativeness
        )
    Presence.objects.create(seat=seat, joined_seq=locked.next_seq)
    if not locked.messages.exclude(kind=Message.Kind.CHARACTER).exists():
        # The chat has not begun: as in a new SillyTavern group chat, each character greets,
        # and the group-only greetings are offered now that the room has several characters.
        others = [s for s in seated(locked) if s.pk != seat.pk]
        if others:
            _offer_group_greetings(locked, others)
        if not seat.messages.exists():
            _greeting_post(room=locked, seat=seat, character=character, in_group=bool(others))
    events.seats_changed(room.pk)
    return seat


@transaction.atomic
def seat_remove(*, seat: Seat) -> Seat:
    """Close the seat's presence at the current seq: it was there for every message before it."""
    room = Room.objects.select_for_update().get(pk=seat.room_id)
    presence = seat.presences.filter(left_seq__isnull=True).first()
    if presence is None:
        raise ActionRefused(f"{seat.name} is not seated.")
    if room.next_seq <= presence.joined_seq:
        presence.delete()  # seated and removed with no message in between: it never was there
    else:
        presence.left_seq = room.next_seq
        presence.save(update_fields=["left_seq"])
    seat.speak_next = False
    seat.save(update_fields=["speak_next"])
    events.seats_changed(room.pk)
    return seat


@transaction.atomic
def seat_update(
    *,
    seat: Seat,
    talkativeness: float | None = None,
    muted: bool | None = None,
    speak_next: bool | None = None,
) -> Seat:
    if talkativeness is not None:
        if not 0.0 <= talkativeness <= 1.0:
            raise ActionRefused("Talkativeness must be between 0 and 1.")
        seat.talkativeness = talkativeness
    if muted is not None:
        seat.muted = muted
    if speak_next is not None:
        seat.speak_next = speak_next
    seat.save(update_fields=["talkativeness", "muted", "speak_next"])
    events.seats_changed(seat.room_id)
    return seat


def speaking_seat(room: Room) -> Seat:
    """Return the seat that answers (solo: the one seated character)."""
    seat = room.seats.filter(presences__left_seq__isnull=True, muted=False).first()
    if seat is None:
        seat = room.seats.filter(presences__left_seq__isnull=True).first()
    if seat is None:
        raise ActionRefused("Nobody is seated in this room to answer.")
    return seat


def _clear_stale(room: Room) -> int:
    """Stop the room's generations that have not written for a while; return how many."""
    cutoff = timezone.now() - STALE_GENERATION
    stale = list(Variant.objects.filter(room=room, state=Variant.State.STREAMING, updated_at__lt=cutoff))
    for variant in stale:
        variant.state = Variant.State.STOPPED
        variant.error = "The reply was interrupted (the server stopped while writing it)."
        variant.finished_at = timezone.now()
        variant.save(update_fields=["state", "error", "finished_at", "updated_at"])
    return len(stale)


def last_message(room: Room) -> Message | None:
    return room.messages.order_by("-seq").first()


@transaction.atomic
def turn_begin(
    *, room: Room, mode: str, seat: Seat | None = None, prompt: dict | None = None, model: str = ""
) -> Variant:
    """Open the streaming variant a reply writes into; refuse when one is already being written.

    mode: "reply" (a new message), "regenerate" (a new swipe of the last reply) or "continue"
    (append to the last reply). `seat` None with "reply" is the Narrator, voicing everyone.
    `prompt` is the exact prompt, kept for the host's Preview.
    """
    now = timezone.now()
    try:
        message, variant = _open_variant(room=room, mode=mode, seat=seat, prompt=prompt, model=model, now=now)
    except IntegrityError as exc:
        # Another generation holds the room. One that died with its process must not hold it for
        # ever: clear the dead ones and try once more.
        if not _clear_stale(room):
            raise TurnBusy(
                "A reply is already being written in this room; wait for it or press Stop."
            ) from exc
        try:
            message, variant = _open_variant(
                room=room, mode=mode, seat=seat, prompt=prompt, model=model, now=now
            )
        except IntegrityError as again:
            raise TurnBusy(
                "A reply is already being written in this room; wait for it or press Stop."
            ) from again
    if mode != "reply":  # a reply's new seq already stamped it
        Room.objects.filter(pk=room.pk).update(last_activity=now)
    events.message_changed(message, created=mode == "reply")
    return variant


def _open_variant(
    *, room: Room, mode: str, seat: Seat | None, prompt: dict | None, model: str, now: dt.datetime
) -> tuple[Message, Variant]:
    """Write the streaming variant (in a savepoint: the one-generation constraint may refuse it)."""
    with transaction.atomic():
        if mode == "reply":
            message = Message.objects.create(
                room=room,
                seq=_take_seq(room),
                kind=Message.Kind.CHARACTER,
                seat=seat,
                speaker_name=seat.name if seat else NARRATOR,
            )
            if seat is not None and seat.speak_next:
                Seat.objects.filter(pk=seat.pk).update(speak_next=False)
            variant = Variant.objects.create(
                message=message,
                room=room,
                index=0,
                state=Variant.State.STREAMING,
                started_at=now,
                prompt=prompt,
                model=model,
            )
            return message, variant
        message = last_message(room)
        if message is None or message.is_human:
            raise ActionRefused(f"There is no character reply to {mode}.")
        if mode == "regenerate":
            index = message.variants.count()
            variant = Variant.objects.create(
                message=message,
                room=room,
                index=index,
                state=Variant.State.STREAMING,
                started_at=now,
                prompt=prompt,
                model=model,
            )
            message.active_index = index
            message.save(update_fields=["active_index"])
        elif mode == "continue":
            variant = message.variants.get(index=message.active_index)
            variant.state, variant.started_at, variant.error = Variant.State.STREAMING, now, ""
            variant.prompt, variant.model = prompt, model or variant.model
            variant.save(update_fields=["state", "started_at", "error", "prompt", "model", "updated_at"])
        else:
            raise ActionRefused(f"Unknown turn mode {mode!r}.")
        return message, variant


def turn_progress(*, variant_id: int, text: str) -> None:
    """Save the text so far (a reload mid-reply shows it)."""
    Variant.objects.filter(pk=variant_id, state=Variant.State.STREAMING).update(
        text=text, updated_at=timezone.now()
    )


@transaction.atomic
def turn_finish(
    *,
    variant_id: int,
    text: str,
    state: str,
    finish_reason: str = "",
    error: str = "",
    prompt_tokens: int | None = None,
    completion_tokens: int | None = None,
    first_token_at: dt.datetime | None = None,
) -> Variant | None:
    """Commit the reply. A failed reply that wrote nothing leaves no empty message behind."""
    variant = Variant.objects.select_for_update().filter(pk=variant_id).select_related("message").first()
    if variant is None:
        return None
    message = variant.message
    if state == Variant.State.ERROR and not text.strip():
        if message.variants.count() == 1:
            message_id = message.pk
            message.delete()
            events.messages_removed(variant.room_id, [message_id])
            return None
        variant.delete()
        message.active_index = (
            message.variants.order_by("-index").values_list("index", flat=True).first() or 0
        )
        message.save(update_fields=["active_index"])
        events.message_changed(message)
        return None
    variant.text = text
    variant.state = state
    variant.finish_reason = finish_reason
    variant.error = error
    variant.tokens = tokens.count(text)
    variant.prompt_tokens = prompt_tokens
    variant.completion_tokens = completion_tokens
    variant.first_token_at = first_token_at or variant.first_token_at
    variant.finished_at = timezone.now()
    variant.save()
    Room.objects.filter(pk=variant.room_id).update(last_activity=timezone.now())
    events.message_changed(message)
    # Only the last message is ever written to, and it is inside the never-summarised window.
    signals.reply_committed.send(sender=Variant, room_id=variant.room_id)
    return variant


@transaction.atomic
def swipe(*, message: Message, direction: int) -> Message:
    """Show the previous or next variant. Greetings are swipeable until the first send."""
    if message.seq == 0 and message.room.messages.count() > 1:
        raise ActionRefused("Greetings can be swiped only before the first message is sent.")
    count = message.variants.count()
    target = message.active_index + direction
    if not 0 <= target < count:
        raise ActionRefused("No more swipes that way.")
    message.active_index = target
    message.save(update_fields=["active_index"])
    events.message_changed(message)
    signals.messages_changed.send(sender=Message, room_id=message.room_id, seqs=[message.seq])
    return message


@transaction.atomic
def message_edit(*, message: Message, text: str) -> Message:
    """Change the text of the message's shown variant (refused when empty or over the limit)."""
    _check_text(text)
    variant = message.variants.get(index=message.active_index)
    if variant.state == Variant.State.STREAMING:
        raise ActionRefused("This reply is still being written; stop it before editing.")
    variant.text = text
    variant.tokens = tokens.count(text)
    variant.save(update_fields=["text", "tokens", "updated_at"])
    events.message_changed(message)
    signals.messages_changed.send(sender=Message, room_id=message.room_id, seqs=[message.seq])
    return message


@transaction.atomic
def message_set_hidden(*, message: Message, hidden: bool) -> Message:
    message.hidden = hidden
    message.save(update_fields=["hidden"])
    events.message_changed(message)
    signals.messages_changed.send(sender=Message, room_id=message.room_id, seqs=[message.seq])
    return message


@transaction.atomic
def message_delete(*, message: Message, and_after: bool = False) -> list[int]:
    """Delete a message (or it and everything after it); return the deleted ids."""
    room = message.room
    doomed = room.messages.filter(seq__gte=message.seq) if and_after else room.messages.filter(pk=message.pk)
    if Variant.objects.filter(message__in=doomed, state=Variant.State.STREAMING).exists():
        raise ActionRefused("A reply is being written there; stop it first.")
    ids = list(doomed.values_list("pk", flat=True))
    doomed.delete()
    events.messages_removed(room.pk, ids)
    if and_after:
        signals.messages_rewound.send(sender=Message, room_id=room.pk, from_seq=message.seq)
    else:
        signals.messages_changed.send(sender=Message, room_id=room.pk, seqs=[message.seq])
    return ids


@transaction.atomic
def room_fork(*, room: Room, at_seq: int) -> Room:
    """Copy the room up to and including message `at_seq`; the parent is untouched."""
    fork = Room.objects.create(
        host=room.host,
        title=f"{room.title} (fork at #{at_seq})",
        persona=room.persona,
        preset=room.preset,
        authors_note=room.authors_note,
        authors_note_depth=room.authors_note_depth,
        authors_note_role=room.authors_note_role,
        settings=room.settings,
        tags=room.tags,
        parent=room,
        forked_at_seq=at_seq,
        next_seq=at_seq + 1,
    )
    fork.world_books.set(room.world_books.all())
    seats = {}
    for seat in room.seats.all():
        seats[seat.pk] = Seat.objects.create(
            room=fork,
            character=seat.character,
            name=seat.name,
            talkativeness=seat.talkativeness,
            muted=seat.muted,
        )
        for presence in seat.presences.filter(joined_seq__lte=at_seq):
            left = (
                presence.left_seq if presence.left_seq is not None and presence.left_seq <= at_seq else None
            )
            Presence.objects.create(seat=seats[seat.pk], joined_seq=presence.joined_seq, left_seq=left)
    for message in room.messages.filter(seq__lte=at_seq).prefetch_related("variants"):
        copy = Message.objects.create(
            room=fork,
            seq=message.seq,
            kind=message.kind,
            author=message.author,
            seat=seats.get(message.seat_id),
            speaker_name=message.speaker_name,
            persona_id=message.persona_id,
            hidden=message.hidden,
            active_index=message.active_index,
        )
        Variant.objects.bulk_create(
            [
                Variant(
                    message=copy,
                    room=fork,
                    index=v.index,
                    text=v.text,
                    state=Variant.State.DONE if v.state == Variant.State.STREAMING else v.state,
                    model=v.model,
                    tokens=v.tokens,
                    finish_reason=v.finish_reason,
                )
                for v in message.variants.all()
            ]
        )
    return fork
