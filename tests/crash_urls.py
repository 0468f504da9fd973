"""The site's URLs plus one page that fails, to see the 500 page as a person would."""

from __future__ import annotations

from django.contrib.auth.decorators import login_not_required
from django.urls import path

from orbchat.urls import handler500
from orbchat.urls import urlpatterns as site_urlpatterns


@login_not_required
def crash(request):
    raise RuntimeError("secret internal detail")


urlpatterns = [path("crash/", crash), *site_urlpatterns]

__all__ = ["handler500", "urlpatterns"]
