"""The Content-Security-Policy on every response.

Pages load script, style and everything else from this site only: no inline script, no inline
event handlers, no eval, no `<style>` elements, no framing. A script that slips into a page (say
through a message's text) is refused by the browser, not just escaped by the templates. Django's
SecurityMiddleware and XFrameOptionsMiddleware add the other headers (see SECURE_* and
X_FRAME_OPTIONS in the settings).
"""

from __future__ import annotations

from collections.abc import Callable

from django.http import HttpRequest, HttpResponse

POLICY = "; ".join(
    [
        "default-src 'self'",
        "script-src 'self'",
        "style-src 'self'",
        "img-src 'self' data: blob:",
        "connect-src 'self' ws: wss:",
        "object-src 'none'",
        "base-uri 'self'",
        "frame-ancestors 'none'",
        "form-action 'self'",
    ]
)


class ContentSecurityPolicyMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        response = self.get_response(request)
        response.headers.setdefault("Content-Security-Policy", POLICY)
        return response
