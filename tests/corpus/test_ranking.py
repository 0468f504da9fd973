"""The pure ranking of the Corpus: words, BM25, fusion, closeness, snippets and highlights."""

from __future__ import annotations

import numpy as np
import pytest

from corpus import ranking
from corpus.ranking import LexicalIndex, coverage, fuse, highlight, judge_close, snippet, terms

# Words -----------------------------------------------------------------------------------------------


def test_terms_are_casefolded_content_words_without_seq_prefixes():
    text = "#12 Maren: The KEY is mine.\n#13 Tobin: Is it 2023 already?"
    assert terms(text) == ["maren", "key", "mine", "tobin", "2023", "already"]


def test_a_number_inside_a_line_is_kept_but_the_line_prefix_is_not():
    assert terms("#7 Ilse: room 7 please") == ["ilse", "room", "7", "please"]


def test_apostrophes_split_and_the_stopword_part_goes():
    assert terms("Maren's lamp didn’t light") == ["maren", "lamp", "didn", "light"]


def test_words_of_other_scripts_are_kept_whole():
    assert terms("Ключ лежит у Марен") == ["ключ", "лежит", "у", "марен"]


@pytest.mark.parametrize(
    ("word", "stemmed"),
    [
        ("keys", "key"),
        ("lied", "lie"),
        ("cried", "cry"),
        ("stories", "story"),
        ("lying", "lying"),  # too short a stem to strip safely
        ("stopped", "stop"),
        ("painted", "paint"),
        ("painting", "paint"),
        ("classes", "class"),
        ("notes", "note"),
        ("glass", "glass"),
        ("bus", "bus"),
        ("his", "his"),
        ("ключи", "ключи"),
    ],
)
def test_the_light_stem(word, stemmed):
    assert ranking.stem(word) == stemmed


def test_plain_drops_the_seq_prefixes_only():
    assert ranking.plain("#3 Maren: Hello #4 you.\n#4 Tobin: Hi.") == "Maren: Hello #4 you.\nTobin: Hi."


def test_a_scene_borrows_one_message_from_each_neighbouring_scene_of_its_room():
    vocabulary = ranking.Vocabulary()
    scenes = [
        "#0 Ann: one\n#1 Bo: two,\nstill two",
        "#8 Ann: three\n#9 Bo: four",
        "#24 Ann: five",
        "#0 Cy: far",
    ]
    encoded = [vocabulary.encode_scene(text) for text in scenes]
    places = [(1, 0), (1, 1), (1, 3), (2, 0)]
    names = {position: term for term, position in vocabulary.ids.items()}

    def spelled(ids) -> str:
        return " ".join(names[i] for i in ids)

    joined = [spelled(ids) for ids in ranking.with_neighbours(encoded, places)]
    assert joined[0] == "ann one bo two still two ann three"
    assert joined[1] == "bo two still two ann three bo four"
    assert joined[2] == "ann five"  # block 2 is missing: no neighbours
    assert joined[3] == "cy far"  # another room is never a neighbour
    alone = [spelled(ids) for ids in ranking.with_neighbours(encoded, places, lend=False)]
    assert alone[1] == "ann three bo four"


def test_the_vocabulary_gives_one_id_per_term_across_documents():
    vocabulary = ranking.Vocabulary()
    first, second = vocabulary.encode("Lamp and lamps"), vocabulary.encode("the lamp, the key")
    assert first.tolist() == [0, 0] and second.tolist() == [0, 1]
    assert len(vocabulary) == 2


def test_an_index_answers_only_for_the_terms_it_was_built_with():
    vocabulary = ranking.Vocabulary()
    index = LexicalIndex([vocabulary.encode("brass key")], vocabulary)
    vocabulary.encode("astrolabe")  # a later document's word, shared vocabulary
    assert index.top("astrolabe", 5) == [] and index.top("key", 5)[0][0] == 0


# BM25 ------------------------------------------------------------------------------------------------


DOCS = [
    "Maren lit the lamp in the lighthouse.",
    "Tobin found the brass key under the stairs.",
    "The lamp, the lamp, the lamp: Maren cleaned the lamp again.",
    "Nothing happened at all that evening, nothing at all, the tide came and went and came again.",
    "A brass bell rang.",
]


def test_a_document_without_the_query_words_scores_nothing():
    index = LexicalIndex.of_texts(DOCS)
    assert [doc for doc, _ in index.top("brass key", 10)] == [1, 4]
    assert index.top("astrolabe", 10) == []


def test_a_rare_word_outweighs_a_common_one():
    index = LexicalIndex.of_texts(DOCS)
    scores = index.scores("key")
    assert scores[1] > 0 and scores[4] == 0
    assert index.scores("brass")[1] < scores[1]  # "brass" is in two documents, "key" in one


def test_repeating_a_word_helps_with_diminishing_returns():
    index = LexicalIndex.of_texts(["lamp", "lamp lamp", "lamp lamp lamp lamp lamp lamp lamp lamp"])
    once, twice, eight = index.scores("lamp")
    assert once < twice < eight
    assert eight - twice < twice - once  # tf saturates (k1)


def test_longer_documents_are_normalised():
    index = LexicalIndex.of_texts(["lamp oil", "lamp " + "words " * 40])
    short, long = index.scores("lamp")
    assert short > long


def test_a_repeated_query_word_counts_once():
    index = LexicalIndex.of_texts(DOCS)
    assert np.allclose(index.scores("key key key"), index.scores("key"))


def test_top_returns_k_best_first_and_the_mask_applies_before_ranking():
    index = LexicalIndex.of_texts(DOCS)
    assert [doc for doc, _ in index.top("lamp", 1)] == [2]
    masked = index.top("lamp", 1, mask=np.array([True, True, False, True, True]))
    assert [doc for doc, _ in masked] == [0]  # the best allowed one, not an empty page


def test_an_empty_index_answers_nothing():
    assert LexicalIndex.of_texts([]).top("lamp", 5) == []


# Fusion ---------------------------------------------------------------------------------------------


def test_rrf_sums_reciprocal_ranks_of_both_lists():
    fused = dict(fuse([["a", "b", "c"], ["c", "d"]], k=60))
    assert fused["c"] == pytest.approx(1 / 63 + 1 / 61)
    assert fused["d"] == pytest.approx(1 / 62)
    assert [key for key, _ in fuse([["a", "b", "c"], ["c", "d"]])][0] == "c"


def test_rrf_weights_tilt_towards_one_side():
    assert fuse([["a", "b"], ["b", "a"]], weights=[1.0, 2.0])[0][0] == "b"
    assert fuse([["a", "b"], ["b", "a"]], weights=[2.0, 1.0])[0][0] == "a"


def test_rrf_ties_keep_the_first_lists_order():
    assert [key for key, _ in fuse([["a", "b"], ["b", "a"]])] == ["a", "b"]


# Closeness and scores -----------------------------------------------------------------------------------


def test_coverage_is_the_share_of_query_terms_found():
    assert coverage("Tobin found the brass keys.", "the brass key") == 1.0
    assert coverage("Tobin found the brass keys.", "brass lantern") == 0.5
    assert coverage("anything", "the of and") == 0.0


def test_close_needs_the_targets_cosine_or_every_query_word():
    limit = ranking.CLOSE_COSINE[ranking.SCENES]
    assert judge_close(ranking.SCENES, limit, 0.0)
    assert not judge_close(ranking.SCENES, limit - 0.01, 0.5)
    assert judge_close(ranking.SCENES, 0.05, 1.0)  # every query word is in the best hit
    assert not judge_close(ranking.MEMORIES, None, 0.0)


def test_the_score_is_the_cosine_clipped_to_0_1():
    assert ranking.match_score(0.42) == pytest.approx(0.42)
    assert ranking.match_score(-0.2) == 0.0
    assert ranking.match_score(1.3) == 1.0
    assert ranking.match_score(None) == 0.0


# Highlights ----------------------------------------------------------------------------------------------


def marked(pieces: list[tuple[str, bool]]) -> list[str]:
    return [text for text, hit in pieces if hit]


def test_highlight_pieces_join_back_into_the_text():
    text = "Maren: The KEY, the key-ring and the keyhole!"
    pieces = highlight(text, "key")
    assert "".join(piece for piece, _ in pieces) == text


def test_highlight_marks_whole_words_case_insensitively():
    assert marked(highlight("The KEY, the key-ring and the keyhole and a monkey", "Key")) == ["KEY", "key"]


def test_highlight_never_marks_stopwords():
    assert marked(highlight("The night she lied about the key", "the night she lied about the key")) == [
        "night",
        "lied",
        "key",
    ]


def test_highlight_meets_a_word_in_another_form():
    assert marked(highlight("She lies; the keys were hers.", "she lied about the key")) == ["lies", "keys"]
    assert marked(highlight("Two lanterns burned.", "lantern")) == ["lanterns"]


def test_highlight_without_query_words_is_one_plain_piece():
    assert highlight("Nothing here.", "the of") == [("Nothing here.", False)]


# Snippets --------------------------------------------------------------------------------------------------


def test_a_short_text_is_its_own_snippet():
    assert snippet("  Maren lit the lamp.  ", "lamp", 300) == "Maren lit the lamp."


def test_the_snippet_is_the_window_with_the_most_query_words():
    filler = " ".join(f"word{i}" for i in range(80))
    text = f"{filler} the brass key alone. {filler} the brass key and the lamp together. {filler}"
    short = snippet(text, "brass key lamp", 120)
    assert "lamp" in short and "brass key" in short
    assert short.startswith("…") and short.endswith("…")
    assert len(short) <= 122  # the width, plus the two ellipses


def test_the_snippet_counts_distinct_words_before_repeats():
    filler = " ".join(f"w{i}" for i in range(60))
    text = f"key key key key key {filler} brass key {filler}"
    assert "brass" in snippet(text, "brass key", 60)


def test_the_snippet_cuts_at_word_boundaries():
    text = " ".join(f"alpha{i}" for i in range(100))
    short = snippet(text, "alpha50", 60)
    assert "alpha50" in short
    for word in short.strip("…").split():
        assert word.startswith("alpha") and word[5:].isdigit()


def test_without_query_words_the_snippet_is_the_beginning():
    text = "A long story. " * 40
    assert snippet(text, "astrolabe", 50).startswith("A long story.")
    assert snippet(text, "astrolabe", 50).endswith("…")
