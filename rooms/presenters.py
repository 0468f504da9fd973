"""Turn messages into what templates show; the same code renders pages and socket pushes."""

from __future__ import annotations

from dataclasses import dataclass

from django.template.loader import render_to_string

from rooms.models import Message, Variant
from rooms.rendering import render_message


@dataclass
class MessageView:
    message: Message
    variant: Variant | None
    count: int
    html: str

    @property
    def streaming(self) -> bool:
        return self.variant is not None and self.variant.state == Variant.State.STREAMING


def message_view(message: Message, variants: list[Variant] | None = None) -> MessageView:
    variants = variants if variants is not None else list(message.variants.all())
    active = next(
        (v for v in variants if v.index == message.active_index), variants[-1] if variants else None
    )
    text = active.text if active else ""
    streaming = active is not None and active.state == Variant.State.STREAMING
    return MessageView(
        message=message, variant=active, count=len(variants), html="" if streaming else render_message(text)
    )


def message_html(message: Message) -> str:
    return render_to_string("rooms/_message.html", {"m": message_view(message)})


AT_BEFORE = 10  # messages shown before the one a link lands on


def room_views(room, *, limit: int = 200, at: int | None = None) -> list[MessageView]:
    """Return the newest `limit` messages, oldest first, in two queries; with `at`, the `limit`
    messages starting a few before message `at` instead (a link into the past)."""
    if at is None:
        messages = list(room.messages.order_by("-seq")[:limit])
        messages.reverse()
    else:
        messages = list(room.messages.filter(seq__gte=at - AT_BEFORE).order_by("seq")[:limit])
    by_message: dict[int, list[Variant]] = {}
    for variant in Variant.objects.filter(message__in=messages).order_by("index"):
        by_message.setdefault(variant.message_id, []).append(variant)
    return [message_view(m, by_message.get(m.pk, [])) for m in messages]
