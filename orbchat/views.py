from __future__ import annotations

import logging

from django.contrib.auth.decorators import login_not_required
from django.http import (
    HttpRequest,
    HttpResponse,
    HttpResponseForbidden,
    HttpResponseServerError,
    JsonResponse,
)
from django.template import loader
from django.views.decorators.cache import never_cache
from django.views.decorators.csrf import requires_csrf_token

from orbchat import health


@login_not_required
@never_cache
def healthz(request: HttpRequest) -> JsonResponse:
    results = health.run_checks()
    healthy = all(value == health.OK for value in results.values())
    return JsonResponse(results, status=200 if healthy else 503)


log = logging.getLogger(__name__)

CSRF_REFUSED = "This form had expired or came from another site. Reload the page and try again."


@requires_csrf_token
def server_error(request: HttpRequest) -> HttpResponse:
    """The 500 page in the site's layout, with its navigation for a signed-in person.

    If the layout itself cannot be drawn (the database the session needs is down), the page is
    drawn without the person's details.
    """
    try:
        html = loader.render_to_string("500.html", request=request)
    except Exception:  # noqa: BLE001 - the error page must always come back
        log.exception("the 500 page could not be drawn with the request; drawn without it")
        html = loader.render_to_string("500.html")
    return HttpResponseServerError(html)


@requires_csrf_token
def csrf_failure(request: HttpRequest, reason: str = "") -> HttpResponse:
    """A refused form (a stale or foreign CSRF token) on the site's 403 page."""
    return HttpResponseForbidden(
        loader.render_to_string("403.html", {"exception": CSRF_REFUSED}, request=request)
    )
