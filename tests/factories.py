"""Factory functions for test data, built through the same services the app uses."""

from __future__ import annotations

from orbchat.accounts import services
from orbchat.accounts.models import User

PASSWORD = "a long test passphrase"


def make_owner(*, username: str = "owner", password: str = PASSWORD) -> User:
    return services.owner_create(username=username, password=password)


def make_user(
    *, actor: User, username: str = "member", role: str = User.Role.USER, password: str = PASSWORD
) -> User:
    return services.user_create(actor=actor, username=username, password=password, role=role)


def join(room, user) -> None:
    """Make `user` an active member of `room` through an invite link, as a person would."""
    from rooms import members

    invite, _ = members.invite_link_create(room=room, by=room.host)
    members.invite_accept(invite=invite, user=user)


def client_for(user):
    """A Django test client signed in as `user`."""
    from django.test import Client

    client = Client()
    client.force_login(user)
    return client
