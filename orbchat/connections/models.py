"""A user's model connections and which connection plays each role."""

from __future__ import annotations

from django.conf import settings
from django.db import models


class Connection(models.Model):
    class Provider(models.TextChoices):
        OPENAI = "openai", "OpenAI"
        ANTHROPIC = "anthropic", "Anthropic"
        OPENROUTER = "openrouter", "OpenRouter"
        GEMINI = "gemini", "Google Gemini"
        OLLAMA = "ollama", "Ollama (local)"
        LOCAL = "local", "OpenAI-compatible server (KoboldCpp, llama.cpp, vLLM, LM Studio)"
        OTHER = "other", "Other litellm model"

    class Api(models.TextChoices):
        CHAT = "chat", "Chat completion (messages)"
        TEXT = "text", "Text completion (one prompt text)"

    class TextBackend(models.TextChoices):
        KOBOLDCPP = "koboldcpp", "KoboldCpp"
        LLAMACPP = "llamacpp", "llama.cpp server"
        TEXTGEN = "textgen", "text-generation-webui"
        VLLM = "vllm", "vLLM or another OpenAI /v1/completions server"

    owner = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="connections")
    name = models.CharField(max_length=200)
    provider = models.CharField(max_length=16, choices=Provider.choices, default=Provider.OTHER)
    model = models.CharField(max_length=300, help_text="A litellm model string, e.g. openai/gpt-4o-mini.")
    api_base = models.URLField(
        blank=True, help_text="For OpenAI-compatible servers, e.g. http://127.0.0.1:5001/v1"
    )
    # Encrypted with a key derived from SECRET_KEY (orbchat.connections.secrets); never rendered.
    api_key_encrypted = models.TextField(blank=True)
    extra_params = models.JSONField(default=dict, blank=True)
    context_size = models.PositiveIntegerField(
        null=True, blank=True, help_text="Tokens; empty = what litellm knows of the model."
    )
    # Text completion: the prompt is one text written with an instruct and a context template.
    api = models.CharField(
        max_length=8,
        choices=Api.choices,
        default=Api.CHAT,
        help_text="Text completion sends one prompt text to /v1/completions (KoboldCpp, llama.cpp, "
        "text-generation-webui, vLLM).",
    )
    text_backend = models.CharField(
        max_length=12,
        choices=TextBackend.choices,
        default=TextBackend.KOBOLDCPP,
        help_text="Which server it is: each names its samplers its own way.",
    )
    # "auto" (by the model's name, when the prompt is built), "bundled:<name>"
    # (orbchat.prompting.formats) or "mine:<id>" (an imported template); "" = none.
    instruct_template = models.CharField(max_length=220, blank=True, default="auto")
    context_template = models.CharField(max_length=220, blank=True, default="auto")
    system_prompt = models.CharField(max_length=220, blank=True)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["name", "pk"]

    def __str__(self) -> str:
        return self.name

    @property
    def has_api_key(self) -> bool:
        return bool(self.api_key_encrypted)

    @property
    def is_text_completion(self) -> bool:
        return self.api == self.Api.TEXT


class ModelRoles(models.Model):
    """Which connection each role uses; the built-in local models when none is chosen."""

    class Rerank(models.TextChoices):
        BUILTIN = "builtin", "Built-in local reranker"
        LOCAL = "local", "CrossEncoder model at a local path"
        REMOTE = "remote", "Remote rerank API (litellm)"

    user = models.OneToOneField(
        settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="model_roles"
    )
    chat = models.ForeignKey(Connection, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    utility = models.ForeignKey(
        Connection, null=True, blank=True, on_delete=models.SET_NULL, related_name="+"
    )
    embedding = models.ForeignKey(
        Connection,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="+",
        help_text="Empty = the built-in all-MiniLM-L6-v2.",
    )
    rerank_kind = models.CharField(max_length=8, choices=Rerank.choices, default=Rerank.BUILTIN)
    rerank = models.ForeignKey(Connection, null=True, blank=True, on_delete=models.SET_NULL, related_name="+")
    rerank_local_path = models.CharField(max_length=500, blank=True)

    def __str__(self) -> str:
        return f"model roles of {self.user}"
