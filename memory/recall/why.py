"""Why a reply recalled nothing, in one line for the host's readout.

Pure: plain numbers in, a sentence out. The shell (`memory.turn_memory`) gathers them from what
recall and the prompt already computed.
"""

from __future__ import annotations

from dataclasses import dataclass

from memory.recall import ranking


@dataclass(frozen=True)
class Fit:
    """How the chat's history sat in the prompt before any memory was reserved."""

    fits: bool  # the whole chat was in the prompt
    history_tokens: int  # the history's tokens in the prompt
    history_budget: int  # what the history could have taken
    kept_messages: int  # messages of history in the prompt
    messages: int  # messages in the chat


def memory_starts_at(fit: Fit) -> int:
    """Estimate the message at which the history stops fitting, at its average message length."""
    if fit.kept_messages == 0 or fit.history_tokens == 0:
        return fit.messages + 1
    average = fit.history_tokens / fit.kept_messages
    return fit.messages + 1 + int(max(0, fit.history_budget - fit.history_tokens) / average)


def why_nothing(
    *,
    count: int,
    mode: str,
    written: int,
    first_at: int,
    fit: Fit | None,
    pool: int,
    cut: int,
    best: float | None,
    builtin_summariser: bool,
    failed: bool,
) -> str:
    """Return why nothing was recalled ("" when something was, or memory is off).

    The reasons in the order they decide: a chat too young for a summary, a chat that still fits
    the prompt, summaries not written, none older than the prompt's history, a failed search, the
    memory budget, the built-in summariser, and last the best score that fell short.
    """
    if count or mode == ranking.OFF:
        return ""
    messages = fit.messages if fit else 0
    if not written and messages < first_at:
        return f"no summaries yet (first at message {first_at:,})"
    if fit is not None and fit.fits:
        return (
            f"everything still fits in the prompt ({fit.history_tokens:,} of {fit.history_budget:,} "
            f"history tokens) — memory starts at about message {memory_starts_at(fit):,}"
        )
    if not written:
        return "no summaries yet — build memory for this chat in its Settings"
    if not pool:
        return "no summaries older than the history in the prompt yet"
    if failed:
        return "the memories couldn't be searched (see the notice)"
    if cut:
        return "what matched is over the memory budget"
    if builtin_summariser:
        return "built-in summariser — connect a Utility model for better memory"
    if best is None:
        return "nothing close enough"
    return f"nothing close enough (best {round(best * 100)} %)"
