from __future__ import annotations

from django.http import Http404, HttpRequest, HttpResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_GET

from corpus import search, selectors
from corpus.forms import ExploreForm
from memory.selectors import reindex_status
from orbchat.connections import embedder, embedding

PER_PAGE = 10


def _embedder_state(user) -> str:
    """The built-in embedder starts loading as the page opens (searching needs it)."""
    if embedding.model_key(user) != embedding.BUILTIN_KEY:
        return "ready"
    return embedder.warm()


@require_GET
def explore(request: HttpRequest) -> HttpResponse:
    """Search past scenes or memories across the rooms the person hosts."""
    form = ExploreForm(request.GET or None, user=request.user)
    results, hits, page = None, [], 1
    if form.is_valid() and form.cleaned_data["q"].strip():
        data = form.cleaned_data
        page = data["page"] or 1
        results = search.search(
            request.user,
            target=data["target"] or "scenes",
            q=data["q"],
            room_ids=[data["room"].pk] if data["room"] else None,
            character_id=data["character"].pk if data["character"] else None,
            date_from=data["date_from"],
            date_to=data["date_to"],
            offset=(page - 1) * PER_PAGE,
            limit=PER_PAGE,
        )
        hits = results.hits
    else:
        search.warm(request.user)  # the first search after a restart then finds the word index ready
    context = {
        "form": form,
        "results": results,
        "hits": hits,
        "page": page,
        "has_next": bool(results) and (page * PER_PAGE) < results.total,
        "query": request.GET.copy(),
        **_readiness(request.user),
        "nav": "corpus",
    }
    return render(request, "corpus/explore.html", context)


def _readiness(user) -> dict:
    rooms = selectors.readiness(user)
    return {
        "waiting": [r for r in rooms if r.state in ("not indexed", "partly indexed")],
        "reindex": reindex_status(user),
        "embedder": _embedder_state(user),
    }


@require_GET
def status(request: HttpRequest) -> HttpResponse:
    """The readiness part of the page (polled while the embedder loads or re-indexing runs)."""
    return render(request, "corpus/_status.html", _readiness(request.user))


def _back(request: HttpRequest) -> str:
    """The results page the person came from (same site, the Corpus only), else a fresh Explore."""
    referer = request.headers.get("referer", "")
    path = referer.split(request.get_host(), 1)[-1] if request.get_host() in referer else ""
    return path if path.startswith("/corpus/?") else reverse("corpus:explore")


@require_GET
def scene(request: HttpRequest, room_pk: int, block: int) -> HttpResponse:
    """A scene's transcript window, with the way back into the chat at that moment (or, when its
    messages are gone, a way into the chat)."""
    room = selectors.host_room(request.user, room_pk)
    if room is None:
        raise Http404("No such chat.")
    seq_from, seq_to = selectors.scene_range(room, block)
    context = {
        "room": room,
        "window": selectors.window(room, seq_from, seq_to, q=request.GET.get("q", "")),
        "title": f"Scene · messages {seq_from}–{seq_to}",
        "back": _back(request),
        "nav": "corpus",
    }
    return render(request, "corpus/window.html", context)


@require_GET
def memory(request: HttpRequest, summary_pk: int) -> HttpResponse:
    """A memory's text with its tier and block, and the transcript it was made from."""
    summary = selectors.host_summary(request.user, summary_pk)
    room = summary.room if summary else None
    if room is None and request.GET.get("room", "").isdigit():
        room = selectors.host_room(request.user, int(request.GET["room"]))
    if room is None:
        raise Http404("No such memory.")
    context = {
        "room": room,
        "summary": summary,
        "gone": summary is None,
        "window": None
        if summary is None or summary.seq_from is None
        else selectors.window(room, summary.seq_from, summary.seq_to, q=request.GET.get("q", "")),
        "title": summary.label if summary else "A memory that no longer exists",
        "back": _back(request),
        "nav": "corpus",
    }
    return render(request, "corpus/window.html", context)
