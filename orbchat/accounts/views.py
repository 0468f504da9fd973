from __future__ import annotations

from django.contrib import messages
from django.contrib.auth import login
from django.contrib.auth.decorators import login_not_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from orbchat.accounts import selectors, services
from orbchat.accounts.forms import SetupForm, UserCreateForm
from orbchat.accounts.models import User


@login_not_required
def setup(request: HttpRequest) -> HttpResponse:
    if not selectors.setup_required():
        messages.info(request, "OrbChat is already set up. Sign in with your account.")
        return redirect("accounts:login")
    form = SetupForm(request.POST or None)
    if request.method == "POST" and form.is_valid():
        try:
            owner = services.owner_create(
                username=form.cleaned_data["username"], password=form.cleaned_data["password1"]
            )
        except services.SetupAlreadyDone:
            messages.info(request, "OrbChat is already set up. Sign in with your account.")
            return redirect("accounts:login")
        login(request, owner, backend="django.contrib.auth.backends.ModelBackend")
        messages.success(request, f"Welcome, {owner.username}. You are the owner of this OrbChat.")
        return redirect("home")
    return render(request, "accounts/setup.html", {"form": form})


def settings_home(request: HttpRequest) -> HttpResponse:
    return render(request, "accounts/settings.html")


def _require_manager(request: HttpRequest) -> None:
    if not request.user.can_manage_users:
        raise PermissionDenied("Only the owner and admins manage accounts.")


def user_list(request: HttpRequest) -> HttpResponse:
    _require_manager(request)
    form = UserCreateForm(request.POST or None)
    if not request.user.is_owner:
        form.fields["role"].choices = [(User.Role.USER, "User")]
    if request.method == "POST" and form.is_valid():
        try:
            user = services.user_create(
                actor=request.user,
                username=form.cleaned_data["username"],
                password=form.cleaned_data["password1"],
                role=form.cleaned_data["role"],
            )
        except (PermissionDenied, ValidationError) as exc:
            form.add_error(None, exc.messages[0] if hasattr(exc, "messages") else str(exc))
        else:
            messages.success(request, f"Account {user.username} created.")
            return redirect("accounts:users")
    return render(request, "accounts/users.html", {"form": form, "users": selectors.user_list()})


@require_POST
def user_set_active(request: HttpRequest, user_id: int) -> HttpResponse:
    _require_manager(request)
    user = get_object_or_404(User, pk=user_id)
    active = request.POST.get("active") == "1"
    try:
        services.user_set_active(actor=request.user, user=user, active=active)
    except PermissionDenied as exc:
        messages.error(request, str(exc))
    else:
        state = "reactivated" if active else "deactivated"
        messages.success(request, f"Account {user.username} {state}.")
    return redirect("accounts:users")
