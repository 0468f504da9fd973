"""Memory: tiered summaries of a room's older messages, lasting facts, the tuning that shapes them,
index state."""

from __future__ import annotations

from django.conf import settings as conf
from django.core.exceptions import ValidationError
from django.core.validators import MaxValueValidator, MinValueValidator
from django.db import models

from memory.recall import fact_recall
from memory.recall.ranking import ADDED_TIER, place_label, span_label

SHARED = "shared"
DEFAULT_PRIORITY = ", ".join(fact_recall.PRIORITY_NAMES)


def validate_priority(value: str) -> None:
    try:
        fact_recall.parse_priority(value)
    except ValueError as exc:
        raise ValidationError(str(exc)) from exc


def seat_scope(seat_id: int) -> str:
    return f"seat-{seat_id}"


class MemoryTuning(models.Model):
    """The one row of memory settings (owner and admins change it). Changes apply to new work."""

    class Mode(models.TextChoices):
        MIXC = "mixC", "Sharper semantic recall (default)"
        SEMANTIC = "semantic", "Semantic (no rerank)"
        CHRONOLOGICAL = "chronological", "Chronological (no search)"
        OFF = "off", "Off"

    class RunMode(models.TextChoices):
        AUTOMATIC = "automatic", "Automatic (after each reply)"
        ASK = "ask", "Ask first"
        MANUAL = "manual", "Manual"

    enabled = models.BooleanField("Memory on", default=True)
    block_size = models.PositiveSmallIntegerField(
        default=8, validators=[MinValueValidator(2), MaxValueValidator(64)], help_text="Messages per summary."
    )
    fresh_window = models.PositiveSmallIntegerField(
        default=8,
        validators=[MinValueValidator(0), MaxValueValidator(200)],
        help_text="The newest messages, never summarised.",
    )
    fan_in = models.PositiveSmallIntegerField(
        "Roll-up fan-in",
        default=4,
        validators=[MinValueValidator(2), MaxValueValidator(16)],
        help_text="Summaries combined into one of the next tier.",
    )
    max_tier = models.PositiveSmallIntegerField(
        "Deepest tier", default=3, validators=[MinValueValidator(0), MaxValueValidator(5)]
    )
    mode = models.CharField("Recall mode", max_length=16, choices=Mode.choices, default=Mode.MIXC)
    query_window = models.PositiveSmallIntegerField(
        default=2,
        validators=[MinValueValidator(1), MaxValueValidator(20)],
        help_text="Messages in the query.",
    )
    candidates = models.PositiveSmallIntegerField(
        default=8,
        validators=[MinValueValidator(1), MaxValueValidator(100)],
        help_text="Sent to the reranker.",
    )
    keep = models.PositiveSmallIntegerField(
        default=3, validators=[MinValueValidator(1), MaxValueValidator(50)], help_text="Recalled per reply."
    )
    score_floor = models.FloatField(
        default=0.35,
        validators=[MinValueValidator(0.0), MaxValueValidator(1.0)],
        help_text="Cosine similarity a summary needs (unless a keyword matches).",
    )
    keyword_match = models.BooleanField(default=True, help_text="A keyword in the recent messages qualifies.")
    quotes_on = models.BooleanField(
        "Quotes", default=True, help_text="Also bring back short passages of scrolled-out messages."
    )
    quotes = models.PositiveSmallIntegerField(
        "Quotes per reply",
        default=4,
        validators=[MinValueValidator(0), MaxValueValidator(4)],
        help_text="At most this many (0–4); after the summaries in the memory budget.",
    )
    facts_per_reply = models.PositiveSmallIntegerField(
        "Facts per reply",
        default=24,
        validators=[MinValueValidator(0), MaxValueValidator(50)],
        help_text="Lasting facts recalled by relevance (0–50); pinned and yours ones come on top.",
    )
    budget_priority = models.CharField(
        "Memory budget order",
        max_length=80,
        default=DEFAULT_PRIORITY,
        validators=[validate_priority],
        help_text="What fills the memory budget first: all six of " + DEFAULT_PRIORITY + ", in any order.",
    )
    heading = models.CharField(max_length=100, default="Past events")
    budget_share = models.FloatField(
        "Memory budget",
        default=0.25,
        validators=[MinValueValidator(0.01), MaxValueValidator(0.9)],
        help_text="Share of the context all memory text may take.",
    )
    custom_prompts = models.JSONField(
        default=dict,
        blank=True,
        help_text="The host's own Utility prompts by kind (memory.prompts.KINDS); a kind left out uses "
        "the built-in prompt. Edited and validated in Memory tuning.",
    )
    facts_max = models.PositiveSmallIntegerField(
        "Facts kept",
        default=200,
        validators=[MinValueValidator(10), MaxValueValidator(2000)],
        help_text="Active facts per memory set; beyond it the least important unpinned ones are "
        "forgotten (restorable).",
    )
    facts_hot_tokens = models.PositiveIntegerField(
        "Hot facts budget",
        default=1500,
        validators=[MinValueValidator(100), MaxValueValidator(20000)],
        help_text="Tokens the hot facts of one memory set may take; the least important beyond it turn "
        "cold (kept, recalled only when clearly relevant).",
    )
    run_solo = models.CharField(
        "Memory work in solo chats",
        max_length=10,
        choices=RunMode.choices,
        default=RunMode.AUTOMATIC,
        help_text="When summaries are written: after each reply, once the host says so, or only on request.",
    )
    run_group = models.CharField(
        "Memory work in group chats",
        max_length=10,
        choices=RunMode.choices,
        default=RunMode.AUTOMATIC,
        help_text="The same for chats with several characters or other people in them.",
    )
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        verbose_name = "memory tuning"
        verbose_name_plural = "memory tuning"

    def __str__(self) -> str:
        return "Memory tuning"


MAX_MEMORY_TEXT = 2000  # characters a person may write into one memory (added or edited)


class Summary(models.Model):
    """One memory: a block of messages (tier 0), a roll-up of summaries (tier 1+), or one a person
    added (tier ADDED: outside the block grid, so no tier arithmetic ever reaches it).

    Pinned and person-written memories are sent with every reply, whole, ahead of recalled ones.
    """

    ADDED = ADDED_TIER

    class Source(models.TextChoices):
        UTILITY = "utility", "Utility model"
        EXTRACTIVE = "extractive", "Built-in extractive"
        PERSON = "person", "Yours"

    room = models.ForeignKey("rooms.Room", on_delete=models.CASCADE, related_name="summaries")
    # "shared", or "seat-<id>": one character's personal set (only blocks it witnessed).
    scope = models.CharField(max_length=24, default=SHARED)
    tier = models.PositiveSmallIntegerField()
    block = models.PositiveIntegerField()
    # Always set for tier summaries; an added memory may be tied to no messages (both None).
    seq_from = models.PositiveIntegerField(null=True, blank=True, help_text="First message covered.")
    seq_to = models.PositiveIntegerField(null=True, blank=True, help_text="Last message covered.")
    heading = models.CharField(max_length=300, blank=True)
    facts = models.JSONField(default=list, blank=True)
    keywords = models.JSONField(default=list, blank=True)
    text = models.TextField(help_text="The text as injected into a prompt.")
    source = models.CharField(max_length=10, choices=Source.choices)
    model = models.CharField(max_length=300, blank=True)
    # A hash of what the summary was written from: the next run skips it while that is unchanged.
    input_hash = models.CharField(max_length=64, blank=True)
    stale = models.BooleanField(default=False)
    pinned = models.BooleanField(default=False)
    last_recalled_at = models.DateTimeField(null=True, blank=True)
    # The hash of `text` (written with it) and of `text` as last embedded into the vector index
    # ("" = not indexed yet): "what changed since indexing" is then a filter in the database.
    text_hash = models.CharField(max_length=64, blank=True)
    indexed_hash = models.CharField(max_length=64, blank=True)
    first_at = models.DateTimeField(null=True, blank=True)
    last_at = models.DateTimeField(null=True, blank=True)
    # A tier-0 summary's `input_hash` when the memory manager last read its messages for facts
    # ("" = not yet): the cycle reads a block again only when its messages changed.
    manager_hash = models.CharField(max_length=64, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["room", "scope", "tier", "block"]
        constraints = [
            models.UniqueConstraint(fields=["room", "scope", "tier", "block"], name="memory_summary_once")
        ]
        indexes = [models.Index(fields=["room", "scope", "tier", "seq_from"])]
        verbose_name_plural = "summaries"

    def __str__(self) -> str:
        return self.label

    @property
    def added(self) -> bool:
        return self.tier == self.ADDED

    @property
    def yours(self) -> bool:
        return self.source == self.Source.PERSON

    @property
    def span_label(self) -> str:
        return span_label(self.seq_from, self.seq_to)

    @property
    def label(self) -> str:
        return place_label(self.tier, self.block, self.seq_from, self.seq_to)


class SummaryKeyword(models.Model):
    """One word of one of a summary's keywords: finds summaries by a word of the recent messages
    with one indexed lookup, however long the chat."""

    summary = models.ForeignKey(Summary, on_delete=models.CASCADE, related_name="keyword_words")
    room = models.ForeignKey("rooms.Room", on_delete=models.CASCADE, related_name="+")
    word = models.CharField(max_length=100)  # casefolded
    keyword = models.CharField(max_length=200)  # the whole keyword, as written

    class Meta:
        indexes = [models.Index(fields=["room", "word"])]

    def __str__(self) -> str:
        return self.word


class Scene(models.Model):
    """A transcript chunk (one block's messages, speaker-labelled) in the `scenes` index."""

    room = models.ForeignKey("rooms.Room", on_delete=models.CASCADE, related_name="scenes")
    block = models.PositiveIntegerField()
    seq_from = models.PositiveIntegerField()
    seq_to = models.PositiveIntegerField()
    text_hash = models.CharField(max_length=64)
    indexed_hash = models.CharField(max_length=64, blank=True)
    first_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["room", "block"]
        constraints = [models.UniqueConstraint(fields=["room", "block"], name="memory_scene_once")]

    def __str__(self) -> str:
        return f"room {self.room_id} scene {self.block}"


MAX_FACT_TEXT = 300  # characters of one fact


class Fact(models.Model):
    """One lasting fact of a room (a promise, a relationship, a goal…), kept apart from the
    summaries and corrected rather than duplicated: a correction is a new fact, and the old one
    stays, superseded, pointing at it.

    Scopes and presence are those of summaries: "shared", or "seat-<id>" (one character's own
    under personal memory). A fact a person wrote or edited ("Yours") is never changed by the
    memory cycle.
    """

    class Category(models.TextChoices):
        PROMISE = "promise", "Promise"
        RELATIONSHIP = "relationship", "Relationship"
        DISCOVERY = "discovery", "Discovery"
        GOAL = "goal", "Goal"
        CONDITION = "condition", "Condition"
        PREFERENCE = "preference", "Preference"
        TRAIT = "trait", "Trait"
        EVENT = "event", "Event"

    class Status(models.TextChoices):
        ACTIVE = "active", "Active"
        SUPERSEDED = "superseded", "Corrected"
        FORGOTTEN = "forgotten", "Forgotten"

    class Source(models.TextChoices):
        MODEL = "model", "Utility model"
        EXTRACTOR = "extractor", "Built-in extractor"
        PERSON = "person", "Yours"

    room = models.ForeignKey("rooms.Room", on_delete=models.CASCADE, related_name="facts")
    scope = models.CharField(max_length=24, default=SHARED)
    text = models.CharField(max_length=MAX_FACT_TEXT)
    category = models.CharField(max_length=16, choices=Category.choices)
    subjects = models.JSONField(default=list, blank=True, help_text="The named people and things.")
    confidence = models.FloatField(default=1.0, validators=[MinValueValidator(0.0), MaxValueValidator(1.0)])
    # The messages it came from; a person's own fact may be tied to none (both None).
    first_seq = models.PositiveIntegerField(null=True, blank=True)
    last_seq = models.PositiveIntegerField(null=True, blank=True)
    status = models.CharField(max_length=12, choices=Status.choices, default=Status.ACTIVE)
    superseded_by = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="supersedes"
    )
    source = models.CharField(max_length=10, choices=Source.choices)
    pinned = models.BooleanField(default=False)
    heat = models.FloatField(default=1.0, validators=[MinValueValidator(0.0), MaxValueValidator(1.0)])
    access_count = models.PositiveIntegerField(default=0)
    last_used_at = models.DateTimeField(null=True, blank=True)
    # `write_key` hashes the text as its writer first gave it (casefolded, spaces collapsed) and
    # never changes: the memory cycle re-running a stretch finds the fact even after a person
    # rewrote it, and writes nothing. `text_hash` is of the current text, `indexed_hash` of the
    # text as last embedded ("" = not in the vector index).
    write_key = models.CharField(max_length=64)
    text_hash = models.CharField(max_length=64)
    indexed_hash = models.CharField(max_length=64, blank=True)
    # The person who last changed it (wrote, edited, pinned, forgot, restored); None: the memory cycle.
    changed_by = models.ForeignKey(
        conf.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["room", "pk"]
        constraints = [
            models.UniqueConstraint(
                fields=["room", "scope", "write_key", "first_seq", "last_seq"], name="memory_fact_once"
            ),
            models.CheckConstraint(
                condition=models.Q(confidence__gte=0.0, confidence__lte=1.0), name="memory_fact_confidence"
            ),
            models.CheckConstraint(condition=models.Q(heat__gte=0.0, heat__lte=1.0), name="memory_fact_heat"),
            models.CheckConstraint(
                condition=models.Q(first_seq__isnull=True, last_seq__isnull=True)
                | models.Q(
                    first_seq__isnull=False, last_seq__isnull=False, first_seq__lte=models.F("last_seq")
                ),
                name="memory_fact_range",
            ),
        ]
        indexes = [
            models.Index(fields=["room", "status"]),
            models.Index(fields=["room", "category"]),
            models.Index(fields=["room", "scope", "status"]),
        ]

    def __str__(self) -> str:
        return self.text

    @property
    def yours(self) -> bool:
        return self.source == self.Source.PERSON


class RoomMemory(models.Model):
    """Per-room memory state: the last problem, a backfill's progress, the "Ask first" batches."""

    class Backfill(models.TextChoices):
        IDLE = "idle", "Idle"
        QUEUED = "queued", "Queued"
        RUNNING = "running", "Running"
        CANCELLED = "cancelled", "Cancelled"
        DONE = "done", "Done"

    room = models.OneToOneField("rooms.Room", on_delete=models.CASCADE, related_name="memory_state")
    last_error = models.TextField(blank=True)
    last_run_at = models.DateTimeField(null=True, blank=True)
    backfill = models.CharField(max_length=10, choices=Backfill.choices, default=Backfill.IDLE)
    backfill_done = models.PositiveIntegerField(default=0)
    backfill_total = models.PositiveIntegerField(default=0)
    # Written every few seconds by the running backfill: a stale one means its worker is gone.
    backfill_beat_at = models.DateTimeField(null=True, blank=True)
    # [scope, tier, block] of summaries a person forgot: never written again automatically
    # (the stretch stays uncovered until "Rebuild").
    forgotten = models.JSONField(default=list, blank=True)
    # The room's one current scene note ({"where", "who", "when", "open_threads"}; {} = none yet),
    # who wrote it last ("reader", "model" or "person") and the last message it has read.
    scene_note = models.JSONField(default=dict, blank=True)
    scene_note_source = models.CharField(max_length=8, blank=True)
    scene_note_seq = models.IntegerField(default=-1)
    scene_note_at = models.DateTimeField(null=True, blank=True)
    # When the memory cycle last cooled the room's facts: a fact recalled since then keeps its heat.
    facts_cycle_at = models.DateTimeField(null=True, blank=True)
    # "Ask first": the last message of the batch the host was last asked about (asked once per
    # batch), and of the batch they skipped (not asked again until a later batch is due).
    asked_to_seq = models.IntegerField(default=-1)
    skipped_to_seq = models.IntegerField(default=-1)
    updated_at = models.DateTimeField(auto_now=True)

    def __str__(self) -> str:
        return f"memory of room {self.room_id}"


class VectorIndex(models.Model):
    """One generation of a host's vectors, made with one embedding model.

    Changing the Text-embedding model starts a new generation (new collections); recall keeps
    using the newest *ready* one until the new one is complete.
    """

    class State(models.TextChoices):
        BUILDING = "building", "Building"
        READY = "ready", "Ready"
        RETIRED = "retired", "Retired"

    user = models.ForeignKey(conf.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="vector_indexes")
    model_key = models.CharField(max_length=200)
    state = models.CharField(max_length=10, choices=State.choices, default=State.BUILDING)
    done = models.PositiveIntegerField(default=0)
    total = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)
    finished_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        ordering = ["-created_at", "-pk"]

    def __str__(self) -> str:
        return f"{self.user} · {self.model_key} ({self.state})"

    def collection(self, kind: str) -> str:
        """Return the Chroma collection name for `kind` ("memories", "scenes", "turns" or "facts")."""
        return f"{kind}-i{self.pk}"


class RecallLog(models.Model):
    """What recall did for one reply: the count everyone sees, the detail only the host reads."""

    room = models.ForeignKey("rooms.Room", on_delete=models.CASCADE, related_name="recall_logs")
    variant = models.ForeignKey(
        "rooms.Variant", on_delete=models.SET_NULL, null=True, blank=True, related_name="recall_logs"
    )
    speaker = models.CharField(max_length=200, blank=True)
    state = models.CharField(max_length=8)  # "off" | "done"
    mode = models.CharField(max_length=16)
    count = models.PositiveSmallIntegerField(default=0)
    # Query, pool size, live start, kept (with scores and text), a sample of the rejected with reasons.
    detail = models.JSONField(default=dict)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-created_at", "-pk"]
        indexes = [models.Index(fields=["room", "-created_at"])]

    def __str__(self) -> str:
        return f"recall in room {self.room_id}: {self.count}"
