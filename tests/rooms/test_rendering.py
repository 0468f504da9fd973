from __future__ import annotations

import re
import time
from html.parser import HTMLParser

import pytest

from rooms.rendering import render_message

FORBIDDEN_TAGS = {"script", "img", "iframe", "object", "embed", "style", "link", "meta", "form", "svg"}
SAFE_HREF = re.compile(r"^(?:https?://|mailto:)", re.IGNORECASE)
LINK_ATTRS = {"href": None, "rel": "nofollow noopener noreferrer", "target": "_blank"}


class TagCollector(HTMLParser):
    """Collect every real tag the way a browser would see it."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[tuple[str, dict[str, str | None]]] = []

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append((tag, dict(attrs)))


def tags_of(html: str) -> list[tuple[str, dict[str, str | None]]]:
    parser = TagCollector()
    parser.feed(html)
    parser.close()
    return parser.tags


def assert_inert(html: str) -> None:
    lowered = html.lower()
    for needle in ("<script", "<img", "<iframe"):
        assert needle not in lowered, html
    # Text "<" is always escaped, so every "<" left in the output opens a tag this renderer made.
    assert not re.search(r"<[^>]*\son\w+\s*=", html, re.IGNORECASE), html
    for tag, attrs in tags_of(html):
        assert tag not in FORBIDDEN_TAGS, html
        assert not any(name.startswith("on") for name in attrs), html
        assert "src" not in attrs, html
        assert "style" not in attrs, html  # the site's CSP forbids style attributes
        if "href" in attrs:
            href = attrs["href"] or ""
            assert tag == "a" and SAFE_HREF.match(href), html
            assert "javascript:" not in href.lower(), html


XSS_VECTORS = [
    "<script>alert(1)</script>",
    "<SCRIPT SRC=//evil/x.js></SCRIPT>",
    "<img src=x onerror=alert(1)>",
    "<iframe src='https://evil'></iframe>",
    '<a href="x">click</a>',
    '<a href="javascript:alert(1)">click</a>',
    "<svg/onload=alert(1)>",
    "<div style=\"background:url('javascript:alert(1)')\">x</div>",
    "[x](javascript:alert(1))",
    "[x](JaVaScRiPt:alert(1))",
    "[x]( javascript:alert(1) )",
    "[x](<javascript:alert(1)>)",
    "[x](java\nscript:alert(1))",
    "[x](&#106;avascript:alert(1))",
    "[x](javascript&#58;alert(1))",
    "[x](vbscript:msgbox(1))",
    "[x](file:///etc/passwd)",
    "[x](data:text/html;base64,PHNjcmlwdD5hbGVydCgxKTwvc2NyaXB0Pg==)",
    "[x](//evil.example/path)",
    "[x](/relative)",
    "[x]()",
    "[x](<>)",
    "[x][ref]\n\n[ref]: javascript:alert(1)",
    '[x](http://a "onmouseover=alert(1)")',
    '[x](http://a "x onmouseover=alert(1)")',
    '[x](http://a "\\" onmouseover=alert(1) x=\\"")',
    '[x](http://a"onmouseover="alert(1))',
    "<javascript:alert(1)>",
    "<JAVASCRIPT:alert(1)>",
    "<data:text/html,<script>alert(1)</script>>",
    "![x](http://evil/img.png)",
    "![x](javascript:alert(1))",
    "![x](data:image/png;base64,AAAA)",
    '![x" onerror="alert(1)](http://evil/img.png)',
    "[![x](http://evil/img.png)](javascript:alert(1))",
    "&lt;script&gt;alert(1)&lt;/script&gt;",
    "&#60;script&#62;alert(1)&#60;/script&#62;",
    "`<script>alert(1)</script>`",
    "```html\n<script>alert(1)</script>\n```",
    '```js" onmouseover="alert(1)\ncode\n```',
    "    <script>alert(1)</script>",
    "> <script>alert(1)</script>",
    "| <script>alert(1)</script> | <img src=x onerror=alert(1)> |\n|---|---|\n| a | b |",
    '"<img src=x onerror=alert(1)>" *<script>alert(1)</script>*',
    "<!-- <script>alert(1)</script> -->",
    "<![CDATA[<script>alert(1)</script>]]>",
    "\x00<script>alert(1)</script>",
    "<sup/onload=alert(1)>x</sup>",
    "<details open ontoggle=alert(1)>",
    '<div style="background:url(javascript:alert(1))">x</div>',
    '<span style="x:expression(alert(1))">x</span>',
]


@pytest.mark.parametrize("text", XSS_VECTORS)
def test_xss_vectors_are_inert(text):
    assert_inert(render_message(text))


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        ("<script>alert(1)</script>after", "after"),
        ("<style>body{display:none}</style>after", "after"),
        ("<iframe src='https://evil'>inside</iframe>after", "after"),
        ("<object data=x.swf><param name=a value=b>inside</object>after", "after"),
        ("<embed src=x.swf>after", "after"),
        ("<svg><a href='https://example.com'>inside</a></svg>after", "after"),
        ("<textarea><b>inside</b></textarea>after", "after"),
        ("<noscript><img src=x></noscript>after", "after"),
    ],
)
def test_elements_that_run_or_embed_are_dropped_with_their_content(text, kept):
    html = render_message(text)
    assert_inert(html)
    assert "inside" not in html and kept in html
    assert "alert" not in html and "evil" not in html


@pytest.mark.parametrize(
    ("text", "kept"),
    [
        (
            "<form action='https://evil/steal' method=post>"
            "<input name=pw value=x>Log in<button>Go</button></form>",
            "Log in",
        ),
        ("<img src=x onerror=alert(1)>caption", "caption"),
        ("<font color=red>warm</font>", "warm"),
        ("<center>middle</center>", "middle"),
        ("<select><option>one</option></select><label>name</label>", "name"),
    ],
)
def test_other_html_elements_lose_their_tag_and_keep_their_text(text, kept):
    html = render_message(text)
    assert_inert(html)
    assert kept in html
    assert not {tag for tag, _ in tags_of(html)} & {
        "form",
        "input",
        "button",
        "img",
        "font",
        "center",
        "select",
    }
    assert "evil" not in html and "onerror" not in html


@pytest.mark.parametrize("text", ["I <grin> at you", "she <sighs> softly", "a <3 b"])
def test_tags_that_are_no_html_element_show_as_text(text):
    html = render_message(text)
    assert tags_of(html) == [("p", {})]
    assert html.startswith("<p>") and "&lt;" in html


STATUS_PANEL = """<details open>
<summary>📊 Status</summary>
<div class="status-panel">
<table class="stats">
<tr><th scope="row">HP</th><td colspan="2"><span class="bar hp">80/100</span></td></tr>
<tr><th>Mood</th><td>Wary<sup>1</sup> H<sub>2</sub>O</td></tr>
</table>
<hr>
<small>Day 3, evening<br>Location: the harbour</small>
<ruby>港<rp>(</rp><rt>minato</rt><rp>)</rp></ruby>
</div>
</details>"""


def test_a_status_panel_renders_as_html():
    html = render_message(STATUS_PANEL)
    assert_inert(html)
    tags = tags_of(html)
    names = [tag for tag, _ in tags]
    for tag in (
        "details",
        "summary",
        "div",
        "table",
        "tr",
        "th",
        "td",
        "span",
        "sup",
        "sub",
        "hr",
        "small",
        "br",
    ):
        assert tag in names, tag
    for tag in ("ruby", "rp", "rt"):
        assert tag in names, tag
    assert ("details", {"open": ""}) in tags
    assert ("div", {"class": "status-panel"}) in tags
    assert ("td", {"colspan": "2"}) in tags
    assert ("th", {"scope": "row"}) in tags
    assert ("span", {"class": "bar hp"}) in tags
    assert "80/100" in html and "Location: the harbour" in html


def test_markdown_still_works_around_inline_html():
    html = render_message('*waves* <span class="tag">HP 5</span> "Hello," she says.')
    assert html == (
        '<p><em>waves</em> <span class="tag">HP 5</span> '
        '<span class="speech">&quot;Hello,&quot;</span> she says.</p>\n'
    )


@pytest.mark.parametrize(
    "text",
    [
        '<div style="color: #c33; font-weight: bold">x</div>',
        '<div style="background: url(https://evil/x.png); color: red">x</div>',
        '<div style="background-image: url(javascript:alert(1))">x</div>',
        '<div style="width: expression(alert(1))">x</div>',
        '<div style="color: red; position: fixed; top: 0; z-index: 9999">x</div>',
        '<div style="color: \\72\\65\\64">x</div>',
        '<div style="behavior: url(x.htc)">x</div>',
        "| a | b |\n|--:|:-:|\n| 1 | 2 |",
    ],
)
def test_style_attributes_never_reach_the_page(text):
    html = render_message(text)
    assert_inert(html)
    assert "style" not in html and "url(" not in html and "expression" not in html
    assert all("style" not in attrs for _, attrs in tags_of(html))


@pytest.mark.parametrize(
    "text",
    [
        '<div onclick="alert(1)" onmouseover=alert(1) class="a">x</div>',
        '<details ontoggle="alert(1)" open>x</details>',
        '<a href="javascript:alert(1)">x</a>',
        '<a href=" JaVaScRiPt:alert(1)">x</a>',
        '<a href="java&#x09;script:alert(1)">x</a>',
        '<a href="data:text/html,<script>alert(1)</script>">x</a>',
        '<span class="a" id="admin-panel" data-x="1" tabindex="0">x</span>',
        '<div class="x&quot; onclick=&quot;alert(1)">x</div>',
        "<table><tr><td background=javascript:alert(1) colspan=2x>x</td></tr></table>",
        "<math><mtext><table><mglyph><style><img src=x onerror=alert(1)>",
        "<details><summary>a</summary><script>alert(1)</script></details>",
        "<!--><script>alert(1)</script>-->",
        "<div><iframe srcdoc='<script>alert(1)</script>'></iframe></div>",
        "<base href='https://evil/'><a href='https://ok.example'>x</a>",
        "<meta http-equiv=refresh content='0;url=https://evil'>",
        "<link rel=stylesheet href=https://evil/x.css>",
    ],
)
def test_html_attacks_are_inert(text):
    html = render_message(text)
    assert_inert(html)
    for needle in ("alert", "evil", "onclick", "ontoggle", "onload", "id=", "data-x", "tabindex"):
        assert needle not in html, html


def test_raw_links_get_the_same_treatment_as_markdown_links():
    html = render_message('<a href="https://example.com/a" target="_self" rel="opener">site</a>')
    assert ("a", {**LINK_ATTRS, "href": "https://example.com/a"}) in tags_of(html)


@pytest.mark.parametrize("text", ["<div><span>open", "</div></table>stray", "<table><tr><td>cell"])
def test_unbalanced_html_cannot_break_the_page(text):
    html = render_message(text)
    opened = [tag for tag, _ in tags_of(html) if tag not in {"br", "hr", "wbr"}]
    assert all(html.count(f"</{tag}>") == html.count(f"<{tag}") for tag in set(opened)), html
    assert "&lt;/div" not in html


@pytest.mark.parametrize(
    "text",
    [
        "[x](javascript:alert(1))",
        "[x](JaVaScRiPt:alert(1))",
        "[x](data:text/html;base64,PHNjcmlwdD4=)",
        "[x](vbscript:msgbox(1))",
        "[x](file:///etc/passwd)",
        "[x](//evil.example/path)",
        "<javascript:alert(1)>",
        "[x]()",
    ],
)
def test_unsafe_links_render_as_plain_text(text):
    html = render_message(text)
    assert "<a" not in html
    assert tags_of(html) == [("p", {})]


def test_entities_stay_text():
    assert render_message("&lt;script&gt;") == "<p>&lt;script&gt;</p>\n"


def test_link_titles_are_dropped():
    html = render_message('[x](http://a "onmouseover=alert(1)")')
    assert tags_of(html) == [("p", {}), ("a", {**LINK_ATTRS, "href": "http://a"})]


@pytest.mark.parametrize(
    ("text", "href"),
    [
        ("[docs](https://example.com/a?b=1&c=2)", "https://example.com/a?b=1&c=2"),
        ("[site](HTTP://Example.com)", "HTTP://Example.com"),
        ("<https://example.com>", "https://example.com"),
        ("<ada@example.com>", "mailto:ada@example.com"),
        ("[mail](mailto:ada@example.com)", "mailto:ada@example.com"),
    ],
)
def test_safe_links_open_in_a_new_tab(text, href):
    html = render_message(text)
    assert ("a", {**LINK_ATTRS, "href": href}) in tags_of(html)


def test_bare_urls_are_not_linkified():
    assert render_message("see https://example.com") == "<p>see https://example.com</p>\n"


def test_images_show_their_alt_text():
    html = render_message("![a *red* door](http://evil/img.png)")
    assert html == '<p><span class="image-alt">a red door</span></p>\n'


def test_image_without_alt_shows_its_url():
    html = render_message("![](https://example.com/door.png)")
    assert html == '<p><span class="image-alt">https://example.com/door.png</span></p>\n'


def test_actions_are_italic():
    assert render_message("*waves* hello _nods_") == "<p><em>waves</em> hello <em>nods</em></p>\n"


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("*sighs", "<p>*sighs</p>\n"),
        ("a * b", "<p>a * b</p>\n"),
        ("*sighs\n\nThen *smiles*", "<p>*sighs</p>\n<p>Then <em>smiles</em></p>\n"),
        ("**half* done *ok*", "<p>*<em>half</em> done <em>ok</em></p>\n"),
        ("*a\n*b* c", "<p>*a<br>\n<em>b</em> c</p>\n"),
    ],
)
def test_unbalanced_asterisks_do_not_break_the_rest(text, expected):
    assert render_message(text) == expected


def test_straight_quotes_become_speech():
    html = render_message('She smiles. "Hello there," she says.')
    assert html == '<p>She smiles. <span class="speech">&quot;Hello there,&quot;</span> she says.</p>\n'


def test_curly_quotes_become_speech():
    html = render_message("\u201cHello,\u201d she says.")
    assert html == '<p><span class="speech">\u201cHello,\u201d</span> she says.</p>\n'


def test_several_speeches_in_one_paragraph():
    html = render_message('"One," she says. "Two."')
    assert html.count('<span class="speech">') == 2
    assert html.count("</span>") == 2


def test_speech_wraps_inline_markup():
    html = render_message('"Hello *there* friend"')
    assert html == '<p><span class="speech">&quot;Hello <em>there</em> friend&quot;</span></p>\n'


def test_speech_nests_inside_emphasis_and_links():
    assert render_message('*"Psst," she whispers*') == (
        '<p><em><span class="speech">&quot;Psst,&quot;</span> she whispers</em></p>\n'
    )
    assert render_message("[\u201chi\u201d](https://a.example)").count('<span class="speech">') == 1


def test_speech_crossing_markup_is_left_alone():
    assert render_message('*"hi* there"') == "<p><em>&quot;hi</em> there&quot;</p>\n"


def test_speech_spans_line_breaks():
    html = render_message('"Wait,\nplease."')
    assert html == '<p><span class="speech">&quot;Wait,<br>\nplease.&quot;</span></p>\n'


@pytest.mark.parametrize(
    "text",
    ['She is 5" tall.', "\u201cHello, she says.", 'He says "wait\n\nand goes."', "Ends here\u201d."],
)
def test_unbalanced_quotes_are_left_alone(text):
    assert "speech" not in render_message(text)


def test_speech_not_applied_in_code():
    html = render_message('Run `say "hi"` now.\n\n```\nprint("hi")\n```\n\n    indented "code"')
    assert "speech" not in html
    assert "<code>say &quot;hi&quot;</code>" in html


def test_speech_around_inline_code_keeps_code_plain():
    html = render_message('"Type `ls "x"` here"')
    assert html == (
        '<p><span class="speech">&quot;Type <code>ls &quot;x&quot;</code> here&quot;</span></p>\n'
    )


def test_single_newline_is_a_line_break():
    assert render_message("line one\nline two") == "<p>line one<br>\nline two</p>\n"


def test_blank_line_separates_paragraphs():
    assert render_message("one\n\ntwo") == "<p>one</p>\n<p>two</p>\n"


def test_fenced_code_with_language():
    html = render_message("```python\nif a < b:\n    pass\n```")
    assert html == '<pre><code class="language-python">if a &lt; b:\n    pass\n</code></pre>\n'


def test_fence_language_with_odd_characters_is_dropped():
    html = render_message('```x"onclick=alert(1)\ncode\n```')
    assert html == "<pre><code>code\n</code></pre>\n"


def test_inline_code_is_escaped():
    assert render_message("use `<b>` tags") == "<p>use <code>&lt;b&gt;</code> tags</p>\n"


@pytest.mark.parametrize(
    ("text", "tag"),
    [("# A", "h4"), ("## A", "h4"), ("### A", "h5"), ("#### A", "h6"), ("###### A", "h6"), ("A\n===", "h4")],
)
def test_headings_are_demoted(text, tag):
    assert render_message(text) == f"<{tag}>A</{tag}>\n"


def test_tables_and_strikethrough():
    html = render_message("| a | b |\n|---|---|\n| 1 | ~~2~~ |")
    assert "<table>" in html and "<td><s>2</s></td>" in html


@pytest.mark.parametrize("text", ["", "   ", "\n\n\t \n"])
def test_blank_text_renders_nothing(text):
    assert render_message(text) == ""


def test_a_message_at_the_size_limit_renders_without_runaway_backtracking():
    paragraph = (
        "Maren sets the lantern down and looks out at the fog. *She pulls her coat tighter, listening to "
        'the distant bell.* "The boats should be back by now," she says, glancing at you. "Stay close '
        'to the light tonight."\n\n'
    )
    text = (paragraph * (100_000 // len(paragraph) + 1))[:100_000]
    started = time.perf_counter()
    html = render_message(text)
    elapsed = time.perf_counter() - started
    assert html.count('<span class="speech">') > 900
    # Not a speed target (typical times: docs/benchmarks.md): a pattern that backtracks without
    # bound takes minutes here, so only an order-of-magnitude bound is checked, loose enough for a
    # loaded CI machine.
    assert elapsed < 5


@pytest.mark.parametrize("unit", ["*a ", '"', "[", "<", "`a ", "a\n"])
def test_markup_heavy_message_renders(unit):
    text = unit * (20_000 // len(unit))
    assert_inert(render_message(text))
