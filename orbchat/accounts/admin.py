from __future__ import annotations

from urllib.parse import urlencode

from django.contrib import admin
from django.contrib.auth import REDIRECT_FIELD_NAME
from django.contrib.auth.admin import UserAdmin
from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse

from orbchat.accounts.models import User


@admin.register(User)
class OrbChatUserAdmin(UserAdmin):
    list_display = ("username", "role", "is_active", "last_login")
    list_filter = ("role", "is_active")
    fieldsets = (*UserAdmin.fieldsets, ("OrbChat", {"fields": ("role",)}))


@login_not_required
def _login_through_the_site(request: HttpRequest, extra_context: dict | None = None) -> HttpResponse:
    """The admin signs in through the site's own sign-in page, with its throttling."""
    target = request.GET.get(REDIRECT_FIELD_NAME) or reverse("admin:index")
    return redirect(f"{reverse('accounts:login')}?{urlencode({REDIRECT_FIELD_NAME: target})}")


admin.site.login = _login_through_the_site
