from __future__ import annotations

from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, JsonResponse
from django.views.decorators.cache import never_cache

from orbchat import health


@login_not_required
@never_cache
def healthz(request: HttpRequest) -> JsonResponse:
    results = health.run_checks()
    healthy = all(value == health.OK for value in results.values())
    return JsonResponse(results, status=200 if healthy else 503)
