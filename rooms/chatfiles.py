"""SillyTavern chat files in and out of rooms (the codec itself is orbchat.interop.chats)."""

from __future__ import annotations

from datetime import datetime

from django.conf import settings
from django.db import DatabaseError, OperationalError, transaction
from django.db.models import Count, F
from django.utils import timezone

from orbchat.accounts.models import User
from orbchat.interop import chats
from orbchat.interop.errors import InteropError
from orbchat.library.models import Character
from rooms import tokens
from rooms.models import Message, Presence, Room, Seat, Variant
from rooms.services import NARRATOR, retry_when_locked, room_delete, room_persona

# Messages written per transaction (with their swipes, about twice as many rows). SQLite lets
# one connection write at a time: a chat of 100,000 messages written in one transaction would
# keep every other write (a send in any room) waiting until it ends.
IMPORT_BATCH = 1_000


class ChatDuplicate(Exception):
    """The chat is in one of the host's rooms already (`existing`); nothing was imported."""

    def __init__(self, existing: Room) -> None:
        super().__init__(f"“{existing.title}” is already in your chats")
        self.existing = existing


def chat_duplicate(*, host: User, character: Character, items: list[chats.ChatMessage]) -> Room | None:
    """The room of `host`'s with `character` seated that holds exactly these messages, or None.

    The same chat has the same character and the same messages: as many, in the same order,
    each by the same side (person or character) with the same swipe shown. A chat imported and
    then continued is no longer the same.
    """
    wanted = [(item.is_user, item.swipes[item.swipe_id] if item.swipes else "") for item in items]
    candidates = (
        Room.objects.filter(host=host, seats__character=character)
        .annotate(message_count=Count("messages", distinct=True))
        .filter(message_count=len(wanted))
        .order_by("-pk")
        .distinct()
    )
    for room in candidates[:20]:
        shown = Variant.objects.filter(room=room, index=F("message__active_index")).order_by("message__seq")
        rows = shown.values_list("message__kind", "text")
        have = [(kind == Message.Kind.HUMAN, text) for kind, text in rows]
        if have == wanted:
            return room
    return None


def chat_import(
    *, host: User, character: Character, content: bytes, title: str = "", allow_duplicate: bool = True
) -> tuple[Room, list[str]]:
    """Import a SillyTavern .jsonl chat onto a character; return the room and the lines skipped.

    With `allow_duplicate` False, a chat the host has already (`chat_duplicate`) is not imported:
    ChatDuplicate names its room.

    The messages are written IMPORT_BATCH at a time, each batch in a transaction of its own.
    The room's seq numbers are reserved first, so a message sent to it meanwhile comes after
    the imported ones. When a batch fails, the room is deleted: no half-imported chat is left.

    Raise orbchat.interop.errors.InteropError when nothing in the file is usable or it cannot
    be saved.
    """
    parsed = chats.parse_chat_jsonl(content, zone=timezone.get_default_timezone())
    limit = settings.MAX_MESSAGE_CHARS
    problems = list(parsed.problems)
    items = []
    for number, item in enumerate(parsed.messages, start=1):
        if any(len(text) > limit for text in item.swipes):
            problems.append(f"message {number}: longer than {limit:,} characters")
        else:
            items.append(item)
    if not allow_duplicate and (existing := chat_duplicate(host=host, character=character, items=items)):
        raise ChatDuplicate(existing)
    metadata = parsed.chat_metadata
    note = chats.authors_note(metadata)
    with transaction.atomic():
        room = Room.objects.create(
            host=host,
            title=title or f"{character.name} (imported)",
            preset=host.presets.order_by("pk").first(),
            authors_note=note.text,
            authors_note_depth=note.depth,
            authors_note_role=note.role,
            chat_header={
                "user_name": parsed.user_name,
                "character_name": parsed.character_name,
                "create_date": parsed.create_date,
                "chat_metadata": metadata,
                **parsed.header_other,
            },
            next_seq=len(items),
        )
        book_name = metadata.get("world_info")
        book = (
            host.world_books.filter(name=book_name).order_by("pk").first()
            if isinstance(book_name, str) and book_name
            else None
        )
        if book:
            room.world_books.add(book)
        seat = Seat.objects.create(
            room=room, character=character, name=character.name, talkativeness=character.talkativeness
        )
        Presence.objects.create(seat=seat, joined_seq=0)
    try:
        for start in range(0, len(items), IMPORT_BATCH):
            _import_batch(room, seat, character, items[start : start + IMPORT_BATCH], first_seq=start)
    except (DatabaseError, OverflowError, ValueError) as exc:
        _discard(room)
        if isinstance(exc, OperationalError):
            raise InteropError("the database was busy, so nothing was imported; try again") from exc
        raise InteropError(f"a value in the file cannot be stored, so nothing was imported ({exc})") from exc
    except BaseException:
        _discard(room)
        raise
    Room.objects.filter(pk=room.pk).update(last_activity=timezone.now())
    return room, problems


def _speaker(item: chats.ChatMessage, character: Character, host: User) -> str:
    if item.is_narrator:
        return NARRATOR
    return item.name or (host.get_username() if item.is_user else character.name)


def _message_fields(item: chats.ChatMessage, speaker_name: str) -> dict:
    """Return what a message keeps of the file beyond its columns: `extra`, other keys, its own name.

    `swipe_id` is kept too: the swipe whose `extra` the message's is.
    """
    fields = {**item.other, "extra": item.extra, "swipe_id": item.swipe_id}
    if item.name != speaker_name:
        fields["name"] = item.name
    return fields


def _swipe_model(item: chats.ChatMessage, info: dict) -> str:
    extra = info.get("extra") if isinstance(info.get("extra"), dict) else {}
    return str(extra.get("model") or item.extra.get("model") or "")[:300]


def _swipe_time(item: chats.ChatMessage, info: dict, index: int, key: str) -> datetime | None:
    """Return a swipe's gen_started/gen_finished: its swipe_info's, else the message's for the shown one."""
    value = info.get(key)
    if value is None and index == item.swipe_id:
        value = item.other.get(key)
    return chats.parse_send_date(value, timezone.get_default_timezone())


def _import_batch(room: Room, seat: Seat, character: Character, items: list, *, first_seq: int) -> None:
    """Write one batch of imported messages and their swipes, in one transaction."""
    host = room.host
    counted = [[(text, tokens.count(text)) for text in item.swipes] for item in items]  # before locking
    messages = []
    for offset, item in enumerate(items):
        speaker_name = _speaker(item, character, host)
        messages.append(
            Message(
                room=room,
                seq=first_seq + offset,
                kind=Message.Kind.HUMAN if item.is_user else Message.Kind.CHARACTER,
                author=host if item.is_user else None,
                # A narrator message has no seat: it is the room's Narrator speaking.
                seat=None if item.is_user or item.is_narrator else seat,
                speaker_name=speaker_name,
                hidden=item.hidden,
                active_index=item.swipe_id,
                chat_fields=_message_fields(item, speaker_name),
            )
        )
    variants = [
        Variant(
            message=message,
            room=room,
            index=index,
            text=text,
            tokens=count,
            model=_swipe_model(item, info),
            started_at=_swipe_time(item, info, index, "gen_started"),
            finished_at=_swipe_time(item, info, index, "gen_finished"),
            chat_fields=info,
        )
        for message, item, swipes in zip(messages, items, counted, strict=True)
        for index, ((text, count), info) in enumerate(zip(swipes, item.swipe_info, strict=True))
    ]
    with transaction.atomic():
        Message.objects.bulk_create(messages)
        dated = []
        for message, item in zip(messages, items, strict=True):
            if item.send_date:
                message.created_at = item.send_date
                dated.append(message)
        Message.objects.bulk_update(dated, ["created_at"], batch_size=500)
        Variant.objects.bulk_create(variants, batch_size=500)


def _discard(room: Room) -> None:
    """Delete a room whose import failed, a batch at a time (waiting out a locked database)."""

    def delete_batch() -> bool:
        with transaction.atomic():
            ids = list(Message.objects.filter(room=room).values_list("pk", flat=True)[:IMPORT_BATCH])
            Variant.objects.filter(message_id__in=ids).delete()
            Message.objects.filter(pk__in=ids).delete()
            return bool(ids)

    busy = "the import failed and the database stayed busy; delete the imported room by hand"
    while retry_when_locked(delete_batch, refusal=busy):
        pass
    retry_when_locked(lambda: room_delete(room=room), refusal=busy)


def _exported_message(message: Message, variants: list[Variant]) -> chats.ChatMessage:
    active = min(message.active_index, len(variants) - 1)
    fields = dict(message.chat_fields)
    name = fields.pop("name", message.speaker_name)
    imported_extra, imported_shown = fields.pop("extra", None), fields.pop("swipe_id", None)
    info, model = variants[active].chat_fields, variants[active].model
    send_date = message.created_at
    if imported_extra is not None and active == imported_shown:
        extra = imported_extra
    else:
        # Another swipe is shown than the file showed: as on a swipe in SillyTavern, the message
        # takes that swipe's own extra and date.
        extra = info["extra"] if isinstance(info.get("extra"), dict) else ({"model": model} if model else {})
        send_date = chats.parse_send_date(info.get("send_date"), timezone.get_default_timezone()) or send_date
    return chats.ChatMessage(
        name=name,
        is_user=message.is_human,
        hidden=message.hidden,
        send_date=send_date,
        swipes=[v.text for v in variants],
        swipe_id=active,
        swipe_info=[v.chat_fields for v in variants],
        extra=extra,
        other=fields,
    )


def chat_file(room: Room) -> chats.ChatFile:
    """Return the room as a SillyTavern chat.

    What an imported file carried comes back as it came (header, `chat_metadata`, each message's
    and swipe's extra fields), with the room's author's note written over the file's.
    """
    persona = room_persona(room)
    messages = []
    for message in room.messages.prefetch_related("variants").order_by("seq"):
        variants = sorted(message.variants.all(), key=lambda v: v.index)
        if variants:
            messages.append(_exported_message(message, variants))
    header = dict(room.chat_header)
    seat = room.seats.first()
    user_name = header.pop("user_name", "") or (persona.name if persona else room.host.get_username())
    character_name = header.pop("character_name", "") or (seat.name if seat else "")
    note = chats.AuthorsNote(
        text=room.authors_note, depth=room.authors_note_depth, role=room.authors_note_role
    )
    return chats.ChatFile(
        user_name=user_name,
        character_name=character_name,
        create_date=header.pop("create_date", "") or room.created_at.isoformat(),
        chat_metadata=chats.with_authors_note(header.pop("chat_metadata", {}), note),
        header_other=header,
        messages=messages,
        problems=[],
    )
