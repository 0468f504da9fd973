"""Turn messages into what templates show; the same code renders pages and socket pushes.

A message's partial (`rooms/_message.html`) is the same for every viewer: what only the host or
the author may use is marked by classes the page hides by role, and the one per-request part,
the fork form's CSRF token, is a placeholder filled in as the page is served. So a rendered
partial is cached under a digest of everything it shows (`fragment_key`), and a page view
renders only the messages that changed since anyone last saw them.
"""

from __future__ import annotations

import zlib
from dataclasses import dataclass
from functools import cached_property

from django.template.loader import get_template
from django.urls import reverse
from django.utils import timezone, translation
from django.utils.html import escape
from django.utils.safestring import SafeString, mark_safe

from rooms import rendering
from rooms.models import Message, Variant
from rooms.rendering import RENDERER_KEY, HtmlCache, digest, render_cached

MESSAGE_TEMPLATE = "rooms/_message.html"
AVATAR_TEMPLATE = "rooms/_avatar.html"  # included by the message partial

# The cached partials carry this in place of a CSRF token. Message text is always escaped, so
# no text can spell the whole input tag with its quotes: only the tag the template made matches.
CSRF_SLOT = "orbchat-csrf-slot"
CSRF_INPUT = '<input type="hidden" name="csrfmiddlewaretoken" value="{}">'

_FRAGMENTS = HtmlCache("message", max_chars=32_000_000)

AT_BEFORE = 10  # messages shown before the one a link lands on

SPEAKER_COLOURS = 8  # the site's palette of speaker colours (`.speaker-c0` … in site.css)


def speaker_colour(name: str) -> int:
    """A speaker's colour in the palette, the same for a name in every chat and on every page."""
    return zlib.crc32(name.strip().casefold().encode()) % SPEAKER_COLOURS


def speaker_initial(name: str) -> str:
    return (name.strip()[:1] or "?").upper()


@dataclass
class MessageView:
    message: Message
    variant: Variant | None
    count: int

    @property
    def streaming(self) -> bool:
        return self.variant is not None and self.variant.state == Variant.State.STREAMING

    @property
    def colour(self) -> int:
        return speaker_colour(self.message.speaker_name)

    @property
    def initial(self) -> str:
        return speaker_initial(self.message.speaker_name)

    @property
    def avatar_url(self) -> str:
        """The speaker's picture: the seated character's card image; for a person, the persona
        the message was written as, else (an imported message, a deleted persona) the persona
        its author writes as in this room now; "" for a speaker with neither."""
        m = self.message
        if m.kind == Message.Kind.CHARACTER and m.seat_id is not None:
            return reverse("rooms:seat_avatar", args=[m.room_id, m.seat_id])
        if m.kind == Message.Kind.HUMAN and m.persona_id is not None:
            return reverse("rooms:persona_avatar", args=[m.room_id, m.persona_id])
        if m.kind == Message.Kind.HUMAN and m.author_id is not None:
            return reverse("rooms:person_avatar", args=[m.room_id, m.author_id])
        return ""

    @cached_property
    def html(self) -> str:
        """The active variant's text as HTML; empty while it streams (the partial shows it raw)."""
        if self.streaming or self.variant is None:
            return ""
        return render_cached(self.variant.text)


def message_view(message: Message, variants: list[Variant] | None = None) -> MessageView:
    variants = variants if variants is not None else list(message.variants.defer("prompt"))
    active = next(
        (v for v in variants if v.index == message.active_index), variants[-1] if variants else None
    )
    return MessageView(message=message, variant=active, count=len(variants))


# What the message partial shows of a message and of its active variant. A page reads these
# columns alone, as plain tuples, to find its partials in the cache.
MESSAGE_FIELDS = (
    "pk", "room_id", "seq", "kind", "hidden", "author_id", "speaker_name", "created_at", "active_index",
    "seat_id", "persona_id",
)  # fmt: skip
VARIANT_FIELDS = ("pk", "message_id", "index", "state", "tokens", "model", "text")
_STREAMING = Variant.State.STREAMING.value


def _page_version() -> str:
    """What every partial on this page depends on besides its message: the partial's source
    (with the avatar it includes), the Markdown renderer, the time zone and the language."""
    source = get_template(MESSAGE_TEMPLATE).template.source + get_template(AVATAR_TEMPLATE).template.source
    return digest(source, RENDERER_KEY, timezone.get_current_timezone_name(), translation.get_language())


def _key(version: str, message: tuple, count: int, variant: tuple | None) -> str:
    """A digest of everything the message partial shows: the message's and its active variant's
    fields (MESSAGE_FIELDS, VARIANT_FIELDS, text included), how many variants it has, and the
    page version. An edit, a swipe, hiding or anything else that changes the partial changes the
    key, so a cached partial is never shown for a message that has changed since."""
    return digest(version, repr((message, count, variant)))


def fragment_key(view: MessageView, *, version: str) -> str:
    m, v = view.message, view.variant
    message = tuple(getattr(m, name) for name in MESSAGE_FIELDS)
    variant = tuple(getattr(v, name) for name in VARIANT_FIELDS) if v else None
    return _key(version, message, view.count, variant)


def _render(views: list[MessageView], version: str) -> list[str]:
    """Render the partials of `views` (with the CSRF placeholder) and cache the finished ones."""
    template = get_template(MESSAGE_TEMPLATE)
    out, fresh = [], {}
    for view in views:
        html = template.render({"m": view, "csrf_token": CSRF_SLOT})
        if not view.streaming:
            fresh[fragment_key(view, version=version)] = html
        out.append(html)
    _FRAGMENTS.set_many(fresh)
    return out


def _fill_csrf(html: str, csrf_token: str) -> str:
    filled = CSRF_INPUT.format(escape(csrf_token)) if csrf_token else ""
    return html.replace(CSRF_INPUT.format(CSRF_SLOT), filled)


def message_html(message: Message) -> str:
    """One message's partial, as a socket push or an edit's answer sends it (no CSRF token)."""
    return _fill_csrf(_render([message_view(message)], _page_version())[0], "")


@dataclass(frozen=True)
class RoomPage:
    """The messages a room page shows: their numbers and their partials as one piece of HTML,
    and whether the room has messages before and after them."""

    seqs: list[int]
    html: SafeString
    earlier: bool = False
    later: bool = False


def _window(room, *, limit: int, at: int | None = None, before: int | None = None, after: int | None = None):
    """The messages asked for, by seq range on the (room, seq) index, and whether they come
    newest first (to be reversed)."""
    if before is not None:
        return room.messages.filter(seq__lt=before).order_by("-seq")[:limit], True
    if after is not None:
        return room.messages.filter(seq__gt=after).order_by("seq")[:limit], False
    if at is None:
        return room.messages.order_by("-seq")[:limit], True
    return room.messages.filter(seq__gte=at - AT_BEFORE).order_by("seq")[:limit], False


def room_page(
    room,
    *,
    csrf_token: str,
    limit: int = 200,
    at: int | None = None,
    before: int | None = None,
    after: int | None = None,
) -> RoomPage:
    """The room page's messages (see `room_views` for which; with `before` or `after`, the
    `limit` messages next to that seq, as scrolling asks for them), their partials from the cache.

    Two queries read the messages and their variants as plain rows, enough to name each partial;
    only the messages whose partial is not cached (new, changed, or streaming) are then loaded
    as objects and rendered: two more queries, however many they are. Their partials are cached
    under keys made from those objects, so a message that changed in between is never cached
    under its old key. Two indexed look-ups say whether more messages lie on either side.
    """
    window, newest_first = _window(room, limit=limit, at=at, before=before, after=after)
    rows = list(window.values_list(*MESSAGE_FIELDS))
    if newest_first:
        rows.reverse()
    variants: dict[int, list[tuple]] = {}
    # No ORDER BY: ordering by message would join the messages again; the rows are sorted here.
    found = Variant.objects.filter(message_id__in=[r[0] for r in rows]).order_by()
    for row in found.values_list(*VARIANT_FIELDS):
        variants.setdefault(row[1], []).append(row)
    version = _page_version()
    keys: list[str | None] = []
    for row in rows:
        found = sorted(variants.get(row[0], ()), key=lambda v: v[2])
        active = next((v for v in found if v[2] == row[8]), found[-1] if found else None)
        streaming = active is not None and active[3] == _STREAMING
        keys.append(None if streaming else _key(version, row, len(found), active))
    cached = _FRAGMENTS.get_many(k for k in keys if k is not None)
    missing = [row[0] for row, key in zip(rows, keys, strict=True) if key not in cached]
    rendered: dict[int, str] = {}
    if missing:
        views = _views(Message.objects.filter(pk__in=missing).order_by("seq"))
        rendered = dict(zip((v.message.pk for v in views), _render(views, version), strict=True))
    parts = []
    for row, key in zip(rows, keys, strict=True):
        html = cached.get(key) if key is not None else None
        if html is None:
            html = rendered.get(row[0], "")  # "" for a message deleted since the first read
        parts.append(html)
    seqs = [r[2] for r in rows]
    return RoomPage(
        seqs=seqs,
        html=mark_safe(_fill_csrf("".join(parts), csrf_token)),
        earlier=bool(seqs) and room.messages.filter(seq__lt=seqs[0]).exists(),
        later=bool(seqs) and room.messages.filter(seq__gt=seqs[-1]).exists(),
    )


def clear_caches() -> None:
    """Forget this process's rendered partials and Markdown (Django's cache keeps its copies)."""
    _FRAGMENTS.clear()
    rendering.clear_cache()


def room_views(room, *, limit: int = 200, at: int | None = None) -> list[MessageView]:
    """Return the newest `limit` messages, oldest first, in two queries; with `at`, the `limit`
    messages starting a few before message `at` instead (a link into the past)."""
    window, newest_first = _window(room, limit=limit, at=at)
    messages = list(window)
    if newest_first:
        messages.reverse()
    return _views(messages)


def _views(messages) -> list[MessageView]:
    """Views of `messages` with their variants, in one more query."""
    messages = list(messages)
    by_message: dict[int, list[Variant]] = {}
    # The recorded prompt is the host's alone and can be large: a page never needs it.
    variants = Variant.objects.filter(message__in=messages).defer("prompt").order_by("index")
    for variant in variants:
        by_message.setdefault(variant.message_id, []).append(variant)
    return [message_view(m, by_message.get(m.pk, [])) for m in messages]
