from __future__ import annotations

from django.contrib.auth.models import AbstractUser
from django.db import models
from django.db.models import Q


class User(AbstractUser):
    class Role(models.TextChoices):
        OWNER = "owner", "Owner"
        ADMIN = "admin", "Admin"
        USER = "user", "User"

    class Theme(models.TextChoices):
        SYSTEM = "system", "As the device is set"
        LIGHT = "light", "Light"
        DARK = "dark", "Dark"

    class TextSize(models.TextChoices):
        SMALL = "small", "Small"
        NORMAL = "normal", "Normal"
        LARGE = "large", "Large"
        LARGER = "larger", "Larger"

    role = models.CharField(max_length=8, choices=Role.choices, default=Role.USER)
    remember_long_chats = models.BooleanField(
        "Remember earlier in long chats",
        default=True,
        help_text="Summarise older messages of the chats you host and recall them when they matter.",
    )
    theme = models.CharField(max_length=8, choices=Theme.choices, default=Theme.SYSTEM)
    text_size = models.CharField(max_length=8, choices=TextSize.choices, default=TextSize.NORMAL)
    # SillyTavern's global variables ({{setglobalvar}} and the rest) in the chats this person hosts.
    variables = models.JSONField(default=dict, blank=True)
    enter_sends_on_phone = models.BooleanField(
        "Enter sends on a phone",
        default=False,
        help_text="Off: on a phone Enter starts a new line and Ctrl+Enter (or the Send button) sends.",
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


class AccessToken(models.Model):
    """A personal access token: a script or app acting as its user on the API.

    Only a hash of the token is kept; the token itself is shown once, when it is made. `prefix`
    (its first characters) tells tokens apart in lists without revealing them.
    """

    PREFIX_LENGTH = 8

    user = models.ForeignKey(User, on_delete=models.CASCADE, related_name="access_tokens")
    name = models.CharField(max_length=100)
    prefix = models.CharField(max_length=PREFIX_LENGTH)
    hashed = models.CharField("SHA-256 of the token", max_length=64, unique=True)
    created_at = models.DateTimeField(auto_now_add=True)
    last_used_at = models.DateTimeField(null=True, blank=True)
    revoked_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"

    @property
    def revoked(self) -> bool:
        return self.revoked_at is not None
