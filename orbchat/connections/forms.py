from __future__ import annotations

import json

from django import forms

from orbchat.connections.models import Connection, ModelRoles
from orbchat.library import textformats


class ConnectionForm(forms.Form):
    name = forms.CharField(max_length=200, required=False, help_text="Empty: the model's name.")
    provider = forms.ChoiceField(choices=Connection.Provider.choices)
    model = forms.CharField(max_length=300, help_text="The provider's model name, e.g. gpt-4o-mini.")
    api_base = forms.URLField(label="API base URL", required=False)
    api_key = forms.CharField(
        label="API key",
        required=False,
        strip=True,
        widget=forms.PasswordInput(render_value=False, attrs={"autocomplete": "off"}),
    )
    clear_api_key = forms.BooleanField(label="Remove the saved key", required=False)
    context_size = forms.IntegerField(min_value=256, required=False, help_text="Empty: what litellm knows.")
    also_utility = forms.BooleanField(
        label="Also write memory summaries with it",
        initial=True,
        required=False,
        help_text="Untick to keep memory on the built-in summariser, which needs no model.",
    )
    extra_params = forms.CharField(
        label="Extra parameters (JSON)",
        required=False,
        widget=forms.Textarea(attrs={"rows": 2}),
        help_text='Sent with every request, e.g. {"reasoning_effort": "low"}.',
    )

    api = forms.ChoiceField(
        label="Kind of API", choices=Connection.Api.choices, initial=Connection.Api.CHAT, required=False
    )
    text_backend = forms.ChoiceField(
        label="Text-completion server",
        required=False,
        choices=Connection.TextBackend.choices,
        initial=Connection.TextBackend.KOBOLDCPP,
        help_text="Each server names its samplers its own way.",
    )
    instruct_template = forms.ChoiceField(
        label="Instruct template",
        required=False,
        initial="auto",
        help_text="How each message is wrapped for the model. Automatic: the template whose activation "
        "regex matches the model's name (ChatML when none does).",
    )
    context_template = forms.ChoiceField(
        label="Context template",
        required=False,
        initial="auto",
        help_text="The story string and where it goes. Automatic: the one named as the instruct template.",
    )
    system_prompt = forms.ChoiceField(
        label="System prompt",
        required=False,
        help_text="A card's own system prompt still replaces it.",
    )

    TEXT_FIELDS = ("text_backend", "instruct_template", "context_template", "system_prompt")

    def general_fields(self) -> list:
        return [field for field in self if field.name not in self.TEXT_FIELDS]

    def text_fields(self) -> list:
        return [self[name] for name in self.TEXT_FIELDS]

    def __init__(self, *args, user, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        for name, kind in (
            ("instruct_template", "instruct"),
            ("context_template", "context"),
            ("system_prompt", "system"),
        ):
            self.fields[name].choices = textformats.choices(owner=user, kind=kind)

    def clean_api(self) -> str | None:
        return self.cleaned_data["api"] or None  # not sent: the saved kind (chat for a new one)

    def clean_text_backend(self) -> str | None:
        return self.cleaned_data["text_backend"] or None

    def clean_extra_params(self) -> dict:
        text = self.cleaned_data["extra_params"].strip()
        if not text:
            return {}
        try:
            value = json.loads(text)
        except json.JSONDecodeError as exc:
            raise forms.ValidationError(f"Extra parameters are not valid JSON: {exc}") from exc
        if not isinstance(value, dict):
            raise forms.ValidationError("Extra parameters must be a JSON object.")
        return value


class RolesForm(forms.Form):
    chat = forms.ModelChoiceField(queryset=Connection.objects.none(), required=False, empty_label="(none)")
    utility = forms.ModelChoiceField(
        queryset=Connection.objects.none(),
        required=False,
        empty_label="(none: built-in extractive summaries)",
    )
    embedding = forms.ModelChoiceField(
        label="Text embedding",
        queryset=Connection.objects.none(),
        required=False,
        empty_label="Built-in all-MiniLM-L6-v2 (local)",
    )
    rerank_kind = forms.ChoiceField(label="Rerank", choices=ModelRoles.Rerank.choices)
    rerank = forms.ModelChoiceField(
        label="Remote rerank connection", queryset=Connection.objects.none(), required=False
    )
    rerank_local_path = forms.CharField(label="CrossEncoder model folder", required=False, max_length=500)

    def __init__(self, *args, user, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        for name in ("chat", "utility", "embedding", "rerank"):
            self.fields[name].queryset = Connection.objects.filter(owner=user)
