"""Facts planted early in a long generated chat are kept by the built-in summariser: the fact
itself (with what it leans on), and its distinctive nouns as keywords, never the chat's common words."""

from __future__ import annotations

import datetime as dt
import random

from memory.drafts import Line
from memory.extractive import ChatStats, summarise

START = dt.datetime(2026, 1, 5, 19, 0, tzinfo=dt.UTC)
PEOPLE = ("Ada", "Maren")
FILLER = [
    "*She pulls her coat tighter against the wind.*",
    "The fire crackles and the kettle starts to sing.",
    "I remember the winters here being colder, you know.",
    "Do you want more tea? There is plenty left in the pot.",
    "The waves sound louder tonight, don't they?",
    "*He laughs softly and shakes his head.* You always say that.",
    "We should get some sleep before the work tomorrow.",
    "My name is on half the ledgers in this town, sadly.",
    "That was a sharp thing to say, even for you.",
    "*The lamp flickers as a draught slips under the door.*",
]
# (planted line, its message's speaker, a question naming it, the words that must be kept)
PLANTED = [
    ("Where is the brass key? | I gave it to Father Quillon at the chapel.", "key", {"Quillon"}),
    ("The smugglers hide their rum in the old icehouse behind the mill.", "icehouse", {"icehouse"}),
    ('"My sister Oriel drowned at Skellan Point when I was nine."', "Oriel", {"Oriel", "Skellan Point"}),
    ("The password for the harbour gate is 'gannet'.", "password", {"gannet"}),
    ("Tobin owes the widow Varga forty silver marks.", "Varga", {"Varga"}),
]


def chat(size: int = 400, seed: int = 7) -> list[Line]:
    rng = random.Random(seed)
    texts = [" ".join(rng.sample(FILLER, 3)) for _ in range(size)]
    for number, (planted, _, _) in enumerate(PLANTED):
        seq = 9 + number * 16
        if "|" in planted:  # a question and its answer, by the two speakers
            question, answer = planted.split(" | ")
            texts[seq] = f"{texts[seq]} {question}"
            texts[seq + 1] = f"{answer} {texts[seq + 1]}"
        else:
            texts[seq] = f"{texts[seq]} {planted}"
    return [
        Line(seq=seq, speaker=PEOPLE[seq % 2], text=text, when=START + dt.timedelta(minutes=seq))
        for seq, text in enumerate(texts)
    ]


def summaries(lines: list[Line]) -> list:
    stats = ChatStats()
    for line in lines:
        stats.add(line.seq, line.text)
    return [summarise(lines[start : start + 8], stats=stats) for start in range(0, len(lines), 8)]


def test_each_planted_fact_is_kept_whole_with_what_it_depends_on():
    drafts = summaries(chat())
    text = "\n".join(fact for draft in drafts for fact in draft.facts)
    assert "Where is the brass key? Ada: I gave it to Father Quillon at the chapel." in text
    assert "The smugglers hide their rum in the old icehouse behind the mill." in text
    assert "My sister Oriel drowned at Skellan Point when I was nine." in text  # direct speech, whole
    assert "Tobin owes the widow Varga forty silver marks." in text


def test_planted_names_and_objects_are_keywords_and_common_words_never_are():
    drafts = summaries(chat())
    keywords = {keyword.casefold() for draft in drafts for keyword in draft.keywords}
    for _, _, words in PLANTED:
        for word in words:
            assert word.casefold() in keywords or any(word.casefold() in k for k in keywords), word
    assert not {"name", "remember", "sharp", "work", "tea", "winters", "waves"} & keywords


def test_a_fact_said_for_the_first_time_outranks_the_chats_refrain():
    lines = chat()
    stats = ChatStats()
    for line in lines:
        stats.add(line.seq, line.text)
    block = lines[8:16]
    facts = summarise(block, stats=stats).facts
    assert any("Father Quillon" in fact for fact in facts[:3])
