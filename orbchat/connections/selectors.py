"""Reads of a user's model connections and roles."""

from __future__ import annotations

from orbchat.accounts.models import User
from orbchat.connections.models import ModelRoles


def model_roles_get(*, user: User) -> ModelRoles:
    """Return the user's model roles; a user who never saved any gets the defaults (unsaved)."""
    return ModelRoles.objects.filter(user=user).select_related("user").first() or ModelRoles(user=user)


def utility_in_use() -> bool:
    """Whether anyone has a Utility model: memory work will then call models through litellm."""
    return ModelRoles.objects.filter(utility__isnull=False).exists()
