"""Rooms' part of news from the accounts below: a deactivated person's sockets close."""

from __future__ import annotations

from django.dispatch import receiver

from orbchat.accounts.signals import user_deactivated
from rooms import events
from rooms.models import Member, Room


@receiver(user_deactivated)
def close_sockets_of_deactivated(sender, *, user, **kwargs) -> None:
    """Close the person's sockets to every room they host or belong to, and their site sockets."""
    hosted = Room.objects.filter(host=user).values_list("pk", flat=True)
    joined = Member.objects.filter(user=user, state=Member.State.ACTIVE).values_list("room_id", flat=True)
    events.account_closed(user.pk, sorted({*hosted, *joined}))
