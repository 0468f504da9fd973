"""The HTTP API, version 1: one NinjaAPI with each app's Router, how callers sign in (DESCRIPTION),
and every error answered as JSON."""

from __future__ import annotations

from collections.abc import Callable
from functools import wraps

from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.core.exceptions import PermissionDenied
from django.http import Http404, HttpRequest, HttpResponse, JsonResponse
from ninja import NinjaAPI
from ninja.errors import AuthenticationError, HttpError
from ninja.security import APIKeyCookie, HttpBearer
from ninja.utils import check_csrf

from memory.api import router as memory_router
from orbchat.accounts import services as account_services

DESCRIPTION = """OrbChat's HTTP API.

Call it signed in (the browser session; unsafe methods then need the `X-CSRFToken` header, as every
form does) or with a personal access token from Settings → API tokens, sent as
`Authorization: Bearer <token>`. A token acts as its user, with exactly that user's rights.

Errors are JSON: `{"detail": "..."}`; anything you cannot see is 404 with the same detail whether
it exists or not; invalid input is 422 with a list of
`{"loc": [...], "msg": "...", "type": "..."}`, one for each field at fault.
"""
NOT_SIGNED_IN = (
    "Sign in, or send a personal access token (Settings → API tokens) as `Authorization: Bearer <token>`."
)
BAD_TOKEN = "This access token is not valid: it was revoked, or it never existed."
# One answer for every 404, so a caller cannot tell another person's chat or memory from a
# missing one.
NOT_FOUND = "Not found. It may have been deleted, or you may not have access."
CSRF_FAILED = "CSRF check failed: a session caller sends the csrftoken cookie's value as X-CSRFToken."


class BadToken(AuthenticationError):
    def __init__(self) -> None:
        super().__init__(message=BAD_TOKEN)


class TokenAuth(HttpBearer):
    """A personal access token. A wrong or revoked one is refused outright, even beside a session."""

    def authenticate(self, request: HttpRequest, token: str):
        user = account_services.token_authenticate(plaintext=token)
        if user is None:
            raise BadToken
        request.user = user
        return user


class SessionAuth(APIKeyCookie):
    """The signed-in session (Django's cookie), with Django's CSRF check for unsafe methods."""

    param_name = settings.SESSION_COOKIE_NAME

    def __call__(self, request: HttpRequest):
        user = request.user
        if not (user.is_authenticated and user.is_active):
            return None  # anonymous: 401, whatever the CSRF token
        if not getattr(request, "_ninja_csrf_exempt", False) and check_csrf(request):
            raise HttpError(403, CSRF_FAILED)
        return user

    def authenticate(self, request: HttpRequest, key: str | None):
        return None  # unused: __call__ reads the session Django already loaded


def _bearer_user(request: HttpRequest):
    scheme, _, token = request.headers.get("Authorization", "").partition(" ")
    if scheme.lower() != "bearer":
        return None
    return account_services.token_authenticate(plaintext=token.strip())


def _callers_only(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """The schema and its docs page answer the same callers as the API itself."""

    @wraps(view)
    def wrapper(request: HttpRequest, *args, **kwargs) -> HttpResponse:
        if not request.user.is_authenticated:
            user = _bearer_user(request)
            if user is None:
                return JsonResponse({"detail": NOT_SIGNED_IN}, status=401)
            request.user = user
        return view(request, *args, **kwargs)

    return wrapper


api = NinjaAPI(
    title="OrbChat API",
    version="1",
    description=DESCRIPTION,
    auth=[TokenAuth(), SessionAuth()],
    urls_namespace="api-v1",
    docs_decorator=_callers_only,
)


@api.exception_handler(AuthenticationError)
def _unauthenticated(request: HttpRequest, exc: AuthenticationError) -> HttpResponse:
    message = str(exc) if isinstance(exc, BadToken) else NOT_SIGNED_IN
    response = api.create_response(request, {"detail": message}, status=401)
    response["WWW-Authenticate"] = 'Bearer realm="OrbChat API"'
    return response


@api.exception_handler(Http404)
def _not_found(request: HttpRequest, exc: Http404) -> HttpResponse:
    return api.create_response(request, {"detail": NOT_FOUND}, status=404)


@api.exception_handler(PermissionDenied)
def _forbidden(request: HttpRequest, exc: PermissionDenied) -> HttpResponse:
    return api.create_response(request, {"detail": str(exc) or "You may not do that."}, status=403)


api.add_router("", memory_router)


def urls():
    """The API's URLconf. Every view answers for itself (a JSON 401), never with the sign-in
    page's redirect that LoginRequiredMiddleware gives pages."""
    patterns, app_name, namespace = api.urls
    for pattern in patterns:
        login_not_required(pattern.callback)
    return patterns, app_name, namespace
