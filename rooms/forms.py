from __future__ import annotations

from django import forms

from orbchat.library.forms import ListField
from orbchat.library.models import Character, Persona, Preset, WorldBook


class RoomSettingsForm(forms.Form):
    title = forms.CharField(max_length=300)
    persona = forms.ModelChoiceField(
        queryset=Persona.objects.none(), required=False, empty_label="(your default persona)"
    )
    preset = forms.ModelChoiceField(
        queryset=Preset.objects.none(), required=False, empty_label="(your first preset)"
    )
    world_books = forms.ModelMultipleChoiceField(
        queryset=WorldBook.objects.none(), required=False, widget=forms.CheckboxSelectMultiple
    )
    authors_note = forms.CharField(
        label="Author's note", widget=forms.Textarea(attrs={"rows": 3}), required=False
    )
    authors_note_depth = forms.IntegerField(label="Author's note depth", min_value=0, max_value=1000)
    authors_note_role = forms.ChoiceField(
        label="Author's note role",
        choices=[("system", "System"), ("user", "User"), ("assistant", "Assistant")],
    )
    tags = ListField(help_text="Comma-separated.")

    def __init__(self, *args, user, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["persona"].queryset = Persona.objects.filter(owner=user)
        self.fields["preset"].queryset = Preset.objects.filter(owner=user)
        self.fields["world_books"].queryset = WorldBook.objects.filter(owner=user)


class ChatImportForm(forms.Form):
    file = forms.FileField(label="SillyTavern chat (.jsonl)")
    character = forms.ModelChoiceField(queryset=Character.objects.none())

    def __init__(self, *args, user, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["character"].queryset = Character.objects.filter(owner=user)
