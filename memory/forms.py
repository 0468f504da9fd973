from __future__ import annotations

from django import forms

from memory import prompts
from memory.models import MAX_FACT_TEXT, MAX_MEMORY_TEXT, SHARED, Fact, MemoryTuning
from memory.selectors import FACT_HEATS, FACT_STATUSES, FILTERS


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


def _names(value: str) -> list[str]:
    return [name.strip() for name in value.split(",") if name.strip()]


class FactForm(forms.Form):
    """A person's fact. Lengths and ranges are the services' to check, so that their message shows
    next to the field."""

    text = forms.CharField(
        required=False,
        strip=False,
        widget=forms.Textarea(attrs={"rows": 3, "maxlength": MAX_FACT_TEXT}),
        help_text=f"One statement that reads on its own; at most {MAX_FACT_TEXT} characters.",
    )
    category = forms.ChoiceField(choices=Fact.Category.choices)
    subjects = forms.CharField(
        required=False, help_text="The people and things it names, separated by commas."
    )
    confidence = forms.FloatField(
        required=False, widget=forms.NumberInput(attrs={"step": "0.05"}), help_text="From 0 to 1; empty: 1."
    )

    def clean_subjects(self) -> list[str]:
        return _names(self.cleaned_data["subjects"])


class FactAddForm(FactForm):
    first_seq = forms.IntegerField(label="From message #", required=False)
    last_seq = forms.IntegerField(label="To message #", required=False)
    scope = forms.ChoiceField(label="Whose", choices=[(SHARED, "Shared")], initial=SHARED)
    pinned = forms.BooleanField(label="Pin it", required=False)

    def __init__(self, *args, scopes: list[tuple[str, str]] | None = None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        if scopes:
            self.fields["scope"].choices = scopes


class FactFilterForm(forms.Form):
    q = forms.CharField(required=False, max_length=200)
    category = forms.ChoiceField(choices=[("", "Any category"), *Fact.Category.choices], required=False)
    status = forms.ChoiceField(choices=list(FACT_STATUSES.items()), required=False)
    heat = forms.ChoiceField(choices=list(FACT_HEATS.items()), required=False)
    scope = forms.ChoiceField(choices=[("", "Any scope")], required=False)

    def __init__(self, *args, scopes: list[tuple[str, str]] | None = None, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["scope"].choices = [("", "Any scope"), *(scopes or [])]


class SceneNoteForm(forms.Form):
    where = forms.CharField(required=False, label="Where")
    who = forms.CharField(required=False, label="Who is there", help_text="Names separated by commas.")
    when = forms.CharField(required=False, label="When")
    open_threads = forms.CharField(
        required=False,
        label="Open threads",
        widget=forms.Textarea(attrs={"rows": 3}),
        help_text="What is unfinished, one per line.",
    )
