"""Who may do what in a room: checked here for every view and every socket action. Default deny.

Three standings: the host, an active member, and everyone else. Everyone else learns nothing
(404, as if the room did not exist); a member asking for a host-only thing gets 403.
"""

from __future__ import annotations

from django.core.exceptions import PermissionDenied
from django.http import Http404

from rooms.models import Member, Message, Room
from rooms.options import room_options

HOST = "host"
MEMBER = "member"

# Socket actions by who may take them; an action missing here is refused to everyone.
SOCKET_ACTIONS = {
    "send": {HOST, MEMBER},
    "speak": {HOST, MEMBER},  # ask one seated character to answer now
    "impersonate": {HOST, MEMBER},
    "reply": {HOST},
    "regenerate": {HOST},
    "continue": {HOST},
    "stop": {HOST},
    "swipe": {HOST},
    "speak_next": {HOST},
}
# Actions that write to the room, refused by an archived room.
POSTING_ACTIONS = {"send", "speak", "reply", "regenerate", "continue", "swipe", "speak_next"}


def standing(user, room: Room) -> str | None:
    """Return HOST, MEMBER or None for `user` in `room`."""
    if user is None or not user.is_authenticated or not user.is_active:
        return None
    if room.host_id == user.pk:
        return HOST
    if Member.objects.filter(room=room, user=user, state=Member.State.ACTIVE).exists():
        return MEMBER
    return None


def _room(room_id: int) -> Room:
    room = Room.objects.filter(pk=room_id).select_related("host").first()
    if room is None:
        raise Http404("No such room.")
    return room


def room_for_member(user, room_id: int) -> Room:
    """Return the room for its host or an active member; 404 for anyone else."""
    room = _room(room_id)
    if standing(user, room) is None:
        raise Http404("No such room.")
    return room


def room_for_host(user, room_id: int) -> Room:
    """Return the room for its host; 403 for a member, 404 for anyone else."""
    room = _room(room_id)
    who = standing(user, room)
    if who is None:
        raise Http404("No such room.")
    if who != HOST:
        raise PermissionDenied("Only the host can do that.")
    return room


def room_for_memory_reader(user, room_id: int) -> tuple[Room, str]:
    """Return the room and the reader's standing for its Memory panel: the host always, a member
    only when the host lets members read it (403 otherwise), 404 for anyone else."""
    room = _room(room_id)
    who = standing(user, room)
    if who is None:
        raise Http404("No such room.")
    if who != HOST and not room_options(room).members_see_memory:
        raise PermissionDenied("The host keeps this chat's memory private.")
    return room, who


def can_enter(user, room: Room) -> bool:
    return standing(user, room) is not None


def may_act(user, room: Room, action: str) -> bool:
    who = standing(user, room)
    return who is not None and who in SOCKET_ACTIONS.get(action, set())


def ensure_writable(room: Room) -> None:
    """Refuse changes to an archived room (its host left): it is read only for everyone."""
    if room.archived_at:
        raise PermissionDenied("This room is archived: it can be read, not changed.")


def message_for_author_or_host(user, room_id: int, message_id: int) -> Message:
    """Return a message its author (a member) or the host may change; 403/404 otherwise."""
    room = room_for_member(user, room_id)
    ensure_writable(room)
    message = Message.objects.filter(pk=message_id, room=room).select_related("room").first()
    if message is None:
        raise Http404("No such message.")
    if room.host_id != user.pk and message.author_id != user.pk:
        raise PermissionDenied("You can change only your own messages.")
    return message


def message_for_host(user, room_id: int, message_id: int, *, write: bool = True) -> Message:
    room = room_for_host(user, room_id)
    if write:
        ensure_writable(room)
    message = Message.objects.filter(pk=message_id, room=room).select_related("room").first()
    if message is None:
        raise Http404("No such message.")
    return message
