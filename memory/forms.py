from __future__ import annotations

from django import forms

from memory.models import MAX_MEMORY_TEXT, MemoryTuning
from memory.selectors import FILTERS


class MemoryTuningForm(forms.ModelForm):
    class Meta:
        model = MemoryTuning
        exclude: list[str] = []


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
