"""Render chat messages as safe HTML: CommonMark plus roleplay conventions.

HTML written in a message (the status panels character cards ask for) is parsed with the
Markdown and the whole result goes through `rooms.sanitizer`, which keeps only allowed markup.

Rendering is pure (the HTML depends on the text and on this module's rules only), so rendered
HTML is cached by a digest of the text: `render_cached`. See `HtmlCache` for where it is kept.
"""

from __future__ import annotations

import hashlib
import logging
import re
import threading
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from html import unescape
from typing import Any

import markdown_it
from django.utils.html import strip_tags
from markdown_it import MarkdownIt
from markdown_it.common.utils import escapeHtml
from markdown_it.renderer import RendererHTML
from markdown_it.rules_core import StateCore
from markdown_it.token import Token
from markdown_it.utils import OptionsDict

from rooms.sanitizer import sanitize_html

__all__ = ["HtmlCache", "clear_cache", "digest", "render_cached", "render_count", "render_message"]

logger = logging.getLogger(__name__)

SAFE_URL = re.compile(r"^(?:https?://|mailto:)", re.IGNORECASE)
SAFE_LANGUAGE = re.compile(r"^[\w.+#-]{1,40}$")
LINK_REL = "nofollow noopener noreferrer"
HEADING_TAGS = {"h1": "h4", "h2": "h4", "h3": "h5", "h4": "h6", "h5": "h6", "h6": "h6"}

STRAIGHT = '"'
CURLY_OPEN = "\u201c"
CURLY_CLOSE = "\u201d"
QUOTE_CHARS = re.compile(f"[{STRAIGHT}{CURLY_OPEN}{CURLY_CLOSE}]")


def is_safe_url(url: str) -> bool:
    """Tell whether a normalized URL may become a link."""
    return bool(SAFE_URL.match(url))


def _secure_links(children: list[Token]) -> list[Token]:
    """Drop links whose target is not allowed, keep their text, and add rel/target to the rest."""
    kept: list[Token] = []
    dropped: list[bool] = []
    for token in children:
        if token.type == "link_open":
            href = str(token.attrGet("href") or "")
            allowed = is_safe_url(href)
            dropped.append(not allowed)
            if not allowed:
                continue
            token.attrs = {"href": href, "rel": LINK_REL, "target": "_blank"}
        elif token.type == "link_close":
            if dropped and dropped.pop():
                continue
        kept.append(token)
    return kept


def _quote_pairs(children: Sequence[Token]) -> list[tuple[int, int, int, int]]:
    """Pair quote marks that open and close inside the same inline container.

    Each pair is (open token, open offset, close token, close offset). Pairing within one
    container and with a stack keeps the resulting spans properly nested around <em>, <a> etc.
    """
    pairs: list[tuple[int, int, int, int]] = []
    # One stack of pending openers (kind, token, offset) per open container.
    stacks: list[list[tuple[str, int, int]]] = [[]]
    for index, token in enumerate(children):
        if token.nesting == 1:
            stacks.append([])
        elif token.nesting == -1:
            if len(stacks) > 1:
                stacks.pop()  # openers left unclosed inside the element stay plain text
        elif token.type == "text":
            stack = stacks[-1]
            for match in QUOTE_CHARS.finditer(token.content):
                char, offset = match.group(), match.start()
                if char == STRAIGHT:
                    if stack and stack[-1][0] == STRAIGHT:
                        _, open_index, open_offset = stack.pop()
                        pairs.append((open_index, open_offset, index, offset))
                    else:
                        stack.append((STRAIGHT, index, offset))
                elif char == CURLY_OPEN:
                    stack.append((CURLY_OPEN, index, offset))
                else:
                    depth = next(
                        (d for d in range(len(stack) - 1, -1, -1) if stack[d][0] == CURLY_OPEN), None
                    )
                    if depth is not None:
                        _, open_index, open_offset = stack[depth]
                        del stack[depth:]
                        pairs.append((open_index, open_offset, index, offset))
    return pairs


def _mark_speech(children: list[Token]) -> None:
    """Record where speech spans open and close in each text token, for the text renderer."""
    for open_index, open_offset, close_index, close_offset in _quote_pairs(children):
        # (offset, order, is_open): a close sorts before an open at the same offset.
        children[open_index].meta.setdefault("speech", []).append((open_offset, 1, True))
        children[close_index].meta.setdefault("speech", []).append((close_offset + 1, 0, False))


def _render_text(
    self: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict, env: Any
) -> str:
    """Escape text, opening and closing speech spans where _mark_speech asked."""
    token = tokens[idx]
    cuts = token.meta.get("speech")
    if not cuts:
        return escapeHtml(token.content)
    content, start, parts = token.content, 0, []
    for offset, _, is_open in sorted(cuts):
        parts.append(escapeHtml(content[start:offset]))
        parts.append('<span class="speech">' if is_open else "</span>")
        start = offset
    parts.append(escapeHtml(content[start:]))
    return "".join(parts)


def _chat_rules(state: StateCore) -> None:
    """Secure links, demote headings, tidy fence languages and mark speech."""
    for token in state.tokens:
        if token.type in ("heading_open", "heading_close"):
            token.tag = HEADING_TAGS.get(token.tag, "h6")
        elif token.type == "fence":
            language = token.info.split(maxsplit=1)[0] if token.info.strip() else ""
            token.info = language if SAFE_LANGUAGE.match(language) else ""
        elif token.type == "inline" and token.children:
            token.children = _secure_links(token.children)
            _mark_speech(token.children)


def _render_image(
    self: RendererHTML, tokens: Sequence[Token], idx: int, options: OptionsDict, env: Any
) -> str:
    """Show an image as its alt text (or its URL) so nothing is ever fetched."""
    token = tokens[idx]
    alt = self.renderInlineAsText(token.children or [], options, env).strip()
    if not alt:
        src = str(token.attrGet("src") or "")
        alt = src if is_safe_url(src) else "image"
    return f'<span class="image-alt">{escapeHtml(alt)}</span>'


def _build() -> MarkdownIt:
    """Configure the shared Markdown parser."""
    md = MarkdownIt("commonmark", {"html": True, "breaks": True, "linkify": False, "xhtmlOut": False})
    md.enable(["table", "strikethrough"])
    # Links, autolinks, images and reference definitions all consult this before being parsed.
    md.validateLink = is_safe_url  # type: ignore[method-assign]
    md.core.ruler.push("orbchat_chat", _chat_rules)
    md.add_render_rule("image", _render_image)
    md.add_render_rule("text", _render_text)
    return md


_MD = _build()

# Part of every cache key, with markdown-it's version: raise it whenever the same text would
# render differently (a rule above, the Markdown options), so HTML cached before is never served.
RENDERER_VERSION = 2

_renders = 0
_renders_lock = threading.Lock()


def render_message(text: str) -> str:
    """Return safe HTML for a chat message: Markdown, with the HTML it holds through the sanitiser."""
    global _renders
    if not text or not text.strip():
        return ""
    with _renders_lock:
        _renders += 1
    return sanitize_html(_MD.render(text))


_MACRO_RE = re.compile(r"\{\{.*?\}\}", re.DOTALL)


def plain_excerpt(text: str, *, limit: int) -> str:
    """The text as a person reads it on one line: no macros, Markdown or HTML, cut at a word
    within `limit` characters (with "…" when cut). The result is not escaped."""
    html = _MD.render(_MACRO_RE.sub("", text))
    plain = " ".join(unescape(strip_tags(html)).split())
    if len(plain) <= limit:
        return plain
    cut = plain[: limit - 1]
    if " " in cut[limit // 2 :]:
        cut = cut.rsplit(" ", 1)[0]
    return cut.rstrip(" ,;:.") + "…"


def render_count() -> int:
    """How many messages this process has run through the Markdown renderer so far."""
    return _renders


def digest(*parts: object) -> str:
    """A short, stable digest of `parts` (strings, numbers, None), for cache keys."""
    h = hashlib.blake2b(digest_size=16)
    for part in parts:
        h.update(str(part).encode("utf-8", "surrogatepass"))
        h.update(b"\x1f")
    return h.hexdigest()


class HtmlCache:
    """Rendered HTML by key: a process-local LRU in front of Django's cache (CACHES["default"]).

    The LRU answers a page view without any round trip; Django's cache lets other processes
    (more web processes, the worker) reuse what one of them rendered when CACHES points at a
    shared store such as Redis. Django's default in-process cache is not used: it would only
    repeat the LRU, and its few hundred entries would push out whatever else it holds. Keys
    name their content completely (a digest of everything the HTML depends on), so an entry is
    never invalidated, only evicted: a changed text makes a new key. A failing Django cache
    costs renders, never a page.
    """

    def __init__(self, prefix: str, *, max_chars: int, timeout: int = 7 * 24 * 3600) -> None:
        self.prefix = prefix
        self.max_chars = max_chars
        self.timeout = timeout
        self._entries: OrderedDict[str, str] = OrderedDict()
        self._chars = 0
        self._lock = threading.Lock()

    def _shared(self):
        """Django's cache when it is shared between processes, else None."""
        from django.core.cache import caches
        from django.core.cache.backends.locmem import LocMemCache

        cache = caches["default"]
        return None if isinstance(cache, LocMemCache) else cache

    def _name(self, key: str) -> str:
        return f"orbchat:{self.prefix}:{key}"

    def get_many(self, keys: Iterable[str]) -> dict[str, str]:
        """Return the cached HTML of those `keys` that have some."""
        found: dict[str, str] = {}
        missing: list[str] = []
        with self._lock:
            for key in keys:
                html = self._entries.get(key)
                if html is None:
                    missing.append(key)
                else:
                    self._entries.move_to_end(key)
                    found[key] = html
        cache = self._shared()
        if missing and cache is not None:
            try:
                shared = cache.get_many([self._name(k) for k in missing])
            except Exception:  # noqa: BLE001 - a cache outage must not fail the page
                logger.warning("message HTML cache unavailable", exc_info=True)
                shared = {}
            if shared:
                fetched = {key: shared[self._name(key)] for key in missing if self._name(key) in shared}
                self._remember(fetched)
                found.update(fetched)
        return found

    def set_many(self, entries: dict[str, str]) -> None:
        """Keep `entries` here and in Django's cache."""
        if not entries:
            return
        self._remember(entries)
        cache = self._shared()
        if cache is None:
            return
        try:
            cache.set_many({self._name(k): v for k, v in entries.items()}, self.timeout)
        except Exception:  # noqa: BLE001 - a cache outage must not fail the page
            logger.warning("message HTML cache unavailable", exc_info=True)

    def _remember(self, entries: dict[str, str]) -> None:
        with self._lock:
            for key, html in entries.items():
                old = self._entries.pop(key, None)
                if old is not None:
                    self._chars -= len(old)
                self._entries[key] = html
                self._chars += len(html)
            while self._chars > self.max_chars and self._entries:
                _, evicted = self._entries.popitem(last=False)
                self._chars -= len(evicted)

    def clear(self) -> None:
        """Forget this process's entries (Django's cache keeps its own until they expire)."""
        with self._lock:
            self._entries.clear()
            self._chars = 0


RENDERER_KEY = f"{RENDERER_VERSION}-{markdown_it.__version__}"
_MARKDOWN = HtmlCache(f"md{RENDERER_KEY}", max_chars=16_000_000)


def render_cached(text: str) -> str:
    """`render_message(text)`, rendered once per distinct text.

    The key is a digest of the text itself: an edit or a swipe shows another text, so it finds
    another key, and HTML cached for an old text can never be served for a new one.
    """
    if not text or not text.strip():
        return ""
    key = digest(text)
    html = _MARKDOWN.get_many([key]).get(key)
    if html is None:
        html = render_message(text)
        _MARKDOWN.set_many({key: html})
    return html


def clear_cache() -> None:
    """Forget this process's rendered Markdown (Django's cache keeps its copies)."""
    _MARKDOWN.clear()
