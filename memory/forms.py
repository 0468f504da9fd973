from __future__ import annotations

from django import forms

from memory.models import MemoryTuning


class MemoryTuningForm(forms.ModelForm):
    class Meta:
        model = MemoryTuning
        exclude: list[str] = []


class RememberForm(forms.Form):
    remember_long_chats = forms.BooleanField(label="Remember earlier in long chats", required=False)
