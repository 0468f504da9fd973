from __future__ import annotations

from django import forms

from memory import prompts
from memory.models import MAX_MEMORY_TEXT, MemoryTuning
from memory.selectors import FILTERS


class MemoryTuningForm(forms.ModelForm):
    """All of Memory tuning; the prompts show their built-in text while they are blank."""

    class Meta:
        model = MemoryTuning
        exclude: list[str] = []
        widgets = {
            spec.field: forms.Textarea(attrs={"rows": 14, "spellcheck": "false", "class": "prompt"})
            for spec in prompts.KINDS.values()
        }

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        for spec in prompts.KINDS.values():
            if not getattr(self.instance, spec.field):
                self.initial[spec.field] = spec.builtin

    def settings_fields(self) -> list[forms.BoundField]:
        prompt_fields = {spec.field for spec in prompts.KINDS.values()}
        return [field for field in self if field.name not in prompt_fields]

    def prompt_fields(self) -> list[dict]:
        """Each prompt's field with its kind, whether it is the host's own, and its placeholders."""
        return [
            {
                "kind": kind,
                "spec": spec,
                "field": self[spec.field],
                "custom": bool(getattr(self.instance, spec.field)),
                "material": f"{{{{{spec.material}}}}}",
                "placeholders": [(f"{{{{{name}}}}}", help) for name, help in spec.placeholders.items()],
            }
            for kind, spec in prompts.KINDS.items()
        ]

    def clean(self) -> dict:
        cleaned = super().clean()
        for kind, spec in prompts.KINDS.items():
            if spec.field in cleaned:
                self._clean_prompt(kind, spec)
        return self.cleaned_data

    def _clean_prompt(self, kind: str, spec: prompts.Kind) -> None:
        # The built-in text as it was shown, or nothing at all, is stored as blank: the built-in.
        text = self.cleaned_data[spec.field].replace("\r\n", "\n")
        if not text.strip() or text.strip() == spec.builtin.strip():
            self.cleaned_data[spec.field] = ""
            return
        problems = prompts.validate(kind, text)
        if problems:
            self.add_error(spec.field, problems)
        else:
            self.cleaned_data[spec.field] = text


class RememberForm(forms.Form):
    remember_long_chats = forms.BooleanField(label="Remember earlier in long chats", required=False)


class MemoryTextForm(forms.Form):
    text = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 6}),
        max_length=MAX_MEMORY_TEXT,
        error_messages={
            "max_length": f"A memory holds at most {MAX_MEMORY_TEXT:,} characters.",
            "required": "A memory needs some text.",
        },
        help_text="First line: a heading. Then one line per fact. A “Keywords: a, b” line helps recall.",
    )


class MemoryAddForm(MemoryTextForm):
    seq_from = forms.IntegerField(label="From message #", min_value=0, required=False)
    seq_to = forms.IntegerField(label="To message #", min_value=0, required=False)
    pinned = forms.BooleanField(label="Pin it", required=False)


class RebuildForm(forms.Form):
    seq_from = forms.IntegerField(min_value=0)
    seq_to = forms.IntegerField(min_value=0, required=False)


class PanelFilterForm(forms.Form):
    q = forms.CharField(required=False, max_length=200)
    show = forms.ChoiceField(choices=[], required=False)
    tier = forms.IntegerField(required=False, min_value=0, max_value=255)

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["show"].choices = list(FILTERS.items())
