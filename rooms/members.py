"""Writes about the people in a room: invites, joining, leaving, kicking, handing off host.

Like `rooms.services`, every change is one atomic function that broadcasts after commit.
"""

from __future__ import annotations

import datetime as dt
import hashlib
import secrets

from django.db import transaction
from django.db.models import F
from django.utils import timezone

from orbchat.accounts.models import User
from rooms import events, signals
from rooms.models import Invite, Member, Room
from rooms.services import ActionRefused


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


@transaction.atomic
def invite_link_create(
    *, room: Room, by: User, expires_in: dt.timedelta | None = None, max_uses: int | None = None
) -> tuple[Invite, str]:
    """Create an invite link; return it with its token, which is shown once and stored only hashed."""
    if room.archived_at:
        raise ActionRefused("This room is archived.")
    if max_uses is not None and max_uses < 1:
        raise ActionRefused("Max uses must be at least 1 (or empty for no limit).")
    token = secrets.token_urlsafe(24)
    invite = Invite.objects.create(
        room=room,
        created_by=by,
        token_hash=token_hash(token),
        expires_at=timezone.now() + expires_in if expires_in else None,
        max_uses=max_uses,
    )
    return invite, token


@transaction.atomic
def invite_user_create(*, room: Room, by: User, username: str) -> Invite:
    """Invite one person by username; it waits on their chat list until they accept or decline."""
    if room.archived_at:
        raise ActionRefused("This room is archived.")
    user = User.objects.filter(username__iexact=username.strip(), is_active=True).first()
    if user is None:
        raise ActionRefused(f"There is no user called {username.strip()!r}.")
    if user.pk == room.host_id:
        raise ActionRefused("That is you, the host.")
    member = Member.objects.filter(room=room, user=user).first()
    if member and member.state == Member.State.ACTIVE:
        raise ActionRefused(f"{user.username} is already in this room.")
    invite = Invite.objects.filter(room=room, user=user, revoked_at__isnull=True).first()
    if invite is None:
        invite = Invite.objects.create(room=room, created_by=by, user=user)
    events.user_notice(user.pk, f"{by.username} invited you to “{room.title}”. See your chat list.")
    return invite


@transaction.atomic
def invite_revoke(*, invite: Invite) -> Invite:
    invite.revoked_at = invite.revoked_at or timezone.now()
    invite.save(update_fields=["revoked_at"])
    return invite


def invite_problem(invite: Invite | None) -> str:
    """Return why an invite cannot be used, in plain words ('' when it can)."""
    if invite is None:
        return "This invitation does not exist or was revoked."
    if invite.revoked_at:
        return "This invitation was revoked."
    if invite.room.archived_at:
        return "This room is archived."
    if invite.expires_at and invite.expires_at <= timezone.now():
        return "This invitation has expired."
    if invite.max_uses is not None and invite.uses >= invite.max_uses:
        return "This invitation has been used up."
    return ""


@transaction.atomic
def invite_accept(*, invite: Invite, user: User) -> Room:
    """Join the room through an invite (a link, or one addressed to `user`)."""
    invite = Invite.objects.select_for_update().select_related("room").get(pk=invite.pk)
    problem = invite_problem(invite)
    if problem:
        raise ActionRefused(problem)
    if invite.user_id is not None and invite.user_id != user.pk:
        raise ActionRefused("This invitation is for someone else.")
    room = invite.room
    if room.host_id == user.pk:
        return room
    member = Member.objects.filter(room=room, user=user).first()
    if member and member.state == Member.State.KICKED:
        raise ActionRefused("The host removed you from this room.")
    if member and member.state == Member.State.ACTIVE:
        return room
    if member:
        member.state = Member.State.ACTIVE
        member.save(update_fields=["state"])
    else:
        Member.objects.create(room=room, user=user)
    Invite.objects.filter(pk=invite.pk).update(uses=F("uses") + 1)
    if invite.user_id is not None:
        Invite.objects.filter(pk=invite.pk).update(revoked_at=timezone.now())
    events.people_changed(room.pk, f"{user.username} joined.")
    return room


@transaction.atomic
def invite_decline(*, invite: Invite, user: User) -> None:
    if invite.user_id != user.pk:
        raise ActionRefused("This invitation is for someone else.")
    invite_revoke(invite=invite)


@transaction.atomic
def member_kick(*, room: Room, user_id: int) -> Member:
    """Remove a member at once: their sockets close and they lose access."""
    member = Member.objects.filter(room=room, user_id=user_id, state=Member.State.ACTIVE).first()
    if member is None:
        raise ActionRefused("That person is not a member of this room.")
    member.state = Member.State.KICKED
    member.save(update_fields=["state"])
    if room.host_offer_to_id == user_id:
        Room.objects.filter(pk=room.pk).update(host_offer_to=None)
    events.member_removed(room.pk, user_id)
    events.people_changed(room.pk, f"{member.user.username} was removed by the host.")
    return member


@transaction.atomic
def member_set_persona(*, room: Room, user: User, persona) -> Member:
    member = Member.objects.get(room=room, user=user, state=Member.State.ACTIVE)
    member.persona = persona
    member.save(update_fields=["persona"])
    return member


@transaction.atomic
def room_leave(*, room: Room, user: User) -> None:
    """Leave the room. When the only host leaves, the room is archived for everyone."""
    if room.host_id == user.pk:
        Room.objects.filter(pk=room.pk).update(archived_at=timezone.now(), host_offer_to=None)
        events.people_changed(room.pk, "The host left; this room is now archived (read only).")
        return
    updated = Member.objects.filter(room=room, user=user, state=Member.State.ACTIVE).update(
        state=Member.State.LEFT
    )
    if updated:
        events.member_removed(room.pk, user.pk)
        events.people_changed(room.pk, f"{user.username} left.")


@transaction.atomic
def host_offer(*, room: Room, user_id: int | None) -> Room:
    """Offer the host role to a member (None withdraws the offer); they must accept."""
    if (
        user_id is not None
        and not Member.objects.filter(room=room, user_id=user_id, state=Member.State.ACTIVE).exists()
    ):
        raise ActionRefused("The host role can be handed only to a member of this room.")
    room.host_offer_to_id = user_id
    room.save(update_fields=["host_offer_to"])
    if user_id is not None:
        events.user_notice(user_id, f"{room.host.username} offers you the host role in “{room.title}”.")
    events.people_changed(room.pk, "")
    return room


@transaction.atomic
def host_accept(*, room: Room, user: User) -> Room:
    """Become host of a room whose host offered it; the old host stays as a member.

    What moves: the room, its messages, seats, author's note and memory (to the new host's
    index, by `signals.room_rehosted`). What stays the old host's: their persona, preset and
    world books (the new host's defaults apply), the private fields of their cards (their
    characters speak from their name alone in the new host's prompts, `rooms.prompting`), and
    the prompts and recall of the turns that ran as them (`host_since`).
    """
    room = Room.objects.select_for_update().get(pk=room.pk)
    if room.host_offer_to_id != user.pk:
        raise ActionRefused("There is no host offer for you in this room.")
    old_host = room.host_id
    member, _ = Member.objects.get_or_create(room=room, user_id=old_host)
    member.state = Member.State.ACTIVE
    member.save(update_fields=["state"])
    Member.objects.filter(room=room, user=user).delete()
    room.host = user
    room.host_offer_to = None
    room.persona = None
    room.preset = None
    room.host_since = timezone.now()
    room.save(update_fields=["host", "host_offer_to", "persona", "preset", "host_since"])
    # The chat's world books were the old host's: they stay in their library, not in this room.
    room.world_books.remove(*room.world_books.exclude(owner=user))
    signals.room_rehosted.send(sender=Room, room_id=room.pk, old_host_id=old_host)
    events.people_changed(room.pk, f"{user.username} is now the host.", reload=True)
    return room
