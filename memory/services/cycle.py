"""The memory cycle: after each block is summarised, the memory manager writes lasting facts; each
cycle cools the facts nobody recalled and trims each memory set to its limits; after each reply,
the scene note is read again.

The memory manager follows the summary writer's shape: read what is needed, ask the Utility model
outside any transaction, and only once the whole answer is in, apply it — one block's changes in
one transaction, with the mark that the block is done (`Summary.manager_hash`), so a Cancel or a
crash mid-cycle leaves nothing half-written and a re-run asks nothing again. Without a Utility
model (or once it failed in a run that falls back) the built-in extractor writes what it can.
"""

from __future__ import annotations

import datetime as dt
import logging
from collections.abc import Callable
from dataclasses import dataclass, field

from django.db import transaction
from django.db.models import F, Max, Q
from django.utils import timezone

from memory import facts, manager, prompts
from memory.drafts import Line
from memory.models import Fact, MemoryTuning, RoomMemory, Summary
from memory.selectors import memory_on, message_lines, tuning_get
from memory.services import scene
from memory.services.facts import (
    fact_correct,
    fact_create,
    fact_forget,
    fact_pin,
    facts_forget_trimmed,
    facts_set_heat,
)
from memory.services.person import MemoryRefused
from memory.services.summaries import RETRIABLE_STATUS, UTILITY_TIMEOUT, OnText, ProviderTrouble, utility_call
from orbchat.connections import gateway
from orbchat.connections.selectors import model_roles_get
from orbchat.library.textformats import text_format_for
from orbchat.prompting.assemble import default_count_tokens
from rooms.models import Message, Room, Seat

log = logging.getLogger(__name__)

MANAGER_MAX_TOKENS = 800
SCENE_MAX_TOKENS = 300


def _trouble(exc: Exception) -> ProviderTrouble:
    status = getattr(exc, "status_code", None)
    return ProviderTrouble(gateway.plain_error(exc), retriable=status in RETRIABLE_STATUS or status is None)


def _template(utility):
    text_format = text_format_for(utility)
    return text_format.instruct if text_format is not None else None


def ask_manager(utility, messages: list[dict], *, on_text: OnText | None = None) -> tuple[str, list[dict]]:
    """Ask the memory manager with the tools; a provider that refuses tools is asked once more
    without them (the prompt carries the JSON/XML fallback format). With `on_text`, the answer is
    streamed to it as it is written (the host's cycle panel). Raises ProviderTrouble."""
    target = gateway.target_for(utility)
    params = {
        "template": _template(utility),
        "timeout": UTILITY_TIMEOUT,
        "temperature": 0.2,
        "max_tokens": MANAGER_MAX_TOKENS,
    }
    try:
        return utility_call(target, messages, tools=facts.TOOLS, on_text=on_text, **params)
    except Exception as exc:  # noqa: BLE001 - classified here
        if gateway.explain(exc) != gateway.REJECTED:
            raise _trouble(exc) from exc
        log.info("the Utility model refused the tools (%s); asking for the fallback format", exc)
    try:
        return utility_call(target, messages, on_text=on_text, **params)
    except Exception as exc:  # noqa: BLE001 - classified here
        raise _trouble(exc) from exc


def _names(room: Room) -> list[str]:
    return [name for name in Seat.objects.filter(room=room).values_list("name", flat=True) if name]


def _known(room: Room, scope: str) -> list[manager.Known]:
    rows = Fact.objects.filter(room=room, scope=scope, status=Fact.Status.ACTIVE).values_list(
        "pk", "text", "category", "subjects", "source", "pinned"
    )
    return [
        manager.Known(
            id=pk,
            text=text,
            category=category,
            subjects=tuple(subjects or ()),
            yours=source == Fact.Source.PERSON,
            pinned=pinned,
        )
        for pk, text, category, subjects, source, pinned in rows
    ]


def _apply(room: Room, scope: str, operation: facts.Operation, source: str) -> None:
    """Apply one operation (a person's fact is left alone); a fact it writes, new or a correction,
    is left for the catch-up's index step."""
    draft = operation.draft
    if operation.kind == "create":
        fact_create(
            room=room,
            scope=scope,
            text=draft.text,
            category=draft.category,
            subjects=list(draft.subjects),
            confidence=draft.confidence,
            first_seq=draft.first_seq,
            last_seq=draft.last_seq,
            source=source,
            index_now=False,
        )
        return
    fact = Fact.objects.filter(room=room, scope=scope, pk=operation.target).first()
    if fact is None:
        return
    if operation.kind == "update":
        fact_correct(
            fact=fact,
            text=draft.text,
            source=source,
            category=draft.category,
            subjects=list(draft.subjects) or None,
            confidence=draft.confidence,
            first_seq=draft.first_seq,
            last_seq=draft.last_seq,
            index_now=False,
        )
    elif operation.kind == "delete":
        fact_forget(fact=fact)
    else:
        fact_pin(fact=fact)


@dataclass
class FactsCycle:
    """One catch-up's memory cycle over a room: `manage` each scope after its summaries, then
    `finish` (decay and trim). `problems` and `notices` are for the room's last error and the host."""

    room: Room
    fallback: bool = False  # a failing Utility model: the extractor takes over (else ProviderTrouble)
    cancelled: Callable[[], bool] | None = None
    # Blocks summarised before this run that the Utility model reads per memory set (None: all).
    # A regular catch-up reads a few, so a long chat that had no facts yet gets them over its
    # next replies instead of hundreds of model calls after one; a backfill reads them all.
    limit: int | None = None
    template: str = ""  # the host's own memory-manager prompt ("" for the built-in)
    started: dt.datetime = field(default_factory=timezone.now)
    managed: int = 0  # blocks the manager read in this run
    problems: list[str] = field(default_factory=list)
    notices: list[str] = field(default_factory=list)

    def _stop(self) -> bool:
        return bool(self.cancelled and self.cancelled())

    def manage(
        self,
        *,
        scope: str,
        pov: str | None,
        utility,
        beat: Callable[[], None] | None = None,
        on_block: Callable[[int, int], None] | None = None,
        on_text: OnText | None = None,
        written: frozenset[int] = frozenset(),
    ):
        """Read the summarised blocks of `scope` the manager has not read (oldest first) for facts:
        those summarised in this run (`written`), and of the older ones up to `limit`;
        `on_block(done, total)` hears each, `on_text` the model's answers as they stream. Return
        the Utility connection for the rest of the run (None once it failed and fell back)."""
        pending = (
            Summary.objects.filter(room=self.room, scope=scope, tier=0, stale=False)
            .exclude(input_hash="")
            .exclude(manager_hash=F("input_hash"))
            .order_by("block")
        )
        pending = list(pending)
        if utility is not None and self.limit is not None:
            older = [summary for summary in pending if summary.block not in written][: self.limit]
            pending = [summary for summary in pending if summary.block in written or summary in older]
        for done, summary in enumerate(pending):
            if on_block:
                on_block(done, len(pending))
            if self._stop():
                return utility
            if beat:
                beat()
            lines = message_lines(self.room, summary.seq_from, summary.seq_to + 1)
            try:
                operations, source = self._read(scope, pov, lines, utility, on_text)
            except ProviderTrouble as exc:
                if not self.fallback:
                    raise
                self.problems.append(str(exc))
                utility = None
                operations, source = self._read(scope, pov, lines, None)
            if self._stop():
                return utility  # the answer came after Cancel: nothing of it is written
            self._commit(summary, scope, operations, source)
        if on_block and pending:
            on_block(len(pending), len(pending))
        return utility

    def _read(
        self, scope: str, pov: str | None, lines: list[Line], utility, on_text: OnText | None = None
    ) -> tuple[list, str]:
        if not lines:
            return [], Fact.Source.EXTRACTOR
        if utility is None:
            said = [(line.seq, line.speaker, line.text) for line in lines]
            drafts = facts.extract(said, names=_names(self.room))
            operations = [facts.Operation(kind="create", target=None, draft=draft) for draft in drafts]
            return operations, Fact.Source.EXTRACTOR
        shown = manager.pick_facts(_known(self.room, scope), lines)
        messages = manager.manager_messages(
            lines, shown, pov=pov, room_title=self.room.title, template=self.template
        )
        content, calls = ask_manager(utility, messages, on_text=on_text)
        parsed = facts.parse_reply(
            content,
            calls,
            known_ids={fact.id for fact in shown},
            known_categories={fact.id: fact.category for fact in shown},
            first_seq=lines[0].seq,
            last_seq=lines[-1].seq,
        )
        if parsed.notice:
            self.notices.append(f"messages #{lines[0].seq}–#{lines[-1].seq}: {parsed.notice}")
        return parsed.operations, Fact.Source.MODEL

    def _commit(self, summary: Summary, scope: str, operations: list, source: str) -> None:
        with transaction.atomic():
            current = Summary.objects.select_for_update().filter(pk=summary.pk).first()
            if current is None or current.stale or current.input_hash != summary.input_hash:
                return  # its messages changed meanwhile: the next run reads the block again
            for operation in operations:
                try:
                    _apply(self.room, scope, operation, source)
                except MemoryRefused as exc:
                    self.problems.append(f"a fact was not saved: {exc}")
            current.manager_hash = current.input_hash
            current.save(update_fields=["manager_hash"])
        # The facts written are left unindexed: the catch-up's index step, right after the cycle,
        # embeds every block's together in the index's batches (`index_facts`), one call for
        # dozens of blocks where a call per block cost a backfill a Chroma round trip each.
        self.managed += 1

    def finish(self, tuning: MemoryTuning) -> int:
        """After a cycle that read blocks: cool and trim (`decay_and_trim`); return how many were trimmed."""
        if not self.managed:
            return 0
        return decay_and_trim(room=self.room, tuning=tuning, started=self.started)


def decay_and_trim(*, room: Room, tuning: MemoryTuning, started: dt.datetime) -> int:
    """Cool every unpinned active fact older than this cycle (`started`) and not recalled since the
    last cycle; then trim each memory set to `tuning.facts_max` facts (`facts.trim`; soft: forgotten,
    restorable) and demote the least important hot ones to cold past `tuning.facts_hot_tokens`
    tokens. Return how many were forgotten."""
    state, _ = RoomMemory.objects.get_or_create(room=room)
    cooling = Fact.objects.filter(room=room, status=Fact.Status.ACTIVE, pinned=False, created_at__lt=started)
    if state.facts_cycle_at is not None:
        cooling = cooling.filter(Q(last_used_at__isnull=True) | Q(last_used_at__lt=state.facts_cycle_at))
    # One cycle's cooling multiplies every such heat by the same factor: one UPDATE, not a row each.
    cooling.update(heat=F("heat") * facts.cool(1.0))
    RoomMemory.objects.filter(pk=state.pk).update(facts_cycle_at=timezone.now())

    trimmed = 0
    active = list(Fact.objects.filter(room=room, status=Fact.Status.ACTIVE))
    for scope in sorted({fact.scope for fact in active}):
        mine = {fact.pk: fact for fact in active if fact.scope == scope}
        views = [
            facts.FactView(
                id=fact.pk,
                text=fact.text,
                heat=fact.heat,
                confidence=fact.confidence,
                pinned=fact.pinned,
                by_person=fact.source == Fact.Source.PERSON,
                last_seq=fact.last_seq or 0,
            )
            for fact in mine.values()
        ]
        decided = facts.trim(
            views,
            max_count=tuning.facts_max,
            token_budget=tuning.facts_hot_tokens,
            count_tokens=default_count_tokens,
        )
        facts_set_heat(heats={pk: min(mine[pk].heat, facts.DEMOTED_HEAT) for pk in decided.cool})
        trimmed += facts_forget_trimmed(room=room, ids=decided.forget)
    return trimmed


def scene_note_refresh(room_id: int, *, on_text: OnText | None = None) -> bool:
    """Read the room's scene note again from its latest messages, if any arrived since it last
    read; the Utility model writes it when connected (its failure falls back to the built-in
    reader), streaming its answer to `on_text` when given. Return whether the note changed."""
    room = Room.objects.select_related("host").filter(pk=room_id).first()
    if room is None or not memory_on(room):
        return False
    state = RoomMemory.objects.filter(room=room).first()
    read_upto = state.scene_note_seq if state else -1
    newest = Message.objects.filter(room=room, hidden=False).aggregate(n=Max("seq"))["n"]
    if newest is None or newest <= read_upto:
        return False
    lines = message_lines(room, max(0, newest - 3 * manager.SCENE_LINES), newest + 1)[-manager.SCENE_LINES :]
    if not lines or lines[-1].seq <= read_upto:
        return False
    note, source = None, scene.MODEL
    utility = model_roles_get(user=room.host).utility
    if utility is not None:
        previous = facts.SceneNote(**_note_fields(state.scene_note)) if state and state.scene_note else None
        try:
            answer, _ = utility_call(
                gateway.target_for(utility),
                manager.scene_messages(
                    lines, previous=previous, template=prompts.custom(tuning_get().custom_prompts, "scene")
                ),
                on_text=on_text,
                template=_template(utility),
                timeout=UTILITY_TIMEOUT,
                temperature=0.2,
                max_tokens=SCENE_MAX_TOKENS,
            )
            note = manager.parse_scene(answer)
        except Exception as exc:  # noqa: BLE001 - the reader writes the note instead
            log.warning(
                "scene note of room %s: the Utility model failed (%s)", room_id, gateway.plain_error(exc)
            )
    if note is None:
        note = facts.scene_note([(line.seq, line.speaker, line.text) for line in lines], names=_names(room))
        source = scene.READER
    return scene.scene_note_update(room=room, note=note, source=source, upto_seq=lines[-1].seq)


def _note_fields(stored: dict) -> dict:
    return {
        "where": str(stored.get("where", "")),
        "who": tuple(stored.get("who", ())),
        "when": str(stored.get("when", "")),
        "open_threads": tuple(stored.get("open_threads", ())),
    }
