"""Writes to accounts. Every change to a user goes through one of these."""

from __future__ import annotations

import datetime as dt
import hashlib
import secrets
from importlib import import_module

from django.conf import settings
from django.contrib.auth import SESSION_KEY
from django.core.exceptions import PermissionDenied, ValidationError
from django.db import IntegrityError, transaction
from django.utils import timezone

from orbchat.accounts.models import AccessToken, User
from orbchat.accounts.signals import user_deactivated
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
def user_appearance_set(*, user: User, theme: str, text_size: str, enter_sends_on_phone: bool) -> User:
    """Store how the site looks for `user` (theme, text size) and how their phone composer sends."""
    if theme not in User.Theme.values or text_size not in User.TextSize.values:
        raise ValidationError("Unknown theme or text size.")
    user.theme, user.text_size, user.enter_sends_on_phone = theme, text_size, enter_sends_on_phone
    user.save(update_fields=["theme", "text_size", "enter_sends_on_phone"])
    return user


@transaction.atomic
def user_variables_set(*, user_id: int, variables: dict) -> None:
    """Keep the global variables ({{setglobalvar}} ...) the chats this person hosts have set."""
    User.objects.filter(pk=user_id).update(variables=variables)


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
    """Deactivate (or reactivate) an account; a deactivated user is signed out everywhere.

    Deactivating ends every session of theirs (so reactivating later does not revive one) and,
    on commit, closes their open sockets (`user_deactivated`).
    """
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
    if not active:
        _sessions_end(user)
        user_deactivated.send(sender=User, user=user)
    return user


def _sessions_end(user: User) -> None:
    """Delete every stored session signed in as `user`.

    Sessions kept only in a cookie or a cache cannot be listed; those still stop working, as
    the sign-in check refuses an inactive account.
    """
    store = import_module(settings.SESSION_ENGINE).SessionStore
    if not hasattr(store, "get_model_class"):
        return
    sessions = store.get_model_class().objects.filter(expire_date__gt=timezone.now())
    for session in sessions.iterator():
        if session.get_decoded().get(SESSION_KEY) == str(user.pk):
            store(session_key=session.session_key).delete()


# Personal access tokens ------------------------------------------------------------------------

TOKEN_NAME_MAX = AccessToken._meta.get_field("name").max_length
# A token's last use is written at most this often: a busy script does not write on every call.
TOKEN_TOUCH_EVERY = dt.timedelta(minutes=1)


def token_hash(token: str) -> str:
    return hashlib.sha256(token.encode()).hexdigest()


@transaction.atomic
def token_create(*, user: User, name: str) -> tuple[AccessToken, str]:
    """Make a personal access token for `user`; return its row and the token, which is shown once
    and stored only hashed."""
    name = (name or "").strip()
    if not name:
        raise ValidationError("Give the token a name, to tell it apart later.")
    if len(name) > TOKEN_NAME_MAX:
        raise ValidationError(f"A token's name holds at most {TOKEN_NAME_MAX} characters.")
    plaintext = secrets.token_urlsafe(32)
    row = AccessToken.objects.create(
        user=user, name=name, prefix=plaintext[: AccessToken.PREFIX_LENGTH], hashed=token_hash(plaintext)
    )
    return row, plaintext


@transaction.atomic
def token_revoke(*, user: User, token_id: int) -> AccessToken:
    """Revoke one of `user`'s tokens for good (revoking twice keeps the first time).

    Raises AccessToken.DoesNotExist for a token that is not theirs."""
    row = AccessToken.objects.select_for_update().get(pk=token_id, user=user)
    if row.revoked_at is None:
        row.revoked_at = timezone.now()
        row.save(update_fields=["revoked_at"])
    return row


def token_authenticate(*, plaintext: str) -> User | None:
    """Return the active user a live token acts as, noting its use; None for any other token."""
    if not plaintext:
        return None
    row = (
        AccessToken.objects.filter(hashed=token_hash(plaintext), revoked_at=None, user__is_active=True)
        .select_related("user")
        .first()
    )
    if row is None:
        return None
    now = timezone.now()
    if row.last_used_at is None or now - row.last_used_at >= TOKEN_TOUCH_EVERY:
        AccessToken.objects.filter(pk=row.pk).update(last_used_at=now)
    return row.user
