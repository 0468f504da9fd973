"""The built-in summariser and the Draft helpers it shares with the Utility-model path. No Django."""

from __future__ import annotations

import datetime as dt
import time

import pytest

from memory.drafts import (
    MAX_FACT,
    MAX_FACTS,
    MAX_HEADING,
    MAX_KEYWORDS,
    Draft,
    Line,
    clip,
    read,
    render,
    when_label,
)
from memory.extractive import roll_up, split_sentences, summarise, terms

DAY = dt.datetime(2026, 3, 12, 20, 15, tzinfo=dt.UTC)
PLANTED = "The key is hidden under the third lighthouse step."
SMALL_TALK = {"Hi Maren!", "Thanks!", "Okay.", "Hmm.", "Hello, Ada.", "Thanks for the tea."}


def lines(*messages: tuple[str, str], start: dt.datetime = DAY, seq: int = 1) -> list[Line]:
    return [
        Line(
            seq=seq + i,
            speaker=speaker,
            text=text,
            when=start + dt.timedelta(minutes=i),
            is_human=speaker == "Ada",
        )
        for i, (speaker, text) in enumerate(messages)
    ]


SCENE = lines(
    ("Ada", "Hi Maren! Thanks for the tea."),
    (
        "Maren",
        "*She sets the lantern on the table.* Hello, Ada. The lighthouse has been dark for two nights.",
    ),
    ("Ada", "Hmm. Okay."),
    ("Maren", f"Listen carefully. {PLANTED} Nobody else knows, not even Tobin."),
    ("Ada", "Thanks!"),
    ("Maren", "Tobin keeps asking about the key and the old vault beneath the lighthouse."),
    ("Ada", "Okay."),
    ("Maren", "We light the lamp at midnight, so the smugglers cannot land at Greyharbour."),
)


def body(fact: str) -> str:
    return fact.split(": ", 1)[1]


# summarise: heading


def test_heading_names_the_speakers_in_order_of_appearance_and_the_date():
    heading = summarise(SCENE).heading
    assert heading.startswith("Ada and Maren")
    assert "12 Mar 2026" in heading


def test_heading_with_three_speakers_lists_them_with_commas_and_and():
    block = lines(
        ("Maren", "The tide is turning."), ("Ada", "The boat is ready."), ("Tobin", "The rope is frayed.")
    )
    assert summarise(block).heading.startswith("Maren, Ada and Tobin")


def test_heading_gives_a_range_when_the_block_spans_days():
    block = [
        Line(1, "Maren", "The storm broke the mast.", when=dt.datetime(2026, 3, 12, 23, 0)),
        Line(2, "Ada", "We repaired the mast at dawn.", when=dt.datetime(2026, 3, 14, 6, 0)),
    ]
    assert "12–14 Mar 2026" in summarise(block).heading


def test_heading_includes_a_setting_given_by_the_caller():
    assert "the lamp room" in summarise(SCENE, setting="the lamp room").heading


def test_heading_finds_the_most_mentioned_capitalised_place():
    block = lines(
        ("Maren", "We met Harrow at the Rusty Anchor after the storm."),
        ("Ada", "The cook at the Rusty Anchor saw the smugglers arrive."),
        ("Maren", "Tobin lives in Greyharbour, far from the coast road."),
    )
    assert "Rusty Anchor" in summarise(block).heading


def test_heading_says_whose_point_of_view_it_is():
    heading = summarise(SCENE, pov="Tobin").heading
    assert heading.startswith("As Tobin saw it:")
    assert "Ada and Maren" in heading


# summarise: facts


def test_small_talk_is_not_a_fact():
    facts = summarise(SCENE).facts
    assert facts
    assert not [fact for fact in facts if body(fact) in SMALL_TALK]


def test_only_small_talk_gives_no_facts():
    block = lines(("Ada", "Hi!"), ("Maren", "Hello."), ("Ada", "Thanks!"), ("Maren", "Okay. Hmm."))
    assert summarise(block).facts == []


def test_a_planted_important_sentence_is_a_fact_and_its_words_are_keywords():
    draft = summarise(SCENE)
    assert f"Maren: {PLANTED}" in draft.facts
    assert "key" in draft.keywords
    assert "lighthouse" in draft.keywords


def test_facts_are_in_chronological_order_and_name_their_speaker():
    facts = summarise(SCENE).facts
    positions = [next(i for i, line in enumerate(SCENE) if body(fact) in line.text) for fact in facts]
    assert positions == sorted(positions)
    assert all(fact.startswith(("Maren: ", "Ada: ")) for fact in facts)


def test_action_asterisks_are_stripped_from_facts():
    block = lines(("Maren", "*She hides the brass key beneath the loose floorboard in the lamp room.*"))
    assert summarise(block).facts == [
        "Maren: She hides the brass key beneath the loose floorboard in the lamp room."
    ]


def test_facts_are_capped_and_near_repeats_skipped():
    block = lines(
        *[("Maren", f"The {word} ledger was stolen from the customs house.") for word in "abcdefghij"]
    )
    block += lines(("Ada", "Captain Rell sails for Inchfallow at dawn with forty barrels of oil."), seq=20)
    facts = summarise(block).facts
    assert len(facts) <= MAX_FACTS
    assert len([fact for fact in facts if "ledger" in fact]) == 1
    assert any("Captain Rell" in fact for fact in facts)


def test_an_idf_from_the_caller_decides_which_plain_terms_are_distinctive():
    common = {term: 0.1 for line in SCENE for term in terms(line.text)}
    keywords = summarise(SCENE, idf=common | {"vault": 8.0}).keywords
    plain = [keyword for keyword in keywords if keyword.islower()]
    assert plain[0] == "vault"


# summarise: keywords


def test_keywords_include_names_mentioned_mid_sentence():
    assert {"Tobin", "Greyharbour"} <= set(summarise(SCENE).keywords)


def test_keywords_have_no_stopwords_and_respect_the_cap():
    keywords = summarise(SCENE).keywords
    assert len(keywords) <= MAX_KEYWORDS
    assert not {"the", "and", "not", "under", "okay", "thanks"} & {keyword.casefold() for keyword in keywords}


def test_keywords_include_quantities_with_units():
    block = lines(("Maren", "Tobin owes the harbour master 300 gold and must pay by the 14th of March."))
    keywords = summarise(block).keywords
    assert "300 gold" in keywords
    assert "14th of March" in keywords


# summarise: robustness and speed


ODD = {
    "no lines": [],
    "empty text": [Line(1, "Maren", "")],
    "whitespace only": [Line(1, "  ", " \n\t "), Line(2, "Ada", "   ")],
    "emoji only": [Line(1, "Ada", "😀🔥🔥 👍"), Line(2, "Maren", "🙂")],
    "huge message": [Line(1, "Ada", ("The key is hidden. " * 6000) + "x" * 20000)],
    "no punctuation": [Line(1, "Ada", "word " * 20000)],
    "asterisks and dots": [Line(1, "Ada", "*" * 500 + "..." * 500 + "**")],
    "russian": [Line(1, "Маша", "Ключ спрятан под третьей ступенью маяка. Никому не говори, Иван.")],
    "japanese": [Line(1, "春", "灯台の三段目の下に鍵が隠されている。誰にも言わないで！")],
    "arabic": [Line(1, "ليلى", "المفتاح مخبأ تحت الدرجة الثالثة من المنارة.")],
    "missing fields": [Line(1, None, None), Line(2, "X" * 500, "Hi." * 3)],  # type: ignore[arg-type]
    "control characters": [Line(1, "Ada", "\x00\x1b[31mred\x07 \u200b\ufeff text.")],
}


@pytest.mark.parametrize("block", ODD.values(), ids=ODD.keys())
def test_odd_input_gives_a_usable_draft(block):
    draft = summarise(block, pov="Tobin")
    assert isinstance(draft, Draft)
    assert draft.heading.strip()
    assert len(draft.heading) <= MAX_HEADING
    assert len(draft.facts) <= MAX_FACTS and all(len(fact) <= MAX_FACT for fact in draft.facts)
    assert len(draft.keywords) <= MAX_KEYWORDS
    assert render(draft)


def test_empty_block_says_nothing_was_said():
    assert summarise([]).heading == "(nothing said)"


def test_summarising_a_block_is_fast():
    sentences = [
        "Maren sets the lantern on the sill and watches the grey water below the cliffs.",
        "The ferry from Greyharbour is three days late, and the crates in the cellar are nearly empty.",
        "*She taps the ledger.* Tobin owes the harbour master 300 gold, and he is desperate.",
        "If the smugglers arrive before the lamp is lit, nobody will see their ship come in.",
        "Maren does not trust him, not after the fire at the Rusty Anchor last winter.",
        "Ada turns the bone whistle over in her hands and notices initials scratched into it.",
        "It belonged to Elin, who rowed out to the wreck of the Saint Brannoc and never came back.",
    ]
    block = lines(
        *[(("Maren", "Ada")[i % 2], " ".join((sentences * 2)[i % 7 : i % 7 + 5])) for i in range(8)]
    )
    summarise(block)
    runs = 50
    started = time.perf_counter()
    for _ in range(runs):
        summarise(block)
    elapsed = (time.perf_counter() - started) / runs * 1000
    words = sum(len(line.text.split()) for line in block) / len(block)
    print(f"extractive summarise: {elapsed:.2f} ms per block of 8 messages of ~{words:.0f} words")


# split_sentences


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("*smiles* Hello there. How are you?", ["smiles", "Hello there.", "How are you?"]),
        ("Mr. Tobin met Dr. Vell at noon.", ["Mr. Tobin met Dr. Vell at noon."]),
        ("Well... maybe. Not today!", ["Well... maybe.", "Not today!"]),
        ('"Run!" she said. "Now."', ["Run! she said.", "Now."]),
        ("First line\nSecond line", ["First line", "Second line"]),
        ("灯台の下に鍵がある。誰にも言わないで！", ["灯台の下に鍵がある。", "誰にも言わないで！"]),
        ("(OOC: brb) The tide turns.", ["The tide turns."]),
    ],
)
def test_split_sentences(text, expected):
    assert split_sentences(text) == expected


# roll_up


CHILDREN = [
    Draft(
        "Maren and Ada — the lighthouse — 12 Mar 2026",
        ["Maren: The key is hidden under the third lighthouse step.", "Ada: Ada promised to keep it secret."],
        ["key", "lighthouse", "Ada"],
    ),
    Draft(
        "Maren and Tobin — the lighthouse — 13 Mar 2026",
        ["Tobin: Tobin demanded the key to the old vault.", "Maren: Maren refused and sent Tobin away."],
        ["Tobin", "vault", "key"],
    ),
    Draft(
        "Ada and Tobin — Rusty Anchor — 14 Mar 2026",
        ["Ada: Ada saw Tobin pay the smugglers 300 gold.", "Tobin: Tobin hinted the ship lands at midnight."],
        ["smugglers", "Tobin", "300 gold"],
    ),
    Draft(
        "Maren and Ada — the lighthouse — 15 Mar 2026",
        [
            "Maren: Maren lit the lamp early and the smugglers turned back.",
            "Ada: Ada moved the key to the cellar.",
        ],
        ["lamp", "key", "smugglers"],
    ),
]


def test_roll_up_keeps_at_least_one_fact_from_each_child_in_order():
    facts = roll_up(CHILDREN).facts
    assert len(facts) <= MAX_FACTS
    owners = [next(i for i, child in enumerate(CHILDREN) if fact in child.facts) for fact in facts]
    assert set(owners) == {0, 1, 2, 3}
    assert owners == sorted(owners)


def test_roll_up_merges_keywords_most_shared_first():
    keywords = roll_up(CHILDREN).keywords
    assert keywords[:2] == ["key", "Tobin"]
    assert {"lighthouse", "vault", "smugglers", "lamp", "300 gold"} <= set(keywords)
    assert len(keywords) <= MAX_KEYWORDS


def test_roll_up_heading_merges_speakers_and_settings_and_spans_the_times():
    times = [dt.datetime(2026, 3, 12, 20, 0), None, dt.datetime(2026, 3, 15, 9, 0)]
    heading = roll_up(CHILDREN, times=times).heading
    assert heading == "Maren, Ada and Tobin — the lighthouse → Rusty Anchor — 12–15 Mar 2026"


def test_roll_up_without_times_spans_the_dates_in_the_children_headings():
    assert roll_up(CHILDREN).heading.endswith("12–15 Mar 2026")


def test_roll_up_keeps_a_point_of_view_all_children_share():
    children = [summarise(SCENE[:4], pov="Tobin"), summarise(SCENE[4:], pov="Tobin")]
    assert roll_up(children).heading.startswith("As Tobin saw it:")


def test_roll_up_reads_names_from_headings_written_by_a_model():
    children = [
        Draft("Maren and Ada argue about the key at the lighthouse on 12 Mar 2026", ["Ada left."], [])
    ]
    heading = roll_up(children).heading
    assert heading.startswith("Maren and Ada")
    assert heading.endswith("12 Mar 2026")


@pytest.mark.parametrize(
    "children",
    [[], [Draft("")], [Draft("   ", ["", "   "], ["", " "])], [Draft("😀", ["🔥"], ["👍"])]],
    ids=["none", "blank heading", "blank parts", "emoji"],
)
def test_roll_up_of_odd_children_gives_a_usable_draft(children):
    draft = roll_up(children, times=[None])
    assert isinstance(draft, Draft)
    assert draft.heading.strip()


# drafts: render, when_label, clip


def test_render_puts_heading_then_fact_lines_then_keywords():
    draft = Draft("Maren and Ada — 12 Mar 2026", ["Maren hid the key.", "Ada left."], ["key", "Maren"])
    assert (
        render(draft)
        == "Maren and Ada — 12 Mar 2026\n- Maren hid the key.\n- Ada left.\nKeywords: key, Maren"
    )


def test_read_gives_back_what_render_wrote():
    draft = Draft("Maren and Ada — 12 Mar 2026", ["Maren hid the key.", "Ada left."], ["key", "Maren"])
    assert read(render(draft)) == draft


def test_read_takes_a_persons_free_text_without_losing_a_word():
    text = "\n".join(
        [
            "The promise",
            "Kira promised Aoi she would not make a wish.",
            "* She broke it that night.",
            "",
            "keywords: wish",
        ]
    )
    assert read(text) == Draft(
        "The promise", ["Kira promised Aoi she would not make a wish.", "She broke it that night."], ["wish"]
    )
    long_fact = "x" * (MAX_FACT + 50)
    assert read(f"Heading\n{long_fact}").facts == [long_fact]


def test_render_omits_empty_parts():
    assert render(Draft("Maren and Ada", [], [])) == "Maren and Ada"
    assert render(Draft("", ["Maren hid the key."], [])) == "- Maren hid the key."


@pytest.mark.parametrize(
    ("times", "label"),
    [
        ([], ""),
        ([None], ""),
        ([dt.datetime(2026, 3, 12, 9), dt.datetime(2026, 3, 12, 23), None], "12 Mar 2026"),
        ([dt.datetime(2026, 3, 14), dt.datetime(2026, 3, 12)], "12–14 Mar 2026"),
        ([dt.datetime(2026, 2, 28), dt.datetime(2026, 3, 3)], "28 Feb – 3 Mar 2026"),
        ([dt.datetime(2025, 12, 30), dt.datetime(2026, 1, 2)], "30 Dec 2025 – 2 Jan 2026"),
    ],
)
def test_when_label(times, label):
    assert when_label(times) == label


def test_clip_enforces_the_caps():
    draft = clip(Draft("x" * 500, [f"Fact number {i}." for i in range(50)], [f"word{i}" for i in range(50)]))
    assert len(draft.heading) <= MAX_HEADING
    assert len(draft.facts) == MAX_FACTS
    assert len(draft.keywords) == MAX_KEYWORDS


def test_clip_strips_and_drops_empty_and_duplicate_parts():
    draft = clip(
        Draft(
            "  Maren\nand Ada  ",
            [" Maren hid the key. ", "maren hid the KEY.", "", "  ", "y" * 1000],
            ["Key", "key", " ", "Lighthouse,"],
        )
    )
    assert draft.heading == "Maren and Ada"
    assert draft.facts[0] == "Maren hid the key."
    assert len(draft.facts) == 2 and len(draft.facts[1]) <= MAX_FACT and draft.facts[1].endswith("…")
    assert draft.keywords == ["Key", "Lighthouse"]
