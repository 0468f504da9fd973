"""Why nothing was recalled: the host's one line, from plain numbers (no database)."""

from __future__ import annotations

from memory.recall import ranking
from memory.recall.why import Fit, memory_starts_at, why_nothing

FITS = Fit(fits=True, history_tokens=5812, history_budget=6144, kept_messages=336, messages=336)
FULL = Fit(fits=False, history_tokens=6100, history_budget=6144, kept_messages=300, messages=900)


def line(**changes) -> str:
    numbers = {
        "count": 0,
        "mode": ranking.MIXC,
        "written": 40,
        "first_at": 16,
        "fit": FULL,
        "pool": 30,
        "cut": 0,
        "best": 0.28,
        "builtin_summariser": False,
        "failed": False,
    }
    return why_nothing(**numbers | changes)


def test_nothing_to_say_when_something_was_recalled_or_memory_is_off():
    assert line(count=2) == ""
    assert line(mode=ranking.OFF) == ""


def test_a_young_chat_says_when_the_first_summary_comes():
    young = Fit(fits=True, history_tokens=200, history_budget=6144, kept_messages=10, messages=10)
    assert line(written=0, fit=young) == "no summaries yet (first at message 16)"


def test_a_chat_that_fits_says_so_and_when_memory_starts():
    assert line(fit=FITS) == (
        "everything still fits in the prompt (5,812 of 6,144 history tokens)"
        " — memory starts at about message 356"
    )


def test_memory_starts_after_the_free_history_tokens_at_the_average_message_length():
    fit = Fit(fits=True, history_tokens=1000, history_budget=3000, kept_messages=50, messages=50)
    assert memory_starts_at(fit) == 151  # 2,000 free tokens at 20 a message: 100 more
    empty = Fit(fits=True, history_tokens=0, history_budget=3000, kept_messages=0, messages=0)
    assert memory_starts_at(empty) == 1


def test_an_old_chat_without_summaries_points_to_building_them():
    assert line(written=0) == "no summaries yet — build memory for this chat in its Settings"


def test_no_summary_before_the_prompts_history():
    assert line(pool=0) == "no summaries older than the history in the prompt yet"


def test_a_failed_search_and_the_memory_budget():
    assert line(failed=True, best=None) == "the memories couldn't be searched (see the notice)"
    assert line(cut=2) == "what matched is over the memory budget"


def test_the_built_in_summariser_says_a_utility_model_would_do_better():
    assert line(builtin_summariser=True) == "built-in summariser — connect a Utility model for better memory"


def test_nothing_close_enough_gives_the_best_score():
    assert line() == "nothing close enough (best 28 %)"
    assert line(best=None, mode=ranking.CHRONOLOGICAL) == "nothing close enough"
