"""Writes of a room's lasting facts: create, correct, a person's edit, pin, forget, restore, heat.

A person's word wins: a fact a person wrote or edited ("Yours") is never corrected, forgotten
or re-pinned by the memory cycle (the model or the built-in extractor); such a call returns the
fact untouched and says so. Writing is idempotent: the same text in the same room, scope and
message range is written once, whatever became of it since (a person's rewrite, a correction,
forgetting), so running the memory cycle over a stretch again changes nothing.

Only active facts are in the vector index. Every change re-indexes at once, outside the
transaction; when the embedder or the vector store fails, the fact is saved anyway and the next
memory run indexes it (`indexing.index_facts`).
"""

from __future__ import annotations

import logging
import math
import re
from collections.abc import Iterable, Mapping
from dataclasses import dataclass

from django.db import transaction
from django.db.models import F, Max
from django.db.models.functions import Least
from django.utils import timezone

from memory import index, jobs
from memory.models import MAX_FACT_TEXT, SHARED, Fact
from memory.selectors import fact_history, live_generations
from memory.services.indexing import facts_indexed, generations_ensure, upsert_facts_into
from memory.services.person import MemoryRefused
from orbchat.connections import embedding
from rooms.models import Message, Room, Seat

log = logging.getLogger(__name__)

MAX_SUBJECTS = 12
MAX_SUBJECT = 100  # characters of one subject's name
INDEX_FAILED = "Saved, but it could not be indexed yet ({reason}); it is indexed on the next memory run."

# Why a call changed nothing (FactOutcome.reason).
EXISTS = "exists"  # the same text in the same scope and range was written before
YOURS = "yours"  # a person wrote or edited it: the memory cycle leaves it alone
NOT_ACTIVE = "not active"  # corrected or forgotten already
SAME = "same"  # nothing to change
ALREADY_CORRECTED = "already corrected"  # this correction was made before

_SEAT_SCOPE = re.compile(r"seat-(\d+)")


@dataclass(frozen=True)
class FactOutcome:
    """What a write did: the fact as it now stands, whether anything changed, why not
    (`reason`, "" when it changed) and a notice for the person ("" when none)."""

    fact: Fact
    changed: bool
    reason: str = ""
    notice: str = ""


def write_key(text: str) -> str:
    """The identity of a fact's text for telling repeats apart: casefolded, spaces collapsed."""
    return index.text_hash(" ".join(text.casefold().split()))


# Validation ---------------------------------------------------------------------------------------


def clean_fact_text(text: object) -> str:
    if not isinstance(text, str):
        raise MemoryRefused("A fact's text must be text.", field="text")
    text = " ".join(text.split())
    if not text:
        raise MemoryRefused("A fact needs some text.", field="text")
    if "\x00" in text:
        raise MemoryRefused("A fact cannot hold NUL characters.", field="text")
    if len(text) > MAX_FACT_TEXT:
        raise MemoryRefused(
            f"A fact holds at most {MAX_FACT_TEXT} characters; this one has {len(text):,}.", field="text"
        )
    return text


def clean_category(category: object) -> str:
    if category not in Fact.Category.values:
        raise MemoryRefused(
            f"A fact's category is one of {', '.join(Fact.Category.values)}; not {category!r}.",
            field="category",
        )
    return str(category)


def clean_subjects(subjects: object) -> list[str]:
    """Return the subjects' names stripped, each once, in their order; refuse what is not names."""
    if subjects is None:
        return []
    if not isinstance(subjects, list | tuple) or not all(isinstance(s, str) for s in subjects):
        raise MemoryRefused("A fact's subjects are a list of names.", field="subjects")
    names: list[str] = []
    for subject in subjects:
        name = " ".join(subject.split())
        if len(name) > MAX_SUBJECT:
            raise MemoryRefused(f"A subject's name holds at most {MAX_SUBJECT} characters.", field="subjects")
        if name and name.casefold() not in {n.casefold() for n in names}:
            names.append(name)
    if len(names) > MAX_SUBJECTS:
        raise MemoryRefused(f"A fact names at most {MAX_SUBJECTS} subjects.", field="subjects")
    return names


def clean_confidence(confidence: object) -> float:
    if isinstance(confidence, bool) or not isinstance(confidence, int | float) or not 0 <= confidence <= 1:
        raise MemoryRefused("A fact's confidence is a number from 0 to 1.", field="confidence")
    return float(confidence)


def clean_source(source: object) -> str:
    if source not in Fact.Source.values:
        raise MemoryRefused(f"A fact's source is one of {', '.join(Fact.Source.values)}.", field="source")
    return str(source)


def clean_scope(room: Room, scope: object) -> str:
    """Return "shared" or the scope of one of the room's seats ("seat-<id>"), or refuse."""
    if scope == SHARED:
        return SHARED
    match = _SEAT_SCOPE.fullmatch(scope) if isinstance(scope, str) else None
    if match is None or not Seat.objects.filter(room=room, pk=int(match.group(1))).exists():
        raise MemoryRefused(
            "A fact belongs to the shared set or to one of this chat's characters.", field="scope"
        )
    return str(scope)


def clean_fact_range(room: Room, first_seq: object, last_seq: object) -> tuple[int | None, int | None]:
    """Return a message range of the room (both None: tied to no messages), or refuse."""
    if first_seq is None and last_seq is None:
        return None, None
    if first_seq is None or last_seq is None:
        raise MemoryRefused("Give both the first and the last message, or neither.", field="first_seq")
    if any(isinstance(v, bool) or not isinstance(v, int) for v in (first_seq, last_seq)):
        raise MemoryRefused("Messages are given by their numbers.", field="first_seq")
    if first_seq < 0 or last_seq < first_seq:
        raise MemoryRefused(
            "The first message must be 0 or more and not after the last one.", field="first_seq"
        )
    newest = Message.objects.filter(room=room).aggregate(n=Max("seq"))["n"]
    if newest is None or last_seq > newest:
        raise MemoryRefused(
            f"This chat's messages go up to #{newest if newest is not None else 0}.", field="last_seq"
        )
    return first_seq, last_seq


def _cycle_source(source: str) -> str:
    source = clean_source(source)
    if source == Fact.Source.PERSON:
        raise MemoryRefused("A person changes a fact with an edit, not a correction.", field="source")
    return source


# The index ----------------------------------------------------------------------------------------


def facts_index(room: Room, facts: list[Fact]) -> str:
    """Index these (active) facts in every live generation now, embedded together; return a
    notice if that failed (they are then indexed by the next catch-up)."""
    facts = [f for f in facts if f.status == Fact.Status.ACTIVE]
    if not facts:
        return ""
    try:
        for position, generation in enumerate(generations_ensure(room.host)):
            upsert_facts_into(generation, facts, required=position == 0)
    except embedding.EmbedderFailed as exc:
        return INDEX_FAILED.format(reason=exc.args[0] if exc.args else "the embedder failed")
    except Exception as exc:  # noqa: BLE001 - the vector store is down: the next run indexes it
        log.exception("indexing facts %s failed", [f.pk for f in facts])
        return INDEX_FAILED.format(reason=str(exc) or exc.__class__.__name__)
    facts_indexed(facts)
    return ""


def _unindex(room: Room, facts: list[Fact]) -> None:
    """Take facts that are no longer active out of the index (recall re-checks status anyway)."""
    ids = [index.fact_id(f.pk) for f in facts]
    Fact.objects.filter(pk__in=[f.pk for f in facts]).exclude(status=Fact.Status.ACTIVE).update(
        indexed_hash=""
    )
    try:
        index.delete_facts(live_generations(room.host), ids)
    except Exception:  # noqa: BLE001 - the vector store is down: the worker deletes them later
        log.exception("removing facts %s from the index failed", ids)
        jobs.enqueue_forget_vectors(room.host_id, [], [], ids)


def _locked(fact: Fact) -> Fact:
    current = Fact.objects.select_for_update().filter(pk=fact.pk).first()
    if current is None:
        raise MemoryRefused("That fact no longer exists.", field="id")
    return current


# Writes -------------------------------------------------------------------------------------------


def fact_create(
    *,
    room: Room,
    scope: str = SHARED,
    text: str,
    category: str,
    subjects: list[str] | None = None,
    confidence: float = 1.0,
    first_seq: int | None = None,
    last_seq: int | None = None,
    source: str,
    pinned: bool = False,
    actor=None,
    index_now: bool = True,
) -> FactOutcome:
    """Write a fact unless the same text was written in this room, scope and range before (then
    return that one, `changed` False). `actor` is the person when `source` is "person". `index_now`
    False leaves indexing to the caller (`facts_index`), which writes many facts at once."""
    text = clean_fact_text(text)
    values = {
        "category": clean_category(category),
        "subjects": clean_subjects(subjects),
        "confidence": clean_confidence(confidence),
        "source": clean_source(source),
    }
    scope = clean_scope(room, scope)
    first_seq, last_seq = clean_fact_range(room, first_seq, last_seq)
    if values["source"] == Fact.Source.PERSON and actor is None:
        raise MemoryRefused("A person's fact needs the person who wrote it.", field="source")
    key = write_key(text)
    with transaction.atomic():
        Room.objects.select_for_update().filter(pk=room.pk).first()  # one writer of a room's facts at a time
        existing = Fact.objects.filter(
            room=room, scope=scope, write_key=key, first_seq=first_seq, last_seq=last_seq
        ).first()
        if existing is not None:
            return FactOutcome(existing, changed=False, reason=EXISTS)
        fact = Fact.objects.create(
            room=room,
            scope=scope,
            text=text,
            first_seq=first_seq,
            last_seq=last_seq,
            write_key=key,
            text_hash=index.text_hash(text),
            pinned=bool(pinned),
            changed_by=actor if values["source"] == Fact.Source.PERSON else None,
            **values,
        )
    return FactOutcome(fact, changed=True, notice=facts_index(room, [fact]) if index_now else "")


def fact_add_by_person(
    *,
    actor,
    room: Room,
    text: str,
    category: str,
    subjects: list[str] | None = None,
    confidence: float = 1.0,
    first_seq: int | None = None,
    last_seq: int | None = None,
    scope: str = SHARED,
    pinned: bool = False,
) -> FactOutcome:
    """A person adds a fact of their own ("Yours"). The same text in the same scope and range
    again returns the fact already there; one that was corrected or forgotten is refused, naming
    it, for it is restored rather than written twice."""
    outcome = fact_create(
        room=room,
        scope=scope,
        text=text,
        category=category,
        subjects=subjects,
        confidence=confidence,
        first_seq=first_seq,
        last_seq=last_seq,
        source=Fact.Source.PERSON,
        pinned=pinned,
        actor=actor,
    )
    if not outcome.changed and outcome.fact.status != Fact.Status.ACTIVE:
        raise MemoryRefused(
            f"This fact was written before and is {outcome.fact.get_status_display().lower()} "
            f"(#{outcome.fact.pk}): restore it instead.",
            field="text",
        )
    return outcome


def fact_correct(
    *,
    fact: Fact,
    text: str,
    source: str,
    category: str | None = None,
    subjects: list[str] | None = None,
    confidence: float | None = None,
    first_seq: int | None = None,
    last_seq: int | None = None,
    index_now: bool = True,
) -> FactOutcome:
    """Correct a fact for the memory cycle: a new active fact (what is not given is the old one's;
    the range too, unless both ends are given; a pin carries over), and the old one superseded by
    it. A person's fact, one no longer active, or the same text again is returned untouched.
    `index_now` False leaves indexing the new fact to the caller (`facts_index`)."""
    source = _cycle_source(source)
    room = fact.room
    text = clean_fact_text(text)
    given = {
        "category": None if category is None else clean_category(category),
        "subjects": None if subjects is None else clean_subjects(subjects),
        "confidence": None if confidence is None else clean_confidence(confidence),
    }
    if first_seq is not None or last_seq is not None:
        first_seq, last_seq = clean_fact_range(room, first_seq, last_seq)
    key = write_key(text)
    with transaction.atomic():
        Room.objects.select_for_update().filter(pk=room.pk).first()
        old = _locked(fact)
        if old.source == Fact.Source.PERSON:
            return FactOutcome(old, changed=False, reason=YOURS)
        if old.status != Fact.Status.ACTIVE:
            successor = old.superseded_by
            if successor is not None and successor.write_key == key:
                return FactOutcome(successor, changed=False, reason=ALREADY_CORRECTED)
            return FactOutcome(old, changed=False, reason=NOT_ACTIVE)
        if key == old.write_key:
            return FactOutcome(old, changed=False, reason=SAME)
        if first_seq is None:
            first_seq, last_seq = old.first_seq, old.last_seq
        twin = Fact.objects.filter(
            room=room, scope=old.scope, write_key=key, first_seq=first_seq, last_seq=last_seq
        ).first()
        if twin is not None and twin.status != Fact.Status.ACTIVE:
            return FactOutcome(old, changed=False, reason=EXISTS)  # that wording was corrected or forgotten
        new = twin or Fact.objects.create(
            room=room,
            scope=old.scope,
            text=text,
            category=given["category"] or old.category,
            subjects=old.subjects if given["subjects"] is None else given["subjects"],
            confidence=old.confidence if given["confidence"] is None else given["confidence"],
            first_seq=first_seq,
            last_seq=last_seq,
            source=source,
            pinned=old.pinned,
            write_key=key,
            text_hash=index.text_hash(text),
        )
        old.status = Fact.Status.SUPERSEDED
        old.superseded_by = new
        old.save(update_fields=["status", "superseded_by", "updated_at"])
    _unindex(room, [old])
    return FactOutcome(new, changed=True, notice=facts_index(room, [new]) if index_now else "")


def fact_edit_by_person(
    *,
    actor,
    fact: Fact,
    text: str | None = None,
    category: str | None = None,
    subjects: list[str] | None = None,
    confidence: float | None = None,
) -> FactOutcome:
    """A person rewrites an active fact in place: it becomes "Yours" (never changed by the memory
    cycle again) and, unless they give one, its confidence becomes 1."""
    changes: dict = {}
    if text is not None:
        changes["text"] = clean_fact_text(text)
    if category is not None:
        changes["category"] = clean_category(category)
    if subjects is not None:
        changes["subjects"] = clean_subjects(subjects)
    changes["confidence"] = 1.0 if confidence is None else clean_confidence(confidence)
    with transaction.atomic():
        current = _locked(fact)
        if current.status != Fact.Status.ACTIVE:
            raise MemoryRefused("Restore this fact before editing it.", field="status")
        for name, value in changes.items():
            setattr(current, name, value)
        current.text_hash = index.text_hash(current.text)
        current.source = Fact.Source.PERSON
        current.changed_by = actor
        current.save()
    return FactOutcome(current, changed=True, notice=facts_index(current.room, [current]))


def _pin(fact: Fact, pinned: bool, actor) -> FactOutcome:
    with transaction.atomic():
        current = _locked(fact)
        if actor is None and current.source == Fact.Source.PERSON:
            return FactOutcome(current, changed=False, reason=YOURS)
        if current.pinned == pinned:
            return FactOutcome(current, changed=False, reason=SAME)
        current.pinned = pinned
        current.changed_by = actor or current.changed_by
        current.save(update_fields=["pinned", "changed_by", "updated_at"])
    return FactOutcome(current, changed=True)


def fact_pin(*, fact: Fact, actor=None) -> FactOutcome:
    """Pin a fact (it never cools). `actor` None: the memory cycle, which leaves a person's fact alone."""
    return _pin(fact, True, actor)


def fact_unpin(*, fact: Fact, actor=None) -> FactOutcome:
    """Unpin a fact. `actor` None: the memory cycle, which leaves a person's fact alone."""
    return _pin(fact, False, actor)


def fact_forget(*, fact: Fact, actor=None) -> FactOutcome:
    """Forget a fact (soft: it stays, restorable) and take it out of the index. `actor` None: the
    memory cycle (a trim, a delete tool call), which leaves a person's fact alone."""
    with transaction.atomic():
        current = _locked(fact)
        if actor is None and current.source == Fact.Source.PERSON:
            return FactOutcome(current, changed=False, reason=YOURS)
        if current.status == Fact.Status.FORGOTTEN:
            return FactOutcome(current, changed=False, reason=SAME)
        current.status = Fact.Status.FORGOTTEN
        current.changed_by = actor or current.changed_by
        current.save(update_fields=["status", "changed_by", "updated_at"])
    _unindex(current.room, [current])
    return FactOutcome(current, changed=True)


def facts_forget_trimmed(*, room: Room, ids: Iterable[int]) -> int:
    """The memory cycle's trim forgets these facts at once (soft, restorable, as `fact_forget`
    with no actor: a person's fact and one no longer active are left alone), then takes them out
    of the index in one call. Return how many were forgotten."""
    with transaction.atomic():
        forgotten = list(
            Fact.objects.select_for_update()
            .filter(room=room, pk__in=list(ids), status=Fact.Status.ACTIVE)
            .exclude(source=Fact.Source.PERSON)
        )
        Fact.objects.filter(pk__in=[fact.pk for fact in forgotten]).update(
            status=Fact.Status.FORGOTTEN, updated_at=timezone.now()
        )
    if forgotten:
        _unindex(room, forgotten)
    return len(forgotten)


def fact_restore(*, actor, fact: Fact) -> FactOutcome:
    """A person brings a forgotten or corrected fact back: it becomes the active version of its
    correction chain, so the chain's active fact (if any) is superseded by it; back in the index."""
    with transaction.atomic():
        Room.objects.select_for_update().filter(pk=fact.room_id).first()
        current = _locked(fact)
        if current.status == Fact.Status.ACTIVE:
            return FactOutcome(current, changed=False, reason=SAME)
        displaced = [
            f for f in fact_history(current) if f.pk != current.pk and f.status == Fact.Status.ACTIVE
        ]
        for other in displaced:
            other.status = Fact.Status.SUPERSEDED
            other.superseded_by = current
            other.save(update_fields=["status", "superseded_by", "updated_at"])
        current.status = Fact.Status.ACTIVE
        current.superseded_by = None
        current.changed_by = actor
        current.save(update_fields=["status", "superseded_by", "changed_by", "updated_at"])
    _unindex(current.room, displaced)
    return FactOutcome(current, changed=True, notice=facts_index(current.room, [current]))


def _finite_share(value: object, field: str) -> float:
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
        raise MemoryRefused(f"A fact's {field} is a number.", field=field)
    return float(value)


def facts_warm(*, ids: Iterable[int], amount: float) -> int:
    """Recall used these active facts: heat += `amount` (at most 1), one more use, used now.
    Return how many were warmed."""
    amount = _finite_share(amount, "heat")
    if amount < 0:
        raise MemoryRefused("Warming adds heat: the amount is 0 or more.", field="heat")
    return Fact.objects.filter(pk__in=list(ids), status=Fact.Status.ACTIVE).update(
        heat=Least(F("heat") + amount, 1.0),
        access_count=F("access_count") + 1,
        last_used_at=timezone.now(),
    )


def facts_set_heat(*, heats: Mapping[int, float]) -> int:
    """Store the heat of facts (fact pk -> heat, kept within 0..1), as decay computed it. Return
    how many rows were written."""
    wanted = {int(pk): min(1.0, max(0.0, _finite_share(heat, "heat"))) for pk, heat in heats.items()}
    rows = list(Fact.objects.filter(pk__in=list(wanted)).only("pk", "heat"))
    for row in rows:
        row.heat = wanted[row.pk]
    Fact.objects.bulk_update(rows, ["heat"])
    return len(rows)
