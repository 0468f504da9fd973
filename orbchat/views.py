from __future__ import annotations

from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.shortcuts import render
from django.views.decorators.cache import never_cache

from orbchat import health

# Sections whose pages land with later issues; each says so instead of pretending.
COMING_SOON = {
    "corpus": "Corpus",
}


def coming_soon(request: HttpRequest, section: str) -> HttpResponse:
    return render(request, "coming_soon.html", {"section": COMING_SOON[section], "nav": section})


@login_not_required
@never_cache
def healthz(request: HttpRequest) -> JsonResponse:
    results = health.run_checks()
    healthy = all(value == health.OK for value in results.values())
    return JsonResponse(results, status=200 if healthy else 503)
