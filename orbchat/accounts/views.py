from __future__ import annotations

from django.contrib import messages
from django.contrib.auth import login
from django.contrib.auth import views as auth_views
from django.contrib.auth.decorators import login_not_required
from django.core.exceptions import PermissionDenied, ValidationError
from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import get_object_or_404, redirect, render
from django.views.decorators.http import require_POST

from orbchat.accounts import selectors, services, throttle
from orbchat.accounts.forms import AccessTokenForm, AppearanceForm, SetupForm, UserCreateForm
from orbchat.accounts.models import AccessToken, User


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


class LoginView(auth_views.LoginView):
    """Django's sign-in, refused outright (the right password too) while the account or the
    address is locked out after too many failures."""

    template_name = "accounts/login.html"
    redirect_authenticated_user = True

    def post(self, request: HttpRequest, *args, **kwargs) -> HttpResponse:
        refused = throttle.refusal(throttle.Attempt.from_request(request))
        if refused is None:
            return super().post(request, *args, **kwargs)
        message, seconds = refused
        form = self.get_form_class()(request, initial={"username": request.POST.get("username", "")})
        response = self.render_to_response(self.get_context_data(form=form, throttled=message), status=429)
        response["Retry-After"] = str(seconds)
        return response

    def form_valid(self, form) -> HttpResponse:
        throttle.success_record(throttle.Attempt.from_request(self.request))
        return super().form_valid(form)

    def form_invalid(self, form) -> HttpResponse:
        if self.request.POST.get("username") and self.request.POST.get("password"):
            throttle.failure_record(throttle.Attempt.from_request(self.request))
        return super().form_invalid(form)


def settings_home(request: HttpRequest) -> HttpResponse:
    return _settings_page(request, AccessTokenForm())


def _settings_page(
    request: HttpRequest,
    token_form: AccessTokenForm,
    *,
    new_token: str = "",
    appearance_form: AppearanceForm | None = None,
    status: int = 200,
) -> HttpResponse:
    context = {
        "token_form": token_form,
        "appearance_form": appearance_form or AppearanceForm(instance=request.user),
        "tokens": selectors.token_list(user=request.user),
        "new_token": new_token,
    }
    return render(request, "accounts/settings.html", context, status=status)


@require_POST
def appearance_set(request: HttpRequest) -> HttpResponse:
    """Theme, text size and the phone's Enter key, stored on the account."""
    form = AppearanceForm(request.POST, instance=User.objects.get(pk=request.user.pk))
    if not form.is_valid():
        return _settings_page(request, AccessTokenForm(), appearance_form=form, status=400)
    services.user_appearance_set(user=request.user, **form.cleaned_data)
    messages.success(request, "Appearance saved.")
    return redirect("accounts:settings")


@require_POST
def token_create(request: HttpRequest) -> HttpResponse:
    """Make a personal access token; the page shows it this once (only its hash is kept)."""
    form = AccessTokenForm(request.POST)
    if form.is_valid():
        try:
            row, plaintext = services.token_create(user=request.user, name=form.cleaned_data["name"])
        except ValidationError as exc:
            form.add_error("name", exc)
        else:
            messages.success(request, f"Token “{row.name}” created. Copy it now: it is not shown again.")
            return _settings_page(request, AccessTokenForm(), new_token=plaintext)
    return _settings_page(request, form)


def token_revoke(request: HttpRequest, token_id: int) -> HttpResponse:
    """Revoke one of your tokens, after a confirmation page."""
    token = selectors.token_list(user=request.user).filter(pk=token_id).first()
    if token is None:
        raise Http404("No such token.")
    if request.method == "POST":
        try:
            services.token_revoke(user=request.user, token_id=token.pk)
        except AccessToken.DoesNotExist as exc:
            raise Http404("No such token.") from exc
        messages.success(request, f"Token “{token.name}” revoked: it no longer works.")
        return redirect("accounts:settings")
    return render(request, "accounts/token_revoke.html", {"token": token, "nav": "settings"})


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
