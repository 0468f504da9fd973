"""SillyTavern chat files in and out of rooms (the codec itself is orbchat.interop.chats)."""

from __future__ import annotations

from django.db import transaction
from django.utils import timezone

from orbchat.accounts.models import User
from orbchat.interop import chats
from orbchat.library.models import Character
from rooms import tokens
from rooms.models import Message, Presence, Room, Seat, Variant
from rooms.services import room_persona


@transaction.atomic
def chat_import(
    *, host: User, character: Character, content: bytes, title: str = ""
) -> tuple[Room, list[str]]:
    """Import a SillyTavern .jsonl chat onto a character; return the room and the lines skipped.

    Raise orbchat.interop.errors.InteropError when nothing in the file is usable.
    """
    parsed = chats.parse_chat_jsonl(content)
    room = Room.objects.create(
        host=host,
        title=title or f"{character.name} (imported)",
        preset=host.presets.order_by("pk").first(),
        authors_note=str(parsed.chat_metadata.get("note_prompt") or ""),
    )
    seat = Seat.objects.create(
        room=room, character=character, name=character.name, talkativeness=character.talkativeness
    )
    Presence.objects.create(seat=seat, joined_seq=0)
    variants = []
    for seq, item in enumerate(parsed.messages):
        message = Message.objects.create(
            room=room,
            seq=seq,
            kind=Message.Kind.HUMAN if item.is_user else Message.Kind.CHARACTER,
            author=host if item.is_user else None,
            seat=None if item.is_user else seat,
            speaker_name=item.name or (character.name if not item.is_user else host.get_username()),
            hidden=item.hidden,
            active_index=item.swipe_id,
        )
        if item.send_date:
            Message.objects.filter(pk=message.pk).update(created_at=item.send_date)
        model = str(item.extra.get("model") or "")
        for index, text in enumerate(item.swipes):
            variants.append(
                Variant(
                    message=message, room=room, index=index, text=text, tokens=tokens.count(text), model=model
                )
            )
    Variant.objects.bulk_create(variants, batch_size=500)
    room.next_seq = len(parsed.messages)
    room.last_activity = timezone.now()
    room.save(update_fields=["next_seq", "last_activity"])
    return room, parsed.problems


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
