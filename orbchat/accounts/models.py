from __future__ import annotations

from django.contrib.auth.models import AbstractUser
from django.db import models
from django.db.models import Q


class User(AbstractUser):
    class Role(models.TextChoices):
        OWNER = "owner", "Owner"
        ADMIN = "admin", "Admin"
        USER = "user", "User"

    role = models.CharField(max_length=8, choices=Role.choices, default=Role.USER)
    remember_long_chats = models.BooleanField(
        "Remember earlier in long chats",
        default=True,
        help_text="Summarise older messages of the chats you host and recall them when they matter.",
    )

    class Meta(AbstractUser.Meta):
        constraints = [
            # Exactly one owner: the database refuses a second, even from two racing setups.
            models.UniqueConstraint(
                fields=["role"], condition=Q(role="owner"), name="accounts_user_single_owner"
            ),
        ]

    @property
    def is_owner(self) -> bool:
        return self.role == self.Role.OWNER

    @property
    def can_manage_users(self) -> bool:
        return self.role in (self.Role.OWNER, self.Role.ADMIN)
