from __future__ import annotations

from django import forms

from memory import prompts
from memory.models import MAX_MEMORY_TEXT, MemoryTuning
from memory.selectors import FILTERS


class MemoryTuningForm(forms.ModelForm):
    """All of Memory tuning, with a box per prompt kind showing the built-in text until it is changed."""

    class Meta:
        model = MemoryTuning
        exclude: list[str] = ["custom_prompts"]  # kept by save(), one box per prompt kind

    def __init__(self, *args, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        for kind, spec in prompts.KINDS.items():
            own = prompts.custom(self.instance.custom_prompts, kind)
            self.fields[f"prompt_{kind}"] = forms.CharField(
                label=spec.label,
                required=False,
                initial=own or spec.builtin,
                widget=forms.Textarea(attrs={"rows": 14, "spellcheck": "false", "class": "prompt"}),
            )

    def settings_fields(self) -> list[forms.BoundField]:
        return [field for field in self if not field.name.startswith("prompt_")]

    def prompt_fields(self) -> list[dict]:
        """Each prompt's field with its kind, whether it is the host's own, and its placeholders."""
        return [
            {
                "kind": kind,
                "spec": spec,
                "field": self[f"prompt_{kind}"],
                "custom": bool(prompts.custom(self.instance.custom_prompts, kind)),
                "material": f"{{{{{spec.material}}}}}",
                "placeholders": [(f"{{{{{name}}}}}", help) for name, help in spec.placeholders.items()],
            }
            for kind, spec in prompts.KINDS.items()
        ]

    def clean(self) -> dict:
        cleaned = super().clean()
        for kind, spec in prompts.KINDS.items():
            name = f"prompt_{kind}"
            # Line endings as browsers send them; the built-in text as shown, or nothing, is the built-in.
            text = cleaned.get(name, "").replace("\r\n", "\n")
            if not text.strip() or text.strip() == spec.builtin.strip():
                cleaned[name] = ""
            elif problems := prompts.validate(kind, text):
                self.add_error(name, problems)
            else:
                cleaned[name] = text
        return cleaned

    def save(self, commit: bool = True) -> MemoryTuning:
        self.instance.custom_prompts = {
            kind: self.cleaned_data[f"prompt_{kind}"]
            for kind in prompts.KINDS
            if self.cleaned_data[f"prompt_{kind}"]
        }
        return super().save(commit=commit)


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
