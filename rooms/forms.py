from __future__ import annotations

from django import forms

from orbchat.library.forms import ListField
from orbchat.library.models import Character, Persona, Preset, WorldBook
from rooms.options import REPLY_MODES, TURN_ORDERS
from rooms.speakers import DEFAULT_AUTO_TURNS


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
    reply_mode = forms.ChoiceField(choices=REPLY_MODES)
    turn_order = forms.ChoiceField(label="Who speaks each round", choices=TURN_ORDERS)
    allow_self_replies = forms.BooleanField(
        required=False, help_text="A character may answer its own message (auto-mode, natural order)."
    )
    own_card_only = forms.BooleanField(
        label="Each character sees only their own card",
        required=False,
        help_text="Per-speaker only: the others appear by name. Off: all cards are joined.",
    )
    auto_turns = forms.IntegerField(
        label="Auto-mode rounds",
        min_value=0,
        max_value=50,
        help_text=f"Characters keep replying to each other up to this many rounds (0 = off; "
        f"{DEFAULT_AUTO_TURNS} is a good start). Any message or Stop ends it.",
    )
    auto_delay = forms.FloatField(label="Auto-mode delay (seconds)", min_value=0.0, max_value=60.0)
    members_see_memory = forms.BooleanField(
        label="Members may read this chat's memory",
        required=False,
        help_text="A read-only Memory panel for the people you invited. Only you change it.",
    )

    PLAY_FIELDS = (
        "reply_mode",
        "turn_order",
        "allow_self_replies",
        "own_card_only",
        "auto_turns",
        "auto_delay",
        "members_see_memory",
    )

    def __init__(self, *args, user, remember_shown: bool = False, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        # The settings page posts, beside each field, the value it showed: a save then changes
        # only what was edited on the page, not what another tab changed after it was opened.
        for field in self.fields.values():
            field.show_hidden_initial = remember_shown
        self.fields["persona"].queryset = Persona.objects.filter(owner=user)
        self.fields["preset"].queryset = Preset.objects.filter(owner=user)
        self.fields["world_books"].queryset = WorldBook.objects.filter(owner=user)


class RoomControlsForm(RoomSettingsForm):
    """The chat page's controls: the settings named in `names`, each validated as on the settings
    page, so one or a few can change at a time without the rest being sent."""

    FIELDS = (
        "persona",
        "preset",
        "world_books",
        "authors_note",
        "authors_note_depth",
        "authors_note_role",
        *RoomSettingsForm.PLAY_FIELDS,
    )

    def __init__(self, *args, user, names=FIELDS, **kwargs) -> None:
        super().__init__(*args, user=user, **kwargs)
        for name in list(self.fields):
            if name not in names:
                del self.fields[name]


class GroupChatForm(forms.Form):
    characters = forms.ModelMultipleChoiceField(
        queryset=Character.objects.none(),
        widget=forms.CheckboxSelectMultiple,
        error_messages={
            "required": "Pick at least two characters for a group chat.",
            "invalid_choice": "Pick only characters from your own library.",
            "invalid_pk_value": "Pick only characters from your own library.",
        },
    )
    title = forms.CharField(max_length=300, required=False, help_text="Empty: the characters' names.")
    reply_mode = forms.ChoiceField(choices=REPLY_MODES, initial="per_speaker")
    turn_order = forms.ChoiceField(label="Who speaks each round", choices=TURN_ORDERS, initial="natural")

    def __init__(self, *args, user, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["characters"].queryset = Character.objects.filter(owner=user).order_by("name", "pk")

    def clean_characters(self):
        characters = self.cleaned_data["characters"]
        if len(characters) < 2:
            raise forms.ValidationError("Pick at least two characters for a group chat.")
        return characters


class ChatImportForm(forms.Form):
    file = forms.FileField(label="SillyTavern chat (.jsonl)")
    character = forms.ModelChoiceField(queryset=Character.objects.none())
    build_memory = forms.BooleanField(
        label="Build memory for this chat",
        required=False,
        initial=True,
        help_text="Summarise and index its history in the background.",
    )

    def __init__(self, *args, user, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["character"].queryset = Character.objects.filter(owner=user)


class SeatAddForm(forms.Form):
    character = forms.ModelChoiceField(queryset=Character.objects.none(), empty_label="Choose a character…")

    def __init__(self, *args, user, room, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        seated = room.seats.filter(presences__left_seq__isnull=True).values("character_id")
        self.fields["character"].queryset = Character.objects.filter(owner=user).exclude(pk__in=seated)


class SeatForm(forms.Form):
    talkativeness = forms.FloatField(min_value=0.0, max_value=1.0)
    muted = forms.BooleanField(required=False)
    speak_next = forms.BooleanField(required=False, label="Speak next")


class InviteLinkForm(forms.Form):
    expires_hours = forms.IntegerField(
        label="Expires after (hours)",
        min_value=1,
        max_value=24 * 365,
        required=False,
        help_text="Empty: never.",
    )
    max_uses = forms.IntegerField(min_value=1, max_value=1000, required=False, help_text="Empty: no limit.")


class InviteUserForm(forms.Form):
    username = forms.CharField(max_length=150)


class MemberPersonaForm(forms.Form):
    persona = forms.ModelChoiceField(
        queryset=Persona.objects.none(), required=False, empty_label="(your default persona)"
    )

    def __init__(self, *args, user, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["persona"].queryset = Persona.objects.filter(owner=user)
