from __future__ import annotations

from django import forms
from django.conf import settings

from orbchat.library import images
from orbchat.library.models import Persona, WorldBook, WorldEntry
from orbchat.library.presets import INJECTIONS, MARKERS, ROLES

GREETING_SEPARATOR = "\n---\n"
AVATAR_MAX_BYTES = 5 * 1024 * 1024


def split_list(text: str, separator: str = ",") -> list[str]:
    return [part.strip() for part in text.split(separator) if part.strip()]


class ListField(forms.CharField):
    """A list of short strings typed comma-separated (or one per line)."""

    def __init__(self, *, separator: str = ",", **kwargs) -> None:
        self.separator = separator
        kwargs.setdefault("required", False)
        super().__init__(**kwargs)

    def prepare_value(self, value):
        if isinstance(value, list):
            return (self.separator + " " if self.separator == "," else self.separator).join(value)
        return value

    def to_python(self, value):
        return split_list(super().to_python(value) or "", self.separator.strip() or ",")


class AvatarField(forms.FileField):
    def __init__(self, **kwargs) -> None:
        kwargs.setdefault("required", False)
        kwargs.setdefault("help_text", "PNG, JPEG or WebP, up to 5 MB.")
        super().__init__(**kwargs)

    def clean(self, data, initial=None):
        upload = super().clean(data, initial)
        if not upload or upload is initial:
            return None
        if upload.size > AVATAR_MAX_BYTES:
            raise forms.ValidationError("The image is larger than 5 MB.")
        try:
            return images.to_png(upload.read())
        except images.NotAnImage as exc:
            raise forms.ValidationError(f"{upload.name}: {exc}") from exc


class CharacterForm(forms.Form):
    name = forms.CharField(max_length=200)
    description = forms.CharField(widget=forms.Textarea(attrs={"rows": 6}), required=False)
    personality = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), required=False)
    scenario = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), required=False)
    first_mes = forms.CharField(
        label="First message", widget=forms.Textarea(attrs={"rows": 5}), required=False
    )
    alternate_greetings = ListField(
        separator=GREETING_SEPARATOR,
        widget=forms.Textarea(attrs={"rows": 4}),
        help_text="Separate greetings with a line holding only ---",
    )
    mes_example = forms.CharField(
        label="Example messages",
        widget=forms.Textarea(attrs={"rows": 5}),
        required=False,
        help_text="Blocks start with <START>.",
    )
    system_prompt = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), required=False)
    post_history_instructions = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), required=False)
    creator_notes = forms.CharField(widget=forms.Textarea(attrs={"rows": 3}), required=False)
    creator = forms.CharField(max_length=200, required=False)
    character_version = forms.CharField(max_length=100, required=False)
    tags = ListField(help_text="Comma-separated.")
    talkativeness = forms.FloatField(min_value=0, max_value=1, initial=0.5)
    avatar = AvatarField()
    world_books = forms.ModelMultipleChoiceField(
        queryset=WorldBook.objects.none(), required=False, widget=forms.CheckboxSelectMultiple
    )

    def __init__(self, *args, user, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["world_books"].queryset = WorldBook.objects.filter(owner=user)

    def card(self) -> dict:
        data = dict(self.cleaned_data)
        for name in ("avatar", "world_books"):
            data.pop(name)
        return data


class PersonaForm(forms.ModelForm):
    avatar = AvatarField()

    class Meta:
        model = Persona
        fields = ["name", "description", "world_books"]
        widgets = {
            "description": forms.Textarea(attrs={"rows": 4}),
            "world_books": forms.CheckboxSelectMultiple,
        }

    def __init__(self, *args, user, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["world_books"].queryset = WorldBook.objects.filter(owner=user)
        self.fields["world_books"].required = False


class MultipleFileInput(forms.ClearableFileInput):
    allow_multiple_selected = True


class MultipleFileField(forms.FileField):
    def __init__(self, *args, **kwargs) -> None:
        kwargs.setdefault("widget", MultipleFileInput(attrs={"accept": ".png,.json,.charx"}))
        super().__init__(*args, **kwargs)

    def clean(self, data, initial=None):
        if isinstance(data, list | tuple):
            return [super(MultipleFileField, self).clean(item, initial) for item in data]
        return [super().clean(data, initial)]


class UploadForm(forms.Form):
    files = MultipleFileField(
        help_text=(
            "Character cards (PNG or JSON), world books (SillyTavern, NovelAI, Agnai, RisuAI), presets, "
            "instruct and context templates and system prompts."
        ),
    )

    def clean_files(self):
        uploads = self.cleaned_data["files"]
        limit = settings.MAX_UPLOAD_MB * 1024 * 1024
        for upload in uploads:
            if upload.size > limit:
                raise forms.ValidationError(
                    f"{upload.name}: the file is larger than {settings.MAX_UPLOAD_MB} MB"
                )
        return uploads


class PresetForm(forms.Form):
    name = forms.CharField(max_length=200)
    temperature = forms.FloatField(min_value=0, max_value=2)
    top_p = forms.FloatField(min_value=0, max_value=1)
    top_k = forms.IntegerField(min_value=0)
    min_p = forms.FloatField(min_value=0, max_value=1)
    frequency_penalty = forms.FloatField(min_value=-2, max_value=2)
    presence_penalty = forms.FloatField(min_value=-2, max_value=2)
    repetition_penalty = forms.FloatField(min_value=0, max_value=3)
    max_tokens = forms.IntegerField(label="Max output tokens", min_value=1, max_value=1_000_000)
    context_size = forms.IntegerField(
        min_value=256, max_value=10_000_000, required=False, help_text="Empty: the model's own."
    )
    stop = ListField(separator="\n", widget=forms.Textarea(attrs={"rows": 2}), help_text="One per line.")
    seed = forms.IntegerField(required=False)
    memory_template = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 2}), help_text="{{memory}} is replaced by what memory recalls."
    )


class SectionForm(forms.Form):
    name = forms.CharField(max_length=200)
    role = forms.ChoiceField(choices=[(r, r.title()) for r in ROLES])
    text = forms.CharField(widget=forms.Textarea(attrs={"rows": 6}), required=False)
    enabled = forms.BooleanField(required=False, initial=True)
    injection = forms.ChoiceField(
        choices=[(i, "In order" if i == "relative" else "At a depth in the chat history") for i in INJECTIONS]
    )
    depth = forms.IntegerField(min_value=0, max_value=1000, initial=4)

    def __init__(self, *args, is_marker: bool = False, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        if is_marker:
            self.fields["text"].widget = forms.HiddenInput()
            self.fields["text"].help_text = ""


class AddSectionForm(forms.Form):
    kind = forms.ChoiceField(choices=[("literal", "Text"), *((f"marker:{k}", v) for k, v in MARKERS.items())])


class WorldBookForm(forms.ModelForm):
    class Meta:
        model = WorldBook
        fields = [
            "name",
            "description",
            "is_global",
            "scan_depth",
            "token_budget",
            "recursive",
            "max_recursion_steps",
            "case_sensitive",
            "match_whole_words",
        ]
        widgets = {"description": forms.Textarea(attrs={"rows": 2})}


class EntryForm(forms.ModelForm):
    keys = ListField(help_text="Comma-separated. /pattern/flags is a regular expression.")
    secondary_keys = ListField(help_text="Comma-separated; used with the logic below.")

    class Meta:
        model = WorldEntry
        fields = [
            "comment",
            "keys",
            "secondary_keys",
            "selective_logic",
            "content",
            "constant",
            "enabled",
            "order",
            "position",
            "depth",
            "role",
            "probability",
            "use_probability",
            "group",
            "group_override",
            "group_weight",
            "prevent_recursion",
            "exclude_recursion",
            "delay_until_recursion",
            "scan_depth",
            "case_sensitive",
            "match_whole_words",
            "sticky",
            "cooldown",
            "delay",
        ]
        widgets = {
            "content": forms.Textarea(attrs={"rows": 6}),
            "case_sensitive": forms.NullBooleanSelect,
            "match_whole_words": forms.NullBooleanSelect,
        }

    def clean_probability(self) -> int:
        value = self.cleaned_data["probability"]
        if not 0 <= value <= 100:
            raise forms.ValidationError("Probability is a percentage: 0 to 100.")
        return value

    def clean(self):
        data = super().clean()
        data["selective"] = bool(data.get("secondary_keys"))
        return data


class TryForm(forms.Form):
    messages = forms.CharField(
        widget=forms.Textarea(attrs={"rows": 4}),
        help_text="Recent chat messages, one per line, newest last.",
        max_length=20000,
    )
