from __future__ import annotations

from collections.abc import Callable

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import redirect
from django.urls import reverse

from orbchat.accounts.selectors import setup_required


class FirstRunSetupMiddleware:
    """While no account exists, lead every page (but health, static files and the API) to setup."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        if not request.user.is_authenticated and not self._exempt(request.path) and setup_required():
            return redirect("accounts:setup")
        return self.get_response(request)

    @staticmethod
    def _exempt(path: str) -> bool:
        # The API answers for itself (401), as a script expects.
        exempt = (
            reverse("accounts:setup"),
            reverse("healthz"),
            "/" + settings.STATIC_URL,
            reverse("api-v1:api-root"),
        )
        return path.startswith(exempt)
