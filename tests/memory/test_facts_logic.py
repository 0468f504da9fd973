"""The rules of lasting facts: reading the memory manager, the extractor, heat, trimming, budget, scene notes.

Pure: no database, no Chroma, no model.
"""

from __future__ import annotations

import json

import pytest

from memory import facts
from memory.facts import (
    CATEGORIES,
    DEFAULT_CONFIDENCE,
    FALLBACK_FORMAT,
    MAX_TEXT,
    TOOLS,
    Draft,
    FactView,
    SceneNote,
    Trimmed,
    budget_order,
    cool,
    extract,
    heat_factor,
    parse_reply,
    qualifies,
    render_scene_note,
    scene_note,
    score,
    trim,
    warm,
)

NAMES = {"Mara", "Tobin"}


def call(name: str, arguments: object) -> dict:
    return {"id": f"call_{name}", "type": "function", "function": {"name": name, "arguments": arguments}}


def read(
    content: str | None = None, tool_calls: list[dict] | None = None, *, known=frozenset({3, 4, 12}), **kw
):
    return parse_reply(content, tool_calls, known_ids=set(known), first_seq=17, last_seq=24, **kw)


def texts(drafts: list[Draft]) -> list[str]:
    return [draft.text for draft in drafts]


# The tools and the fallback format.


def test_tools_define_the_four_functions_with_the_categories():
    names = [tool["function"]["name"] for tool in TOOLS]
    assert names == ["create_fact", "update_fact", "delete_fact", "pin_fact"]
    create = TOOLS[0]["function"]["parameters"]
    assert create["properties"]["category"]["enum"] == list(CATEGORIES)
    assert create["properties"]["text"]["maxLength"] == MAX_TEXT
    assert set(create["required"]) == {"text", "category"}
    assert all(tool["type"] == "function" for tool in TOOLS)
    json.dumps(TOOLS)  # sendable as is


def test_tools_follow_tuned_categories():
    tuned = facts.tools(("promise", "secret"))
    assert tuned[0]["function"]["parameters"]["properties"]["category"]["enum"] == ["promise", "secret"]


def test_fallback_format_shows_both_shapes_and_every_category():
    assert '"operations"' in FALLBACK_FORMAT
    assert '<delete id="3"/>' in FALLBACK_FORMAT
    assert all(category in FALLBACK_FORMAT for category in CATEGORIES)


# Reading the answer: tool calls.


def test_tool_calls_become_operations_with_the_block_range():
    parsed = read(
        None,
        [
            call("create_fact", json.dumps({"text": "Mara wants to unmask the Duke.", "category": "goal"})),
            call("update_fact", {"id": 12, "text": "Mara is the Duke's niece, not his daughter."}),
            call("delete_fact", '{"id": 3, "reason": "wrong"}'),
            call("pin_fact", '{"id": "4"}'),
        ],
    )
    assert parsed.source == "tools"
    assert [(op.kind, op.target) for op in parsed.operations] == [
        ("create", None),
        ("update", 12),
        ("delete", 3),
        ("pin", 4),
    ]
    created = parsed.operations[0].draft
    assert (created.category, created.first_seq, created.last_seq) == ("goal", 17, 24)
    assert parsed.operations[2].reason == "wrong"
    assert parsed.notice == ""


def test_a_fact_spans_the_messages_it_cites_inside_the_block():
    parsed = read(
        None,
        [
            call("create_fact", {"text": "Tobin lost the key.", "category": "event", "messages": [21, 19]}),
            call("create_fact", {"text": "Mara is tired.", "category": "condition", "messages": "#22"}),
            call("create_fact", {"text": "Out of the block.", "category": "event", "messages": [3, 99]}),
            call("create_fact", {"text": "Cites nothing usable.", "category": "event", "messages": [True]}),
        ],
    )
    spans = [(op.draft.first_seq, op.draft.last_seq) for op in parsed.operations]
    assert spans == [(19, 21), (22, 22), (17, 24), (17, 24)]


def test_the_fallbacks_read_cited_messages_too():
    as_json = read('{"operations": [{"op": "create", "text": "Mara found the map.", "messages": [18, 20]}]}')
    as_xml = read('<create category="discovery" messages="23, 24">Mara found the map.</create>')
    assert (as_json.operations[0].draft.first_seq, as_json.operations[0].draft.last_seq) == (18, 20)
    assert (as_xml.operations[0].draft.first_seq, as_xml.operations[0].draft.last_seq) == (23, 24)


def test_tool_arguments_with_a_trailing_comma_are_still_read():
    parsed = read(None, [call("create_fact", '{"text": "Tobin is cursed.", "category": "condition",}')])
    assert texts([op.draft for op in parsed.operations]) == ["Tobin is cursed."]


def test_tool_calls_take_precedence_over_the_content():
    parsed = read(
        '{"operations": [{"op": "create", "text": "From the content."}]}',
        [call("create_fact", {"text": "From the tool.", "category": "event"})],
    )
    assert texts([op.draft for op in parsed.operations]) == ["From the tool."]


def test_unreadable_tool_arguments_are_named_in_the_notice():
    parsed = read(None, [call("create_fact", "not json at all")])
    assert parsed.operations == []
    assert "Nothing was saved" in parsed.notice and "create_fact" in parsed.notice


def test_an_unknown_tool_is_skipped_with_a_notice():
    parsed = read(None, [call("summon_dragon", {"text": "x"}), call("pin_fact", {"id": 4})])
    assert [op.kind for op in parsed.operations] == ["pin"]
    assert "summon_dragon" in parsed.notice


# Reading the answer: the JSON and XML fallbacks, and prose.


def test_fenced_json_with_prose_around_it_is_read():
    answer = """Sure! Here are the changes:
```json
{"operations": [
  {"op": "create", "text": "Tobin swore to guard the lighthouse.", "category": "promise",
   "subjects": ["Tobin"], "confidence": 0.9},
  {"op": "delete", "id": 3},
]}
```
Let me know if you need more."""
    parsed = read(answer)
    assert parsed.source == "json"
    assert [(op.kind, op.target) for op in parsed.operations] == [("create", None), ("delete", 3)]
    assert parsed.operations[0].draft.subjects == ("Tobin",)
    assert parsed.operations[0].draft.confidence == 0.9


def test_a_bare_list_of_operations_is_read_whole():
    parsed = read('[{"op": "create", "text": "Mara found the map."}, {"op": "pin", "id": 4}]')
    assert [op.kind for op in parsed.operations] == ["create", "pin"]


def test_an_empty_operations_list_saves_nothing_without_complaint():
    parsed = read('{"operations": []}')
    assert (parsed.operations, parsed.notice, parsed.source) == ([], "", "json")


def test_xml_tags_are_read_with_their_attributes():
    answer = (
        "Changes:\n"
        '<create category="goal" subjects="Mara, the Duke" confidence="0.8">Mara wants to unmask '
        "the Duke &amp; flee.</create>\n"
        '<update id="12">Mara is the Duke\'s niece.</update>\n<delete id="3"/>\n<pin id=\'4\' />'
    )
    parsed = read(answer)
    assert parsed.source == "xml"
    assert [(op.kind, op.target) for op in parsed.operations] == [
        ("create", None),
        ("update", 12),
        ("delete", 3),
        ("pin", 4),
    ]
    created = parsed.operations[0].draft
    assert created.text == "Mara wants to unmask the Duke & flee."
    assert created.subjects == ("Mara", "the Duke")
    assert created.confidence == 0.8


def test_prose_saves_nothing_and_says_why():
    parsed = read("Nothing much happened here; the characters just talked about the weather.")
    assert parsed.operations == []
    assert parsed.source == "none"
    assert parsed.notice.startswith("Nothing was saved")
    assert "prose" in parsed.notice


def test_an_empty_answer_saves_nothing_and_says_so():
    assert "empty" in read("").notice
    assert "empty" in read(None, None).notice


def test_a_thinking_block_is_not_read_as_the_answer():
    answer = '<think>maybe <delete id="3"/></think>{"operations": [{"op": "pin", "id": 4}]}'
    assert [op.kind for op in read(answer).operations] == ["pin"]


# Validation of each operation.


def test_text_is_trimmed_and_cut_at_a_word():
    long = "  Mara " + "carries the lantern across the bay " * 20
    draft = read(None, [call("create_fact", {"text": long, "category": "event"})]).operations[0].draft
    assert len(draft.text) <= MAX_TEXT
    assert draft.text.startswith("Mara carries")
    assert draft.text.endswith("…")
    assert draft.text[:-1].split()[-1] in "Mara carries the lantern across the bay".split()


def test_an_unknown_category_becomes_event_and_a_plural_is_understood():
    parsed = read(
        None,
        [
            call("create_fact", {"text": "One.", "category": "gossip"}),
            call("create_fact", {"text": "Two.", "category": "Promises"}),
            call("create_fact", {"text": "Three."}),
        ],
    )
    assert [op.draft.category for op in parsed.operations] == ["event", "promise", "event"]


def test_confidence_is_clamped_and_defaults():
    parsed = read(
        None,
        [
            call("create_fact", {"text": "High.", "confidence": 1.7}),
            call("create_fact", {"text": "Low.", "confidence": -2}),
            call("create_fact", {"text": "Percent.", "confidence": "80%"}),
            call("create_fact", {"text": "Missing."}),
            call("create_fact", {"text": "Nonsense.", "confidence": "very"}),
        ],
    )
    assert [op.draft.confidence for op in parsed.operations] == [1.0, 0.0, 0.8, DEFAULT_CONFIDENCE, 0.7]


def test_changes_to_unknown_facts_are_dropped_and_named():
    parsed = read(
        None,
        [
            call("update_fact", {"id": 99, "text": "Nope."}),
            call("delete_fact", {"id": 77}),
            call("pin_fact", {"id": 4}),
        ],
    )
    assert [(op.kind, op.target) for op in parsed.operations] == [("pin", 4)]
    assert "#99 (update)" in parsed.notice and "#77 (delete)" in parsed.notice


def test_an_operation_without_text_or_id_is_skipped():
    parsed = read(None, [call("create_fact", {"text": "   "}), call("delete_fact", {"reason": "x"})])
    assert parsed.operations == []
    assert "without text" in parsed.notice and "without a fact id" in parsed.notice


def test_duplicates_in_one_answer_count_once():
    parsed = read(
        None,
        [
            call("create_fact", {"text": "Mara found the map."}),
            call("create_fact", {"text": "mara  found the MAP."}),
            call("pin_fact", {"id": 4}),
            call("pin_fact", {"id": "#4"}),
        ],
    )
    assert [op.kind for op in parsed.operations] == ["create", "pin"]
    assert parsed.notice == ""


def test_a_second_change_to_the_same_fact_is_skipped():
    parsed = read(None, [call("update_fact", {"id": 12, "text": "First."}), call("delete_fact", {"id": 12})])
    assert [op.kind for op in parsed.operations] == ["update"]
    assert "second change to #12" in parsed.notice


def test_an_update_without_a_category_keeps_the_facts_own():
    parsed = read(
        '<update id="12">Mara is the Duke\'s niece.</update>', known_categories={12: "relationship"}
    )
    assert parsed.operations[0].draft.category == "relationship"


def test_subjects_are_split_and_deduplicated():
    draft = read('<create subjects="Mara; Tobin, mara">They met.</create>').operations[0].draft
    assert draft.subjects == ("Mara", "Tobin")


# The deterministic extractor.


def test_a_first_person_promise_reads_on_its_own():
    [draft] = extract([(5, "Mara", "I promise to return the key by dawn.")], names=NAMES)
    assert draft.text == "Mara promised to return the key by dawn."
    assert (draft.category, draft.subjects, draft.first_seq, draft.last_seq) == ("promise", ("Mara",), 5, 5)
    assert draft.confidence <= 0.5


def test_swearing_and_never_are_promises_and_you_is_the_previous_speaker():
    drafts = extract(
        [
            (1, "Tobin", "The storm is coming."),
            (2, "Mara", "I swear I'll find the Duke of Vell. I'll never leave you."),
        ],
        names=NAMES,
    )
    assert texts(drafts) == ["Mara swore to find the Duke of Vell.", "Mara promised never to leave Tobin."]
    assert drafts[1].subjects == ("Mara", "Tobin")


def test_relationships_are_found():
    drafts = extract(
        [
            (1, "Mara", "Hello."),
            (2, "Tobin", "Mara is my sister. We are married. Tobin is Mara's friend. I love you."),
        ],
        names=NAMES,
    )
    assert texts(drafts) == [
        "Mara is Tobin's sister.",
        "Tobin and Mara are married.",
        "Tobin is Mara's friend.",
        "Tobin loves Mara.",
    ]
    assert {draft.category for draft in drafts} == {"relationship"}


def test_a_titled_name_is_someone():
    [draft] = extract([(1, "Mara", "The Duke is my father.")], names=NAMES)
    assert draft.text == "The Duke is Mara's father."
    assert draft.subjects == ("Duke", "Mara")


def test_goals_conditions_and_discoveries_are_found():
    drafts = extract(
        [
            (
                3,
                "Mara",
                "I want to reach the Rusty Anchor before midnight. I am wounded. "
                "Tobin is poisoned. I found that the vault is empty.",
            )
        ],
        names=NAMES,
    )
    assert [(draft.category, draft.text) for draft in drafts] == [
        ("goal", "Mara wants to reach the Rusty Anchor before midnight."),
        ("condition", "Mara is wounded."),
        ("condition", "Tobin is poisoned."),
        ("discovery", "Mara found that the vault is empty."),
    ]
    assert "Rusty Anchor" in drafts[0].subjects
    assert all(draft.confidence <= 0.5 for draft in drafts)


@pytest.mark.parametrize(
    "sentence",
    [
        "Will you promise to return the key?",  # a question
        "Do I want to go to the harbour?",
        "If I find the key, I will give it to Tobin.",  # hypothetical
        "Maybe I will sail north with the tide.",
        "I would promise to help you, but I can't.",
        "I don't want to leave the lighthouse.",  # negated
        "I will not return the key to the Duke.",
        "Mara is not my sister.",
        "Tobin isn't wounded.",
        "I never found that map.",
        "I will be back.",  # too slight to be a vow
        "I must say, the tea is lovely.",
        "This is my friend.",  # nobody named
        "He is cursed.",
        "She is my sister.",
        "The light is on and the tea is warm.",  # no pattern at all
        "*She smiles and pours the tea.*",
        "I'm ill-tempered today.",  # a word that only starts like a condition
        "I learned the old songs from my mother.",  # a skill, not a discovery
    ],
)
def test_the_extractor_keeps_quiet_on_questions_hypotheticals_negations_and_vague_sentences(sentence):
    assert extract([(1, "Tobin", "Hello."), (2, "Mara", sentence)], names=NAMES) == []


def test_you_with_nobody_before_gives_nothing():
    assert extract([(1, "Mara", "I promise to wait for you at the harbour.")], names=NAMES) == []


def test_one_fact_per_sentence_and_no_repeats():
    drafts = extract(
        [
            (1, "Mara", "I promise to return the key, and I want to see the Duke hang."),
            (2, "Mara", "I promise to return the key."),
        ],
        names=NAMES,
    )
    assert len(drafts) == 1
    assert drafts[0].category == "promise"


def test_extracted_text_stays_within_the_limit():
    sentence = "I promise to carry " + "the heavy lantern and " * 30 + "the key."
    [draft] = extract([(1, "Mara", sentence)], names=NAMES)
    assert len(draft.text) <= MAX_TEXT


def test_odd_lines_do_not_break_the_extractor():
    assert extract([(1, "", "I promise to return the key."), (2, "Mara", None), (3, "Mara", "")]) == []  # type: ignore[list-item]


# Heat.


def test_recall_warms_up_to_one():
    assert warm(0.2) == pytest.approx(0.7)
    assert warm(0.9) == 1.0
    assert warm(0.2, amount=0.1) == pytest.approx(0.3)


def test_each_cycle_cools_exponentially():
    assert cool(1.0) == pytest.approx(0.9)
    assert cool(1.0, 3) == pytest.approx(0.9**3)
    assert cool(0.8, 2, rate=0.5) == pytest.approx(0.2)
    assert cool(cool(1.0, 2), 3) == pytest.approx(cool(1.0, 5))
    assert cool(1.0, 7) < facts.HOT < cool(1.0, 6)  # cold after seven unused cycles


def test_a_pinned_fact_never_cools():
    assert cool(0.6, 50, pinned=True) == 0.6


def test_heat_factor_is_full_when_hot_and_damped_when_cold():
    assert heat_factor(1.0) == heat_factor(facts.HOT) == 1.0
    assert heat_factor(0.0) == 0.5
    assert heat_factor(0.25) == pytest.approx(0.75)


def test_score_weighs_relevance_by_confidence_and_heat():
    assert score(0.8, 1.0, 1.0) == pytest.approx(0.8)
    assert score(0.8, 0.0, 1.0) == pytest.approx(0.4)
    assert score(0.8, 0.5, 0.0) == pytest.approx(0.8 * 0.75 * 0.5)
    assert score(0.6, 0.9, 0.9) > score(0.6, 0.9, 0.1)


def test_a_cold_fact_qualifies_only_when_clearly_relevant():
    assert qualifies(0.4, 0.9)
    assert not qualifies(0.4, 0.1)
    assert qualifies(0.55, 0.1)
    assert not qualifies(0.3, 1.0)


def test_heat_arithmetic_takes_odd_numbers_in_its_stride():
    assert warm(float("nan")) == 0.5
    assert cool(2.0) == pytest.approx(0.9)
    assert score(1.5, 2.0, -1.0) == pytest.approx(0.5)


# Trimming.


def fact(
    id: int, *, heat: float = 1.0, confidence: float = 0.7, pinned=False, by_person=False, seq=0, words=10
):
    return FactView(
        id=id,
        text=" ".join(["word"] * words),
        heat=heat,
        confidence=confidence,
        pinned=pinned,
        by_person=by_person,
        last_seq=seq,
    )


def words(text: str) -> int:
    return len(text.split())


def test_trim_keeps_the_count_dropping_the_least_important_first():
    found = [
        fact(1, heat=0.9, confidence=0.9),
        fact(2, heat=0.2, confidence=0.5),
        fact(3, heat=0.9, confidence=0.3),
        fact(4, heat=0.1, confidence=0.9, pinned=True),
        fact(5, heat=0.1, confidence=0.1, by_person=True),
    ]
    assert trim(found, max_count=3, token_budget=1000, count_tokens=words) == Trimmed(forget=[2, 3], cool=[])


def test_trim_breaks_ties_by_the_newest_message():
    found = [fact(1, seq=10), fact(2, seq=30), fact(3, seq=20)]
    assert trim(found, max_count=2, token_budget=1000, count_tokens=words).forget == [1]


def test_hot_facts_past_the_token_budget_turn_cold_and_are_kept():
    found = [
        fact(1, heat=1.0, confidence=0.9, words=40),
        fact(2, heat=0.9, confidence=0.8, words=40),  # does not fit: 80 > 60
        fact(3, heat=0.8, confidence=0.5, words=5),  # less important than 2: not hot in its place
        fact(4, heat=0.1, confidence=0.9, words=500),  # cold: costs the hot budget nothing
    ]
    assert trim(found, max_count=10, token_budget=60, count_tokens=words) == Trimmed(forget=[], cool=[3, 2])


def test_pinned_facts_are_never_trimmed():
    found = [fact(1, pinned=True, words=100), fact(2, pinned=True, words=100), fact(3)]
    assert trim(found, max_count=1, token_budget=10, count_tokens=words) == Trimmed(forget=[3], cool=[])


def test_nothing_is_trimmed_when_everything_fits():
    assert trim([fact(1), fact(2)], max_count=5, token_budget=100, count_tokens=words) == Trimmed([], [])


# The memory budget's order.


def test_budget_fills_parts_in_priority_order():
    parts = {
        "quotes": ["q1"],
        "summaries": ["s1", "s2"],
        "facts": ["f1", "f2"],
        "scene": ["scene"],
        "yours": ["y1"],
        "pinned": ["p1"],
    }
    chosen = budget_order(parts, budget=6, cost=lambda item: 1)
    assert list(chosen) == ["pinned", "yours", "scene", "facts", "summaries", "quotes"]
    assert chosen == {
        "pinned": ["p1"],
        "yours": ["y1"],
        "scene": ["scene"],
        "facts": ["f1", "f2"],
        "summaries": ["s1"],
        "quotes": [],
    }


def test_budget_skips_an_item_that_does_not_fit_and_tries_the_next():
    chosen = budget_order({"facts": ["a" * 8, "b" * 3, "c" * 2]}, budget=6, cost=len)
    assert chosen == {"facts": ["bbb", "cc"]}


def test_budget_priority_is_tunable_and_unknown_parts_come_last():
    chosen = budget_order(
        {"extra": ["e"], "summaries": ["s"], "facts": ["f"]},
        priority=("summaries", "facts"),
        budget=2,
        cost=lambda item: 1,
    )
    assert chosen == {"summaries": ["s"], "facts": ["f"], "extra": []}


# Scene notes.


def test_scene_note_reads_where_who_when_and_what_is_open():
    note = scene_note(
        [
            (1, "Mara", "*She steps into the old tavern at dusk.* Tobin, are you there?"),
            (2, "Tobin", "We meet at the Rusty Anchor at midnight. I promise to bring the Duke's letter."),
            (3, "Mara", "Where is the key?"),
        ],
        names={"Mara", "Tobin", "Ada"},
    )
    assert note.where == "the Rusty Anchor"
    assert note.who == ("Mara", "Tobin")
    assert note.when == "midnight"
    assert note.open_threads == (
        "Mara asked: Where is the key?",
        "Tobin promised to bring the Duke's letter.",
    )


def test_scene_note_names_people_mentioned_and_the_next_day():
    note = scene_note([(1, "Mara", "The next day, Ada waits in the harbour.")], names={"Ada", "Tobin"})
    assert note.who == ("Mara", "Ada")
    assert note.when == "the next day"
    assert note.where == "the harbour"


def test_scene_note_ignores_people_as_places_and_past_times():
    note = scene_note(
        [(1, "Mara", "Last night was long. Good night, Tobin."), (2, "Tobin", "I glance at Mara.")],
        names=NAMES,
    )
    assert note.where == ""
    assert note.when == ""


def test_scene_note_renders_only_what_it_has():
    assert render_scene_note(SceneNote()) == ""
    text = render_scene_note(
        SceneNote(where="the harbour", who=("Mara", "Tobin"), open_threads=("Find the key.",))
    )
    assert text == "Where: the harbour\nWho: Mara, Tobin\nOpen threads:\n- Find the key."


def test_scene_note_fields_stay_short():
    long_question = "Why " + "really " * 80 + "?"
    note = scene_note([(n, "Mara", long_question.replace("Why", f"Why {n}")) for n in range(10)], names=NAMES)
    assert len(note.open_threads) <= facts.MAX_THREADS
    assert all(len(thread) <= facts.MAX_THREAD for thread in note.open_threads)


def test_garbage_never_raises():
    nested = "[" * 5000 + "]" * 5000
    assert read(nested).operations == []
    parsed = read("<create>", [None, "x", {"function": None}, call(None, None)])  # type: ignore[list-item]
    assert parsed.operations == []
    assert parsed.notice
