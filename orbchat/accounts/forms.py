from __future__ import annotations

from django import forms
from django.contrib.auth import password_validation

from orbchat.accounts.models import AccessToken, User


class NewAccountForm(forms.Form):
    """Username and a password typed twice, checked by the site's password rules."""

    username = forms.CharField(max_length=150, validators=[User.username_validator])
    password1 = forms.CharField(label="Password", widget=forms.PasswordInput, strip=False)
    password2 = forms.CharField(label="Password again", widget=forms.PasswordInput, strip=False)

    def clean(self) -> dict:
        data = super().clean()
        first, second = data.get("password1"), data.get("password2")
        if first and second and first != second:
            self.add_error("password2", "The two passwords differ.")
        elif first:
            candidate = User(username=data.get("username", ""))
            try:
                password_validation.validate_password(first, candidate)
            except forms.ValidationError as exc:
                self.add_error("password1", exc)
        return data


class SetupForm(NewAccountForm):
    pass


class UserCreateForm(NewAccountForm):
    role = forms.ChoiceField(choices=[(User.Role.USER, "User"), (User.Role.ADMIN, "Admin")])


class AccessTokenForm(forms.Form):
    name = forms.CharField(
        max_length=AccessToken._meta.get_field("name").max_length,
        help_text="What uses it, e.g. “backup script”.",
    )


class AppearanceForm(forms.ModelForm):
    """How the site looks and how the composer sends, for one account."""

    class Meta:
        model = User
        fields = ["theme", "text_size", "enter_sends_on_phone"]
        labels = {"theme": "Theme", "text_size": "Text size"}
