"""What a user brings to a chat: characters, personas, presets and world books."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.db.models import Q


def default_memory_template() -> str:
    return "Past events:\n{{memory}}"


class WorldBook(models.Model):
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="world_books")
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    is_global = models.BooleanField(
        default=False, help_text="Active in every chat of yours, whatever the character."
    )
    scan_depth = models.PositiveSmallIntegerField(default=2)
    token_budget = models.PositiveIntegerField(
        default=0, help_text="Most tokens this book may add to a prompt; 0 = 25 % of the context."
    )
    recursive = models.BooleanField(default=True)
    max_recursion_steps = models.PositiveSmallIntegerField(default=0, help_text="0 = until nothing new.")
    case_sensitive = models.BooleanField(default=False)
    match_whole_words = models.BooleanField(default=True)
    extra = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name", "pk"]

    def __str__(self) -> str:
        return self.name


class WorldEntry(models.Model):
    class Logic(models.IntegerChoices):
        AND_ANY = 0, "AND ANY"
        NOT_ALL = 1, "NOT ALL"
        NOT_ANY = 2, "NOT ANY"
        AND_ALL = 3, "AND ALL"

    class Position(models.IntegerChoices):
        BEFORE_CHAR = 0, "Before the character"
        AFTER_CHAR = 1, "After the character"
        AN_TOP = 2, "Author's note, top"
        AN_BOTTOM = 3, "Author's note, bottom"
        AT_DEPTH = 4, "At depth"
        EXAMPLES_TOP = 5, "Examples, top"
        EXAMPLES_BOTTOM = 6, "Examples, bottom"

    class Role(models.IntegerChoices):
        SYSTEM = 0, "System"
        USER = 1, "User"
        ASSISTANT = 2, "Assistant"

    book = models.ForeignKey(WorldBook, on_delete=models.CASCADE, related_name="entries")
    uid = models.PositiveIntegerField()
    comment = models.TextField(blank=True, help_text="A title for people; not sent.")
    keys = models.JSONField(default=list, blank=True)
    secondary_keys = models.JSONField(default=list, blank=True)
    selective = models.BooleanField(default=True)
    selective_logic = models.PositiveSmallIntegerField(choices=Logic.choices, default=Logic.AND_ANY)
    content = models.TextField(blank=True)
    constant = models.BooleanField(default=False)
    enabled = models.BooleanField(default=True)
    order = models.IntegerField(default=100)
    probability = models.PositiveSmallIntegerField(default=100)
    use_probability = models.BooleanField(default=True)
    position = models.PositiveSmallIntegerField(choices=Position.choices, default=Position.BEFORE_CHAR)
    depth = models.PositiveSmallIntegerField(default=4)
    role = models.PositiveSmallIntegerField(choices=Role.choices, null=True, blank=True)
    group = models.CharField(max_length=200, blank=True)
    group_override = models.BooleanField(default=False)
    group_weight = models.PositiveIntegerField(default=100)
    use_group_scoring = models.BooleanField(null=True, blank=True)
    prevent_recursion = models.BooleanField(default=False)
    exclude_recursion = models.BooleanField(default=False)
    delay_until_recursion = models.PositiveSmallIntegerField(default=0)
    scan_depth = models.PositiveSmallIntegerField(null=True, blank=True)
    case_sensitive = models.BooleanField(null=True, blank=True)
    match_whole_words = models.BooleanField(null=True, blank=True)
    sticky = models.PositiveIntegerField(null=True, blank=True)
    cooldown = models.PositiveIntegerField(null=True, blank=True)
    delay = models.PositiveIntegerField(null=True, blank=True)
    extra = models.JSONField(default=dict, blank=True)

    class Meta:
        ordering = ["book", "order", "uid"]
        constraints = [models.UniqueConstraint(fields=["book", "uid"], name="library_entry_unique_uid")]

    def __str__(self) -> str:
        return self.comment or ", ".join(self.keys) or f"entry {self.uid}"


class Character(models.Model):
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="characters")
    name = models.CharField(max_length=500)
    description = models.TextField(blank=True)
    personality = models.TextField(blank=True)
    scenario = models.TextField(blank=True)
    first_mes = models.TextField("first message", blank=True)
    alternate_greetings = models.JSONField(default=list, blank=True)
    mes_example = models.TextField("example messages", blank=True)
    system_prompt = models.TextField(blank=True)
    post_history_instructions = models.TextField(blank=True)
    creator_notes = models.TextField(blank=True)
    creator = models.TextField(blank=True)
    character_version = models.TextField(blank=True)
    tags = models.JSONField(default=list, blank=True)
    talkativeness = models.FloatField(default=0.5)
    favourite = models.BooleanField(default=False)
    extensions = models.JSONField(default=dict, blank=True)
    # Unknown card fields, kept so an exported card carries everything the imported one had.
    extra = models.JSONField(default=dict, blank=True)
    avatar = models.FileField(upload_to="avatars/characters/", blank=True)
    world_books = models.ManyToManyField(WorldBook, blank=True, related_name="characters")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-favourite", "name", "pk"]

    def __str__(self) -> str:
        return self.name

    def _v3(self, key: str):
        data = self.extra.get("data") if isinstance(self.extra, dict) else None
        return data.get(key) if isinstance(data, dict) else None

    @property
    def nickname(self) -> str:
        """The card's V3 nickname: what {{char}} becomes, when set."""
        value = self._v3("nickname")
        return value.strip() if isinstance(value, str) else ""

    @property
    def macro_name(self) -> str:
        """The name {{char}} stands for: the nickname when the card has one, else the name."""
        return self.nickname or self.name

    @property
    def group_only_greetings(self) -> list[str]:
        """The card's V3 greetings offered only in rooms with several characters."""
        value = self._v3("group_only_greetings")
        return [g for g in value if isinstance(g, str) and g.strip()] if isinstance(value, list) else []

    @property
    def creator_notes_multilingual(self) -> dict[str, str]:
        """The card's V3 creator notes by language code ({"fr": "..."})."""
        value = self._v3("creator_notes_multilingual")
        if not isinstance(value, dict):
            return {}
        return {str(k).lower(): v for k, v in value.items() if isinstance(v, str) and v.strip()}

    def creator_notes_for(self, languages: list[str]) -> str:
        """The creator notes in the first of `languages` ("fr", "pt-BR") the card has, each also
        tried as its base language ("pt"); else `creator_notes`."""
        notes = self.creator_notes_multilingual
        for language in languages:
            code = language.lower().replace("_", "-")
            found = notes.get(code) or notes.get(code.split("-")[0])
            if found:
                return found
        return self.creator_notes

    @property
    def depth_prompt(self) -> tuple[str, int, str] | None:
        """The Character's Note (`extensions.depth_prompt`): (text, depth, role), or None when empty.

        As SillyTavern reads it: the text trimmed, depth 4 and role "system" when missing.
        """
        value = self.extensions.get("depth_prompt") if isinstance(self.extensions, dict) else None
        if not isinstance(value, dict) or not isinstance(value.get("prompt"), str):
            return None
        text = value["prompt"].strip()
        if not text:
            return None
        depth = value.get("depth")
        depth = depth if isinstance(depth, int) and not isinstance(depth, bool) and depth >= 0 else 4
        role = value.get("role") if value.get("role") in ("system", "user", "assistant") else "system"
        return text, depth, role


class CharacterAsset(models.Model):
    """A file a CHARX card carried beside its card.json, kept under its path in the archive."""

    character = models.ForeignKey(Character, on_delete=models.CASCADE, related_name="assets")
    path = models.CharField(max_length=500)
    file = models.FileField(upload_to="assets/characters/")
    # The file the character's avatar was made from; replacing the avatar drops it.
    is_avatar = models.BooleanField(default=False)

    class Meta:
        ordering = ["pk"]
        constraints = [models.UniqueConstraint(fields=["character", "path"], name="asset_path_unique")]

    def __str__(self) -> str:
        return self.path


class Persona(models.Model):
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="personas")
    name = models.CharField(max_length=200)
    description = models.TextField(blank=True)
    avatar = models.FileField(upload_to="avatars/personas/", blank=True)
    is_default = models.BooleanField(default=False)
    world_books = models.ManyToManyField(WorldBook, blank=True, related_name="personas")
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["-is_default", "name", "pk"]
        constraints = [
            models.UniqueConstraint(
                fields=["owner"], condition=Q(is_default=True), name="library_one_default_persona"
            )
        ]

    def __str__(self) -> str:
        return self.name


class Preset(models.Model):
    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="presets")
    name = models.CharField(max_length=200)
    # Ordered prompt sections: literal text or markers (see orbchat.library.presets).
    sections = models.JSONField(default=list)
    memory_template = models.TextField(default=default_memory_template)
    temperature = models.FloatField(default=1.0)
    top_p = models.FloatField(default=1.0)
    top_k = models.PositiveIntegerField(default=0)
    min_p = models.FloatField(default=0.0)
    frequency_penalty = models.FloatField(default=0.0)
    presence_penalty = models.FloatField(default=0.0)
    repetition_penalty = models.FloatField(default=1.0)
    max_tokens = models.PositiveIntegerField(default=400)
    context_size = models.PositiveIntegerField(
        null=True, blank=True, help_text="Tokens; empty = the model's own context size."
    )
    stop = models.JSONField(default=list, blank=True)
    seed = models.BigIntegerField(null=True, blank=True)
    extra = models.JSONField(default=dict, blank=True)
    # The file an imported preset came from (see orbchat.interop.presets): its format, its keys, its
    # samplers as written, and every sampler as saved at import; empty for a preset made in OrbChat.
    source = models.JSONField(default=dict, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name", "pk"]

    def __str__(self) -> str:
        return self.name


class SillyTavernTemplate(models.Model):
    """A SillyTavern file kept as it came (`data`), so an export gives every field back."""

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE)
    name = models.CharField(max_length=200)
    data = models.JSONField(default=dict)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        abstract = True
        ordering = ["name", "pk"]

    def __str__(self) -> str:
        return self.name


class InstructTemplate(SillyTavernTemplate):
    """Sequences that wrap each message for a text-completion model (`input_sequence`, ...)."""

    class Meta(SillyTavernTemplate.Meta):
        default_related_name = "instruct_templates"


class ContextTemplate(SillyTavernTemplate):
    """How a text-completion prompt opens (`story_string`, `example_separator`, `chat_start`)."""

    class Meta(SillyTavernTemplate.Meta):
        default_related_name = "context_templates"


class SystemPrompt(SillyTavernTemplate):
    """A named system prompt (`name`, `content`)."""

    class Meta(SillyTavernTemplate.Meta):
        default_related_name = "system_prompts"
