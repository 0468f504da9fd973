"""Keep the HTML that character cards use for status panels, and nothing that can run or fetch.

`sanitize_html` re-writes HTML from an allow-list: every tag, attribute and text it emits is
written by this module (quoted and escaped), so nothing in the input reaches the page as it came.
- Allowed tags keep only their allowed attributes: `class` and `title` everywhere, a few
  table, list and details attributes, and `href` on links when it is http(s) or mailto. `style`
  never: the site's Content-Security-Policy forbids style attributes, and dropping them means no
  `url()` or `expression()` can reach the page.
- Elements that run, embed or fetch (`script`, `style`, `iframe`, `object`, `svg`, `textarea`…)
  are dropped with everything inside them.
- Other HTML elements (`form`, `input`, `button`, `img`, `font`…) lose their tag and keep their
  text; a tag that is no HTML element at all (`<grin>`) is shown as the text it was.
- Open elements are closed at the end and stray end tags dropped, so a message cannot break
  the page around it.
"""

from __future__ import annotations

import re
from html.parser import HTMLParser

__all__ = ["sanitize_html"]

SAFE_URL = re.compile(r"^(?:https?://|mailto:)", re.IGNORECASE)
LINK_REL = "nofollow noopener noreferrer"

VOID = frozenset({"br", "hr", "wbr"})
ALLOWED = frozenset(
    {
        *VOID,
        "a", "abbr", "b", "bdi", "bdo", "blockquote", "caption", "cite", "code", "col", "colgroup",
        "dd", "del", "details", "dfn", "div", "dl", "dt", "em", "figcaption", "figure", "h1", "h2",
        "h3", "h4", "h5", "h6", "i", "ins", "kbd", "li", "mark", "ol", "p", "pre", "q", "rp", "rt",
        "ruby", "s", "samp", "small", "span", "strong", "sub", "summary", "sup", "table", "tbody",
        "td", "tfoot", "th", "thead", "time", "tr", "u", "ul", "var",
    }
)  # fmt: skip
# Dropped together with everything inside them.
DROP_CONTENT = frozenset(
    {
        "applet", "audio", "canvas", "frame", "frameset", "head", "iframe", "math",
        "noembed", "noframes", "noscript", "object", "script", "select", "style", "svg",
        "template", "textarea", "title", "video", "xmp", "plaintext",
    }
)  # fmt: skip
# HTML elements whose tag is dropped but whose text is kept.
UNWRAP = frozenset(
    {
        "address", "area", "article", "aside", "base", "basefont", "big", "blink", "body",
        "button", "center", "data", "datalist", "dialog", "embed", "fieldset", "font", "footer", "form",
        "header", "hgroup", "html", "image", "img", "input", "isindex", "keygen", "label",
        "legend", "link", "main", "map", "marquee", "menu", "meta", "meter", "nav", "nobr",
        "optgroup", "option", "output", "param", "picture", "portal", "progress", "search",
        "section", "slot", "source", "strike", "track", "tt",
    }
)  # fmt: skip
COMMON_ATTRS = frozenset({"class", "title", "lang", "dir"})
TAG_ATTRS = {
    "a": frozenset({"href"}),
    "details": frozenset({"open"}),
    "ol": frozenset({"start", "reversed", "type"}),
    "li": frozenset({"value"}),
    "td": frozenset({"colspan", "rowspan"}),
    "th": frozenset({"colspan", "rowspan", "scope"}),
    "col": frozenset({"span"}),
    "colgroup": frozenset({"span"}),
    "time": frozenset({"datetime"}),
    "abbr": frozenset({"title"}),
}
NUMERIC_ATTRS = frozenset({"start", "value", "colspan", "rowspan", "span"})
ATTR_VALUE = re.compile(r"^[^\x00-\x1f]{0,200}$")
CLASS_VALUE = re.compile(r"^[\w\s.+#-]{0,200}$")


def _escape(text: str) -> str:
    """Escape as markdown-it does: `&`, `<`, `>` and `"`."""
    return text.replace("&", "&amp;").replace("<", "&lt;").replace(">", "&gt;").replace('"', "&quot;")


def _clean_attrs(tag: str, attrs: list[tuple[str, str | None]]) -> list[tuple[str, str]]:
    allowed = COMMON_ATTRS | TAG_ATTRS.get(tag, frozenset())
    out: list[tuple[str, str]] = []
    seen: set[str] = set()
    for name, raw in attrs:
        name = name.lower()
        value = (raw or "").strip()
        if name in seen:
            continue
        seen.add(name)
        if name not in allowed or not ATTR_VALUE.match(value):
            continue
        if name == "class" and not CLASS_VALUE.match(value):
            continue
        if name in NUMERIC_ATTRS and not value.isdigit():
            continue
        if name == "href":
            compact = re.sub(r"[\x00-\x20]", "", value)
            if not SAFE_URL.match(compact):
                continue
            value = compact
        out.append((name, value))
    if tag == "a":
        if not any(name == "href" for name, _ in out):
            return []
        out = [(n, v) for n, v in out if n not in ("rel", "target")] + [
            ("rel", LINK_REL),
            ("target", "_blank"),
        ]
    return out


class _Sanitizer(HTMLParser):
    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.out: list[str] = []
        self.open: list[str] = []
        self.dropping: list[str] = []  # DROP_CONTENT elements we are inside

    def _start(self, tag: str, attrs: list[tuple[str, str | None]], *, closed: bool) -> None:
        if self.dropping:
            if tag in DROP_CONTENT and not closed:
                self.dropping.append(tag)
            return
        if tag in DROP_CONTENT:
            if not closed:
                self.dropping.append(tag)
            return
        if tag in ALLOWED:
            cleaned = _clean_attrs(tag, attrs)
            if tag == "a" and not cleaned:
                return
            text = "".join(f' {name}="{_escape(value)}"' for name, value in cleaned)
            self.out.append(f"<{tag}{text}>")
            if tag not in VOID and not closed:
                self.open.append(tag)
            elif tag not in VOID:
                self.out.append(f"</{tag}>")
            return
        if tag not in UNWRAP:
            self.out.append(_escape(self.get_starttag_text() or f"<{tag}>"))

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._start(tag, attrs, closed=False)

    def handle_startendtag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self._start(tag, attrs, closed=True)

    def handle_endtag(self, tag: str) -> None:
        if self.dropping:
            if tag in self.dropping:
                del self.dropping[len(self.dropping) - 1 - self.dropping[::-1].index(tag) :]
            return
        if tag in ALLOWED:
            if tag in VOID or tag not in self.open:
                return
            while self.open:
                name = self.open.pop()
                self.out.append(f"</{name}>")
                if name == tag:
                    return
            return
        if tag not in UNWRAP and tag not in DROP_CONTENT:
            self.out.append(_escape(f"</{tag}>"))

    def handle_data(self, data: str) -> None:
        if not self.dropping:
            self.out.append(_escape(data))

    def close_all(self) -> str:
        self.close()
        while self.open:
            self.out.append(f"</{self.open.pop()}>")
        return "".join(self.out)


def sanitize_html(html: str) -> str:
    """Return `html` with only the allowed tags and attributes, every element closed."""
    parser = _Sanitizer()
    parser.feed(html)
    return parser.close_all()
