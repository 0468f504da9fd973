"""Who may do what in a room: checked here for every view and every socket action. Default deny."""

from __future__ import annotations

from django.http import Http404

from rooms.models import Room


def room_for_host(user, room_id: int) -> Room:
    """Return the room when `user` hosts it; otherwise 404, never revealing that it exists."""
    if not user.is_authenticated:
        raise Http404("No such room.")
    room = Room.objects.filter(pk=room_id, host=user).select_related("host").first()
    if room is None:
        raise Http404("No such room.")
    return room


def can_enter(user, room: Room) -> bool:
    return user.is_authenticated and user.is_active and room.host_id == user.pk
