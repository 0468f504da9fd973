"""Memory's part in a turn: fill the prompt's Memory section, log what was recalled.

Registered with the rooms app at start (`rooms.memory_port`, from `memory.apps`): rooms asks, and
never imports memory.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import replace

from memory.recall import ranking as recall
from memory.recall import recaller, why
from memory.selectors import memory_on, recall_last, tuning_get
from memory.services import recall_log
from orbchat.connections.selectors import model_roles_get
from orbchat.library.models import default_memory_template
from orbchat.prompting import assemble
from orbchat.prompting.assemble import default_count_tokens
from rooms import tokens
from rooms.models import Room, Seat
from rooms.prompting import TurnContext, chat_connection, host_roles, prompt_input_for


def with_memory(
    *,
    room: Room,
    seat: Seat | None,
    prompt_input: assemble.PromptInput,
    prompt: assemble.Prompt,
    on_recalling: Callable[[], None] | None,
) -> tuple[assemble.Prompt, recaller.Outcome]:
    """Recall from what scrolled out of `prompt` and put it in the Memory section.

    The memory budget (a share of the context) is reserved first, so the history kept beside
    the memory is known before recall runs; recall only reads what lies before it.
    """
    tuning = tuning_get()
    if not memory_on(room, tuning) or tuning.mode == recall.OFF:
        return prompt, recaller.Outcome(state="off")
    total = recaller.written_for(room, seat)
    if on_recalling is not None and total:
        on_recalling()
    history = prompt_input.history
    query_texts = [h.text for h in history if not h.hidden]
    reserve = int(prompt_input.context_size * tuning.budget_share)
    # When everything fits, the prompt as it is gives the live window (recall will find nothing
    # before it); so does a chat with no memory written yet, whose prompt goes out as it is.
    # Otherwise the window is the one left beside the reserved memory budget.
    # The window drops old messages a memory block at a time, so the prompt's prefix stays put.
    fitted = prompt
    dropped = bool(prompt.history_dropped and total)
    if dropped:
        fitted = assemble.assemble(
            replace(
                prompt_input,
                max_tokens=prompt_input.max_tokens + reserve,
                history_align=tuning.block_size,
            )
        )
    live_start = fitted.history_kept[0] if fitted.history_kept else room.next_seq
    outcome = recaller.recall_for(
        room=room,
        seat=seat,
        query_texts=query_texts,
        live_start=live_start,
        budget=reserve,
        count=prompt_input.count_tokens,
        tuning=tuning,
        total=total,
    )
    outcome.fit = _fit(prompt_input, prompt, room)
    outcome.why = _why(room, outcome, tuning)
    if not outcome.text and not dropped:
        return prompt, outcome
    template = prompt_input.memory_template
    if template == default_memory_template():
        template = f"{tuning.heading}:\n{{{{memory}}}}"
    final = assemble.assemble(
        replace(
            prompt_input,
            history=[h for h in history if h.seq >= live_start],
            memory_text=outcome.text,
            memory_template=template,
        )
    )
    return final, outcome


def _fit(prompt_input: assemble.PromptInput, prompt: assemble.Prompt, room: Room) -> why.Fit:
    """How the history sat in the prompt before memory was reserved (its tokens as stored)."""
    count = prompt_input.count_tokens or default_count_tokens
    first, last = prompt.history_kept or (0, -1)
    kept = [h for h in prompt_input.history if not h.hidden and first <= h.seq <= last]
    used = sum(h.tokens if h.tokens is not None else count(h.text) for h in kept)
    return why.Fit(
        fits=not prompt.history_dropped,
        history_tokens=used,
        history_budget=used + max(0, prompt.budget - prompt.total_tokens),
        kept_messages=len(kept),
        messages=max(room.next_seq, last + 1),  # a dry run's draft counts as the next message
    )


def _why(room: Room, outcome: recaller.Outcome, tuning) -> str:
    """The host's one line on why `outcome` recalled nothing ("" when it recalled something)."""
    if outcome.count or outcome.state != "done":
        return ""
    return why.why_nothing(
        count=outcome.count,
        mode=outcome.mode,
        written=outcome.written,
        first_at=tuning.block_size + tuning.fresh_window,
        fit=outcome.fit,
        pool=outcome.pool,
        cut=len(outcome.cut),
        best=outcome.best,
        builtin_summariser=host_roles(room).utility_id is None,
        failed=bool(outcome.notices) and outcome.best is None,
    )


def recall_dry_run(*, room: Room, seat: Seat | None, text: str) -> recaller.Outcome:
    """Run recall as if `text` were the host's next message, with the room's current settings.

    Nothing is saved and no event is sent: it answers "what would recall pick, and why?".
    """
    connection = chat_connection(room)
    prompt_input, _, _ = prompt_input_for(
        turn=TurnContext.of(room), seat=seat, connection=connection, draft=text
    )
    _, outcome = with_memory(
        room=room,
        seat=seat,
        prompt_input=prompt_input,
        prompt=assemble.assemble(prompt_input),
        on_recalling=None,
    )
    return outcome


def recall_fresh_check(room) -> dict:
    """The host's recall detail: the last reply's query and live window, checked again now.

    A fresh check with the room's current settings (usually what happened; not a recording).
    The real count of that reply comes with it.
    """
    last = recall_last(room)
    if last is None or last.state != "done":
        return {"state": "none" if last is None else last.state, "fresh": False}
    detail = last.detail
    seat = Seat.objects.filter(pk=detail.get("seat"), room=room).first() if detail.get("seat") else None
    chat = model_roles_get(user=room.host).chat
    count = tokens.counter_for(chat.model.split("/", 1)[-1]) if chat else default_count_tokens
    tuning = tuning_get()
    outcome = recaller.recall_for(
        room=room,
        seat=seat,
        query_texts=detail.get("messages") or [detail.get("query", "")],
        live_start=int(detail.get("live_start", 0)),
        budget=int(detail.get("budget", 0)),
        count=count,
        tuning=tuning,
    )
    outcome.fit = why.Fit(**detail["fit"]) if detail.get("fit") else None
    outcome.why = _why(room, outcome, tuning)
    return outcome.detail() | {
        "fresh": True,
        "turn_count": last.count,
        "speaker": last.speaker,
        "at": last.created_at.isoformat(),
    }


class TurnMemory:
    """What `rooms.memory_port` asks of memory."""

    def with_memory(self, **kwargs) -> tuple[assemble.Prompt, recaller.Outcome]:
        return with_memory(**kwargs)

    def log(self, *, room_id: int, variant_id: int, speaker: str, outcome: recaller.Outcome) -> None:
        recall_log.log_save(room_id=room_id, variant_id=variant_id, speaker=speaker, outcome=outcome)
