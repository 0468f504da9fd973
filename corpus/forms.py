from __future__ import annotations

from django import forms

from corpus import selectors
from rooms.selectors import hosted_rooms

TARGETS = [("scenes", "Scenes"), ("memories", "Memories")]


class ExploreForm(forms.Form):
    q = forms.CharField(label="Describe the moment", max_length=500, required=False)
    target = forms.ChoiceField(choices=TARGETS, initial="scenes", required=False, widget=forms.RadioSelect)
    room = forms.ModelChoiceField(queryset=None, required=False, empty_label="Any chat")
    character = forms.ModelChoiceField(queryset=None, required=False, empty_label="Any character")
    date_from = forms.DateField(label="From", required=False, widget=forms.DateInput(attrs={"type": "date"}))
    date_to = forms.DateField(label="To", required=False, widget=forms.DateInput(attrs={"type": "date"}))
    page = forms.IntegerField(min_value=1, max_value=1000, required=False)

    def __init__(self, *args, user, **kwargs) -> None:
        super().__init__(*args, **kwargs)
        self.fields["room"].queryset = hosted_rooms(user=user)
        self.fields["character"].queryset = selectors.hosted_characters(user)

    def clean(self) -> dict:
        data = super().clean()
        if data.get("date_from") and data.get("date_to") and data["date_from"] > data["date_to"]:
            self.add_error("date_to", "The end date comes before the start date.")
        return data
