"""Rooms: a solo chat is a room with one seated character and its host.

Messages are slots with a monotonically increasing `seq`; variants (swipes) hold the text.
Seats record presence as intervals of `seq` numbers.
"""

from __future__ import annotations

from django.conf import settings as conf
from django.db import models
from django.db.models import Q


class Room(models.Model):
    host = models.ForeignKey(conf.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="hosted_rooms")
    title = models.CharField(max_length=300)
    persona = models.ForeignKey(
        "library.Persona",
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="Locked persona; empty = the host's default persona.",
    )
    preset = models.ForeignKey(
        "library.Preset", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    world_books = models.ManyToManyField("library.WorldBook", blank=True, related_name="rooms")
    # When the current host took the room over (None: its first host). What the turns before
    # it recorded (their exact prompts, their recall) was the previous host's and stays theirs.
    host_since = models.DateTimeField(null=True, blank=True)
    authors_note = models.TextField(blank=True)
    authors_note_depth = models.PositiveSmallIntegerField(default=4)
    authors_note_role = models.CharField(max_length=10, default="system")
    settings = models.JSONField(default=dict, blank=True)
    tags = models.JSONField(default=list, blank=True)
    parent = models.ForeignKey("self", null=True, blank=True, on_delete=models.SET_NULL, related_name="forks")
    forked_at_seq = models.IntegerField(null=True, blank=True)
    # The next message's seq; only ever grows, so a deleted slot's number is never reused.
    next_seq = models.PositiveIntegerField(default=0)
    # World-info timed effects (sticky / cooldown) carried between turns.
    world_info_state = models.JSONField(default=dict, blank=True)
    # What an imported SillyTavern chat's header held (create_date, chat_metadata, other keys),
    # given back on export with what OrbChat uses written over it.
    chat_header = models.JSONField(default=dict, blank=True)
    # The person the host offered the host role to; they become host when they accept.
    host_offer_to = models.ForeignKey(
        conf.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    # Set when the only host left: everyone may still read, nobody may post.
    archived_at = models.DateTimeField(null=True, blank=True)
    last_activity = models.DateTimeField(auto_now_add=True, db_index=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-last_activity", "-pk"]

    def __str__(self) -> str:
        return self.title


class Seat(models.Model):
    room = models.ForeignKey(Room, on_delete=models.CASCADE, related_name="seats")
    character = models.ForeignKey(
        "library.Character", null=True, on_delete=models.SET_NULL, related_name="seats"
    )
    name = models.CharField(max_length=500)
    talkativeness = models.FloatField(default=0.5)
    muted = models.BooleanField(default=False)
    # "Speak next": the seat answers in the next round even when muted, then the flag clears.
    speak_next = models.BooleanField(default=False)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["pk"]

    def __str__(self) -> str:
        return self.name


class Member(models.Model):
    """A person in a room besides its host. Kicked members keep the row so a link cannot re-admit them."""

    class State(models.TextChoices):
        ACTIVE = "active", "Member"
        KICKED = "kicked", "Removed by the host"
        LEFT = "left", "Left"

    room = models.ForeignKey(Room, on_delete=models.CASCADE, related_name="members")
    user = models.ForeignKey(conf.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="memberships")
    persona = models.ForeignKey(
        "library.Persona", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    state = models.CharField(max_length=10, choices=State.choices, default=State.ACTIVE)
    joined_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["joined_at", "pk"]
        constraints = [models.UniqueConstraint(fields=["room", "user"], name="rooms_member_once")]

    def __str__(self) -> str:
        return f"{self.user} in {self.room_id}"


class Invite(models.Model):
    """An invitation: by link (only a hash of its token is stored) or to one named user."""

    room = models.ForeignKey(Room, on_delete=models.CASCADE, related_name="invites")
    created_by = models.ForeignKey(conf.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="+")
    token_hash = models.CharField(max_length=64, unique=True, null=True, blank=True)
    user = models.ForeignKey(
        conf.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.CASCADE, related_name="invitations"
    )
    expires_at = models.DateTimeField(null=True, blank=True)
    max_uses = models.PositiveIntegerField(null=True, blank=True)
    uses = models.PositiveIntegerField(default=0)
    revoked_at = models.DateTimeField(null=True, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-pk"]

    def __str__(self) -> str:
        return f"invite {self.pk} to room {self.room_id}"


class Presence(models.Model):
    """A stretch of messages a seat was present for: [joined_seq, left_seq)."""

    seat = models.ForeignKey(Seat, on_delete=models.CASCADE, related_name="presences")
    joined_seq = models.PositiveIntegerField()
    left_seq = models.PositiveIntegerField(null=True, blank=True)

    class Meta:
        ordering = ["joined_seq"]
        constraints = [
            models.UniqueConstraint(
                fields=["seat"], condition=Q(left_seq__isnull=True), name="rooms_one_open_presence"
            )
        ]

    def __str__(self) -> str:
        end = "" if self.left_seq is None else self.left_seq
        return f"{self.seat_id}: [{self.joined_seq}, {end})"


class Message(models.Model):
    class Kind(models.TextChoices):
        HUMAN = "human", "Human"
        CHARACTER = "character", "Character"

    # No index of its own: the unique (room, seq) index serves every read by room. With a second
    # index on room alone, PostgreSQL holding stale statistics chose it for "the newest messages
    # of this room" and filtered every message of a 100,000-message room by seq.
    room = models.ForeignKey(Room, on_delete=models.CASCADE, related_name="messages", db_index=False)
    seq = models.PositiveIntegerField()
    kind = models.CharField(max_length=10, choices=Kind.choices)
    author = models.ForeignKey(
        conf.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    seat = models.ForeignKey(Seat, null=True, blank=True, on_delete=models.SET_NULL, related_name="messages")
    speaker_name = models.CharField(max_length=500)
    # The persona a person's message was written as: its name is `speaker_name`, its picture the
    # message's avatar, even after its author switches persona. None: a character's message, an
    # imported one, or a persona since deleted (the avatar is then the author's persona now).
    persona = models.ForeignKey(
        "library.Persona", null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    hidden = models.BooleanField(default=False)
    active_index = models.PositiveIntegerField(default=0)
    # The fields of an imported SillyTavern message that have no column here (`extra`,
    # `gen_started`, `force_avatar`, …), given back on export.
    chat_fields = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["seq"]
        constraints = [models.UniqueConstraint(fields=["room", "seq"], name="rooms_message_unique_seq")]

    def __str__(self) -> str:
        return f"#{self.seq} {self.speaker_name}"

    @property
    def is_human(self) -> bool:
        return self.kind == self.Kind.HUMAN


class Variant(models.Model):
    class State(models.TextChoices):
        DONE = "done", "Done"
        STREAMING = "streaming", "Being written"
        STOPPED = "stopped", "Stopped"
        ERROR = "error", "Failed"

    message = models.ForeignKey(Message, on_delete=models.CASCADE, related_name="variants")
    # Denormalised so the database can enforce one generation per room.
    room = models.ForeignKey(Room, on_delete=models.CASCADE, related_name="+")
    index = models.PositiveIntegerField()
    text = models.TextField(blank=True)
    state = models.CharField(max_length=10, choices=State.choices, default=State.DONE)
    model = models.CharField(max_length=300, blank=True)
    tokens = models.PositiveIntegerField(default=0, help_text="Tokens of the text, counted once for prompts.")
    prompt_tokens = models.PositiveIntegerField(null=True, blank=True)
    completion_tokens = models.PositiveIntegerField(null=True, blank=True)
    finish_reason = models.CharField(max_length=40, blank=True)
    error = models.TextField(blank=True)
    # The exact prompt sent (messages, section report, world info): the host's Preview reads it.
    prompt = models.JSONField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True)
    first_token_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    # An imported swipe's SillyTavern `swipe_info` entry, given back on export.
    chat_fields = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["message", "index"]
        constraints = [
            models.UniqueConstraint(fields=["message", "index"], name="rooms_variant_unique_index"),
            models.UniqueConstraint(
                fields=["room"], condition=Q(state="streaming"), name="rooms_one_generation_per_room"
            ),
        ]

    def __str__(self) -> str:
        return f"message {self.message_id} swipe {self.index}"
