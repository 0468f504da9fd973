"""Template tags of rooms for pages that show who is in a chat (the chat list)."""

from __future__ import annotations

from django import template
from django.urls import reverse

from rooms.presenters import speaker_colour, speaker_initial

register = template.Library()


@register.inclusion_tag("rooms/_avatar.html")
def seat_avatar(seat, size: str = "") -> dict:
    """A seated character's avatar: the card's picture over the initial on the speaker's colour."""
    return {
        "colour": speaker_colour(seat.name),
        "initial": speaker_initial(seat.name),
        "url": reverse("rooms:seat_avatar", args=[seat.room_id, seat.pk]),
        "size": size,
    }
