from __future__ import annotations

from urllib.parse import urlencode

from django.contrib import admin, messages
from django.contrib.auth import REDIRECT_FIELD_NAME
from django.contrib.auth.admin import UserAdmin
from django.contrib.auth.decorators import login_not_required
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse

from orbchat.accounts import services
from orbchat.accounts.models import User


@admin.register(User)
class OrbChatUserAdmin(UserAdmin):
    list_display = ("username", "role", "is_active", "last_login")
    list_filter = ("role", "is_active")
    fieldsets = (*UserAdmin.fieldsets, ("OrbChat", {"fields": ("role",)}))

    def save_model(self, request, obj, form, change) -> None:
        """Save the form; a change to "Active" goes through the accounts service, which also ends
        a deactivated person's sessions and closes their open sockets."""
        if not (change and "is_active" in form.changed_data):
            super().save_model(request, obj, form, change)
            return
        active = obj.is_active
        obj.is_active = not active  # the other fields first, "Active" as it was
        super().save_model(request, obj, form, change)
        try:
            services.user_set_active(actor=request.user, user=obj, active=active)
        except PermissionDenied as exc:
            self.message_user(request, f"{exc} The account's Active setting was not changed.", messages.ERROR)


@login_not_required
def _login_through_the_site(request: HttpRequest, extra_context: dict | None = None) -> HttpResponse:
    """The admin signs in through the site's own sign-in page, with its throttling."""
    target = request.GET.get(REDIRECT_FIELD_NAME) or reverse("admin:index")
    return redirect(f"{reverse('accounts:login')}?{urlencode({REDIRECT_FIELD_NAME: target})}")


admin.site.login = _login_through_the_site
