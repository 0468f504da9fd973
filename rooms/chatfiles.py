"""SillyTavern chat files in and out of rooms (the codec itself is orbchat.interop.chats)."""

from __future__ import annotations

from django.conf import settings
from django.db import DatabaseError, OperationalError, transaction
from django.utils import timezone

from orbchat.accounts.models import User
from orbchat.interop import chats
from orbchat.interop.errors import InteropError
from orbchat.library.models import Character
from rooms import tokens
from rooms.models import Message, Presence, Room, Seat, Variant
from rooms.services import retry_when_locked, room_delete, room_persona

# Messages written per transaction (with their swipes, about twice as many rows). SQLite lets
# one connection write at a time: a chat of 100,000 messages written in one transaction would
# keep every other write (a send in any room) waiting until it ends.
IMPORT_BATCH = 1_000


def chat_import(
    *, host: User, character: Character, content: bytes, title: str = ""
) -> tuple[Room, list[str]]:
    """Import a SillyTavern .jsonl chat onto a character; return the room and the lines skipped.

    The messages are written IMPORT_BATCH at a time, each batch in a transaction of its own.
    The room's seq numbers are reserved first, so a message sent to it meanwhile comes after
    the imported ones. When a batch fails, the room is deleted: no half-imported chat is left.

    Raise orbchat.interop.errors.InteropError when nothing in the file is usable or it cannot
    be saved.
    """
    parsed = chats.parse_chat_jsonl(content)
    limit = settings.MAX_MESSAGE_CHARS
    problems = list(parsed.problems)
    items = []
    for number, item in enumerate(parsed.messages, start=1):
        if any(len(text) > limit for text in item.swipes):
            problems.append(f"message {number}: longer than {limit:,} characters")
        else:
            items.append(item)
    with transaction.atomic():
        room = Room.objects.create(
            host=host,
            title=title or f"{character.name} (imported)",
            preset=host.presets.order_by("pk").first(),
            authors_note=str(parsed.chat_metadata.get("note_prompt") or ""),
            next_seq=len(items),
        )
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


def _import_batch(room: Room, seat: Seat, character: Character, items: list, *, first_seq: int) -> None:
    """Write one batch of imported messages and their swipes, in one transaction."""
    host = room.host
    counted = [[(text, tokens.count(text)) for text in item.swipes] for item in items]  # before locking
    messages = [
        Message(
            room=room,
            seq=first_seq + offset,
            kind=Message.Kind.HUMAN if item.is_user else Message.Kind.CHARACTER,
            author=host if item.is_user else None,
            seat=None if item.is_user else seat,
            speaker_name=item.name or (character.name if not item.is_user else host.get_username()),
            hidden=item.hidden,
            active_index=item.swipe_id,
        )
        for offset, item in enumerate(items)
    ]
    with transaction.atomic():
        Message.objects.bulk_create(messages)
        dated = []
        for message, item in zip(messages, items, strict=True):
            if item.send_date:
                message.created_at = item.send_date
                dated.append(message)
        Message.objects.bulk_update(dated, ["created_at"], batch_size=500)
        Variant.objects.bulk_create(
            [
                Variant(
                    message=message,
                    room=room,
                    index=index,
                    text=text,
                    tokens=count,
                    model=str(item.extra.get("model") or ""),
                )
                for message, item, swipes in zip(messages, items, counted, strict=True)
                for index, (text, count) in enumerate(swipes)
            ],
            batch_size=500,
        )


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


def chat_file(room: Room) -> chats.ChatFile:
    """Return the room as a SillyTavern chat (swipes, hidden flags and order kept)."""
    persona = room_persona(room)
    messages = []
    for message in room.messages.prefetch_related("variants").order_by("seq"):
        variants = sorted(message.variants.all(), key=lambda v: v.index)
        if not variants:
            continue
        active = min(message.active_index, len(variants) - 1)
        messages.append(
            chats.ChatMessage(
                name=message.speaker_name,
                is_user=message.is_human,
                hidden=message.hidden,
                send_date=message.created_at,
                swipes=[v.text for v in variants],
                swipe_id=active,
                swipe_info=[{} for _ in variants],
                extra={"model": variants[active].model} if variants[active].model else {},
                other={},
            )
        )
    seat = room.seats.first()
    return chats.ChatFile(
        user_name=persona.name if persona else room.host.get_username(),
        character_name=seat.name if seat else "",
        create_date=room.created_at.isoformat(),
        chat_metadata={"note_prompt": room.authors_note} if room.authors_note else {},
        header_other={},
        messages=messages,
        problems=[],
    )
