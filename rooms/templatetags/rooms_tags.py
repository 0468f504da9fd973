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


@register.inclusion_tag("rooms/_avatar.html")
def character_avatar(character, size: str = "") -> dict:
    """A library character's avatar, as its seat would show it."""
    return {
        "colour": speaker_colour(character.name),
        "initial": speaker_initial(character.name),
        "url": reverse("library:character_avatar", args=[character.pk]) if character.avatar else "",
        "size": size,
    }
