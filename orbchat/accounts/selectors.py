"""Reads of accounts."""

from __future__ import annotations

from django.db.models import QuerySet

from orbchat.accounts.models import AccessToken, User


def setup_required() -> bool:
    """Return True while no account exists: every page then leads to first-run setup."""
    return not User.objects.exists()


def user_list() -> QuerySet[User]:
    return User.objects.order_by("username")


def token_list(*, user) -> QuerySet[AccessToken]:
    """The user's personal access tokens, newest first, revoked ones included."""
    return AccessToken.objects.filter(user=user).order_by("-created_at", "-pk")
