"""Writes to accounts. Every change to a user goes through one of these."""

from __future__ import annotations

from django.core.exceptions import PermissionDenied, ValidationError
from django.db import IntegrityError, transaction

from orbchat.accounts.models import User
from orbchat.library import services as library_services


class SetupAlreadyDone(Exception):
    """The owner account exists; first-run setup cannot run again."""


@transaction.atomic
def owner_create(*, username: str, password: str) -> User:
    """Create the owner: the first account, with every right, only while none exists."""
    if User.objects.select_for_update().exists():
        raise SetupAlreadyDone
    try:
        with transaction.atomic():
            owner = User.objects.create_user(
                username=username,
                password=password,
                role=User.Role.OWNER,
                is_staff=True,
                is_superuser=True,
            )
    except IntegrityError as exc:  # a second setup racing this one got there first
        raise SetupAlreadyDone from exc
    library_services.starter_pack_install(owner=owner)
    return owner


@transaction.atomic
def user_create(*, actor: User, username: str, password: str, role: str) -> User:
    """Create an account on behalf of the owner or an admin."""
    if not actor.can_manage_users:
        raise PermissionDenied("Only the owner and admins can create accounts.")
    if role not in (User.Role.ADMIN, User.Role.USER):
        raise ValidationError("A new account is an admin or a user; there is one owner.")
    if role == User.Role.ADMIN and not actor.is_owner:
        raise PermissionDenied("Only the owner can create admins.")
    if User.objects.filter(username__iexact=username).exists():
        raise ValidationError(f"The username {username!r} is taken.")
    user = User.objects.create_user(username=username, password=password, role=role)
    library_services.starter_pack_install(owner=user)
    return user


@transaction.atomic
def user_set_active(*, actor: User, user: User, active: bool) -> User:
    """Deactivate (or reactivate) an account; a deactivated user is signed out everywhere."""
    if not actor.can_manage_users:
        raise PermissionDenied("Only the owner and admins can change accounts.")
    if user.pk == actor.pk:
        raise PermissionDenied("You cannot deactivate your own account.")
    if user.is_owner:
        raise PermissionDenied("The owner's account cannot be deactivated.")
    if user.role == User.Role.ADMIN and not actor.is_owner:
        raise PermissionDenied("Only the owner can change an admin's account.")
    user.is_active = active
    user.save(update_fields=["is_active"])
    return user
