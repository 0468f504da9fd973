"""The Memory API: a room's memories and lasting facts read, searched and changed over HTTP, with
the panel's rules.

The host reads and changes a room's memories; a member reads them only when the host lets
members read the chat's memory (403 otherwise); anyone else gets 404, as if the room did not
exist. An archived room's memories can be read, not changed. Writes go through the same services
as the Memory panel (`memory.services.person` for memories, `memory.services.facts` for facts).
A member reads only the shared facts, never a character's own.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Annotated, Any, Literal

from django.http import Http404, HttpRequest
from ninja import Path, Query, Router, Schema
from ninja.errors import HttpError, ValidationError
from pydantic import AfterValidator, ConfigDict, Field
from pydantic_core import PydanticCustomError

from memory import selectors
from memory.facts import is_hot
from memory.models import MAX_FACT_TEXT, MAX_MEMORY_TEXT, Fact, Summary
from memory.services import facts as fact_services
from memory.services import person
from rooms import permissions
from rooms.models import Room
from rooms.selectors import hosted_rooms

router = Router(tags=["memories"])

MAX_ID = 2**63 - 1  # the database's largest key
MAX_SEQ = 2**31 - 1  # the largest message number a room can hold
MAX_OFFSET = 2**31 - 1
MAX_QUERY = 500
SHOW = Literal["all", "yours", "pinned", "stale", "added"]


def _plain(value: str) -> str:
    if "\x00" in value:  # PostgreSQL can neither store nor compare it
        raise PydanticCustomError("nul_character", "Text must not contain NUL characters.")
    return value


def _not_blank(value: str) -> str:
    if not value.strip():
        raise PydanticCustomError("blank_text", "A memory needs some text.")
    return value


@dataclass(frozen=True)
class _Pattern:
    """State a rule the validators enforce as a pattern in the schema, for clients (and fuzzers)."""

    pattern: str

    def __get_pydantic_json_schema__(self, core_schema, handler) -> dict:
        return handler(core_schema) | {"pattern": self.pattern}


Text = Annotated[str, AfterValidator(_plain), _Pattern(r"^[^\u0000]*$")]
MemoryText = Annotated[
    str, AfterValidator(_plain), AfterValidator(_not_blank), _Pattern(r"^[^\u0000]*[^\s\u0000][^\u0000]*$")
]
RoomId = Annotated[int, Path(ge=1, le=MAX_ID, description="The chat's id.")]
MemoryId = Annotated[int, Path(ge=1, le=MAX_ID, description="The memory's id.")]


# Schemas ----------------------------------------------------------------------------------------


class MemoryOut(Schema):
    """One memory of a room."""

    id: int
    room: int = Field(description="The chat's id.")
    scope: str = Field(description='"shared", or "seat-<id>": one character\'s personal set.')
    tier: int = Field(
        description=f"0: a block of messages; 1+: a roll-up; {Summary.ADDED}: added by a person."
    )
    kind: Literal["summary", "added"]
    block: int
    seq_from: int | None = Field(description="First message covered; null for an added memory tied to none.")
    seq_to: int | None = Field(description="Last message covered; null for an added memory tied to none.")
    label: str
    text: str
    keywords: list[str]
    source: Literal["utility", "extractive", "person"]
    yours: bool = Field(description="Written or edited by a person: never rewritten automatically.")
    pinned: bool = Field(description="Sent with every reply, within the memory budget.")
    stale: bool = Field(description="Waiting to be rewritten (what it was made from changed).")
    model: str = Field(description="The model that wrote it (empty for a person's or the built-in one's).")
    last_recalled_at: datetime | None
    created_at: datetime
    updated_at: datetime

    @staticmethod
    def resolve_room(obj: Summary) -> int:
        return obj.room_id

    @staticmethod
    def resolve_kind(obj: Summary) -> str:
        return "added" if obj.added else "summary"

    @staticmethod
    def resolve_keywords(obj: Summary) -> list[str]:
        return [str(k) for k in obj.keywords or []]


class MemoryWritten(MemoryOut):
    notice: str = Field(description='Why the change is not searchable yet (e.g. the embedder failed), or "".')


class MemoryFound(MemoryOut):
    score: float = Field(description="Cosine similarity to the query, 0 to 1.")


class MemoryPage(Schema):
    count: int = Field(description="How many memories match, over all pages.")
    items: list[MemoryOut]


class SearchResult(Schema):
    count: int
    items: list[MemoryFound]


class MemoryStats(Schema):
    total: int
    by_tier: dict[str, int] = Field(description='Counts by tier ("0", "1", …, and "added").')
    by_room: dict[str, int] = Field(description="Counts by chat id.")
    stale: int
    person_written: int
    pinned: int


class MemoryCreate(Schema):
    text: MemoryText = Field(
        min_length=1, max_length=MAX_MEMORY_TEXT, description="The memory, in plain words."
    )
    seq_from: int | None = Field(
        None, ge=0, le=MAX_SEQ, description="First message it is about (give both ends, or neither)."
    )
    seq_to: int | None = Field(None, ge=0, le=MAX_SEQ, description="Last message it is about.")
    pinned: bool = Field(False, description="Send it with every reply.")


class MemoryChange(Schema):
    """What to change: `text`, `pinned`, or both (null is not a value: leave a field out instead)."""

    model_config = ConfigDict(json_schema_extra={"minProperties": 1})

    text: MemoryText = Field(
        None, min_length=1, max_length=MAX_MEMORY_TEXT, description="New text; the memory becomes yours."
    )
    pinned: bool = Field(None, description="Pin or unpin it.")


class Error(Schema):
    detail: str


class FieldError(Schema):
    loc: list[str | int] = Field(description='Where: e.g. ["body", "payload", "text"] or ["query", "limit"].')
    msg: str
    type: str
    ctx: dict[str, Any] | None = None


class Invalid(Schema):
    detail: list[FieldError]


READ_ERRORS = {401: Error, 403: Error, 404: Error, 422: Invalid}
WRITE_ERRORS = {400: Error, 401: Error, 403: Error, 404: Error, 422: Invalid}


# Permissions ------------------------------------------------------------------------------------


def _room_of(memory_id: int) -> int:
    room_id = selectors.memory_room_id(memory_id)
    if room_id is None:
        raise Http404("No such memory.")
    return room_id


def _readable(request: HttpRequest, room_id: int) -> Room:
    room, _ = permissions.room_for_memory_reader(request.auth, room_id)
    return room


def _writable(request: HttpRequest, room_id: int) -> Room:
    room = permissions.room_for_host(request.auth, room_id)
    permissions.ensure_writable(room)
    return room


def _refused(exc: person.MemoryRefused) -> Exception:
    """A service's refusal as the API's answer: a missing memory is 404, bad input 422."""
    if exc.field == "id":
        return Http404(str(exc))
    loc = ["body", "payload", exc.field] if exc.field else ["body", "payload"]
    return ValidationError([{"loc": loc, "msg": str(exc), "type": "memory_refused"}])


# Reads ------------------------------------------------------------------------------------------


@router.get(
    "/rooms/{room_id}/memories",
    response={200: MemoryPage, **READ_ERRORS},
    operation_id="memory_list",
    summary="List a chat's memories",
)
def memory_list(
    request: HttpRequest,
    room_id: RoomId,
    offset: Annotated[int, Query(ge=0, le=MAX_OFFSET, description="Memories to skip.")] = 0,
    limit: Annotated[int, Query(ge=1, le=100, description="Memories to return.")] = 20,
    tier: Annotated[
        int | None, Query(ge=0, le=Summary.ADDED, description=f"Only this tier ({Summary.ADDED}: added).")
    ] = None,
    show: Annotated[SHOW, Query(description="Only yours, pinned, stale or added memories.")] = "all",
    # Not Annotated[Text, Query(...)] = "": pydantic then drops the default of a nested Annotated.
    q: Text = Query("", max_length=MAX_QUERY, description="Words the text must hold (all of them)."),  # noqa: B008
):
    """A chat's memories, newest stretch first: added ones, then summaries by tier (deepest first)
    and block. The host always; a member when the host lets members read the chat's memory."""
    room = _readable(request, room_id)
    rows = selectors.memory_list(room, q=q, tier=tier, show=show)
    return {"count": rows.count(), "items": list(rows[offset : offset + limit])}


@router.get(
    "/rooms/{room_id}/memories/search",
    response={200: SearchResult, **READ_ERRORS, 503: Error},
    operation_id="memory_search",
    summary="Search a chat's memories by meaning",
)
def memory_search(
    request: HttpRequest,
    room_id: RoomId,
    q: Annotated[Text, Query(min_length=1, max_length=MAX_QUERY, description="What to look for.")],
    limit: Annotated[int, Query(ge=1, le=50, description="Memories to return at most.")] = 10,
    min_score: Annotated[float, Query(ge=0, le=1, description="Lowest cosine similarity kept.")] = 0.0,
):
    """The chat's memories nearest to `q` by meaning, best first, each with its score. 503 when the
    memory index cannot be searched right now."""
    room = _readable(request, room_id)
    try:
        found = selectors.memory_search(room, q=q, limit=limit, min_score=min_score)
    except selectors.SearchUnavailable as exc:
        return 503, {"detail": str(exc)}
    for summary, score in found:
        summary.score = score
    return {"count": len(found), "items": [summary for summary, _ in found]}


@router.get(
    "/memories/stats",
    response={200: MemoryStats, 401: Error},
    operation_id="memory_stats",
    summary="Count the memories of the chats you host",
)
def memory_stats(request: HttpRequest):
    """Counts over the memories of every chat you host: by tier, by chat, stale, written by a
    person, pinned."""
    return selectors.memory_stats(hosted_rooms(user=request.auth))


@router.get(
    "/memories/{memory_id}",
    response={200: MemoryOut, **READ_ERRORS},
    operation_id="memory_get",
    summary="Read one memory",
)
def memory_get(request: HttpRequest, memory_id: MemoryId):
    """One memory, for whoever may read its chat's memory."""
    room = _readable(request, _room_of(memory_id))
    summary = selectors.memory_get(room, memory_id)
    if summary is None:
        raise Http404("No such memory.")
    return summary


# Writes (the host's) ----------------------------------------------------------------------------


@router.post(
    "/rooms/{room_id}/memories",
    response={201: MemoryWritten, **WRITE_ERRORS},
    operation_id="memory_create",
    summary="Add a memory to a chat",
)
def memory_create(request: HttpRequest, room_id: RoomId, payload: MemoryCreate):
    """Add your own memory to the chat's shared set, optionally tied to a stretch of messages
    (`seq_from`..`seq_to`, both or neither). It is yours: never rewritten automatically. Host only."""
    room = _writable(request, room_id)
    try:
        summary, notice = person.memory_add(
            room=room,
            text=payload.text,
            seq_from=payload.seq_from,
            seq_to=payload.seq_to,
            pinned=payload.pinned,
        )
    except person.MemoryRefused as exc:
        raise _refused(exc) from exc
    return 201, _written(summary, notice)


@router.patch(
    "/memories/{memory_id}",
    response={200: MemoryWritten, **WRITE_ERRORS},
    operation_id="memory_update",
    summary="Edit or pin a memory",
)
def memory_update(request: HttpRequest, memory_id: MemoryId, payload: MemoryChange):
    """Replace a memory's text (it becomes yours; roll-ups made from it are rewritten), pin or
    unpin it, or both. Host only."""
    if payload.text is None and payload.pinned is None:
        raise ValidationError(
            [{"loc": ["body", "payload"], "msg": "Give text, pinned, or both.", "type": "missing"}]
        )
    room = _writable(request, _room_of(memory_id))
    notice = ""
    try:
        if payload.text is not None:
            summary, notice = person.memory_edit(room=room, summary_id=memory_id, text=payload.text)
        if payload.pinned is not None:
            summary = person.memory_pin(room=room, summary_id=memory_id, pinned=payload.pinned)
    except person.MemoryRefused as exc:
        raise _refused(exc) from exc
    return _written(summary, notice)


@router.delete(
    "/memories/{memory_id}",
    response={204: None, **WRITE_ERRORS},
    operation_id="memory_delete",
    summary="Forget a memory",
)
def memory_delete(request: HttpRequest, memory_id: MemoryId):
    """Delete a memory. A summary's stretch stays uncovered until a rebuild; the roll-ups made from
    it are rewritten without it. Host only."""
    room = _writable(request, _room_of(memory_id))
    try:
        person.memory_forget(room=room, summary_id=memory_id)
    except person.MemoryRefused as exc:
        raise _refused(exc) from exc
    return 204, None


@router.put(
    "/memories/{memory_id}/pin",
    response={200: MemoryOut, **WRITE_ERRORS},
    operation_id="memory_pin",
    summary="Pin a memory",
)
def memory_pin(request: HttpRequest, memory_id: MemoryId):
    """Pin a memory: it is sent with every reply, within the memory budget. Host only."""
    return _set_pinned(request, memory_id, pinned=True)


@router.delete(
    "/memories/{memory_id}/pin",
    response={200: MemoryOut, **WRITE_ERRORS},
    operation_id="memory_unpin",
    summary="Unpin a memory",
)
def memory_unpin(request: HttpRequest, memory_id: MemoryId):
    """Unpin a memory: it is recalled only when it matters again. Host only."""
    return _set_pinned(request, memory_id, pinned=False)


def _set_pinned(request: HttpRequest, memory_id: int, *, pinned: bool) -> Summary:
    room = _writable(request, _room_of(memory_id))
    try:
        return person.memory_pin(room=room, summary_id=memory_id, pinned=pinned)
    except person.MemoryRefused as exc:
        raise _refused(exc) from exc


def _written(row: Summary | Fact, notice: str) -> Summary | Fact:
    row.notice = notice
    return row


# Facts ------------------------------------------------------------------------------------------

FactId = Annotated[int, Path(ge=1, le=MAX_ID, description="The fact's id.")]
Category = Literal[tuple(Fact.Category.values)]
Subject = Annotated[str, AfterValidator(_plain), Field(max_length=fact_services.MAX_SUBJECT)]
FACT_STATUS = Literal["active", "superseded", "forgotten", "all"]
HEAT = Literal["all", "hot", "cold"]


class FactVersion(Schema):
    """One version in a fact's correction chain."""

    id: int
    text: str
    status: Literal["active", "superseded", "forgotten"]
    source: Literal["model", "extractor", "person"]
    superseded_by: int | None = Field(description="The fact that corrected this one, if any.")
    created_at: datetime
    updated_at: datetime

    @staticmethod
    def resolve_superseded_by(obj: Fact) -> int | None:
        return obj.superseded_by_id


class FactOut(FactVersion):
    """One lasting fact of a room."""

    room: int = Field(description="The chat's id.")
    scope: str = Field(description='"shared", or "seat-<id>": one character\'s own.')
    category: Category
    subjects: list[str] = Field(description="The people and things it names.")
    confidence: float = Field(description="0 to 1.")
    first_seq: int | None = Field(
        description="First message it came from; null for one about the whole story."
    )
    last_seq: int | None = Field(description="Last message it came from.")
    yours: bool = Field(description="Written or edited by a person: the memory cycle never changes it.")
    pinned: bool = Field(description="Never cools.")
    heat: float = Field(description="0 (cold) to 1 (hot).")
    hot: bool = Field(description="Competes at full strength (heat 0.5 or more).")
    access_count: int = Field(description="How often recall used it.")
    last_used_at: datetime | None

    @staticmethod
    def resolve_room(obj: Fact) -> int:
        return obj.room_id

    @staticmethod
    def resolve_subjects(obj: Fact) -> list[str]:
        return [str(s) for s in obj.subjects or []]

    @staticmethod
    def resolve_hot(obj: Fact) -> bool:
        return is_hot(obj.heat)


class FactDetail(FactOut):
    history: list[FactVersion] = Field(description="Every version of its correction chain, oldest first.")


class FactWritten(FactOut):
    notice: str = Field(description='Why the change is not searchable yet (e.g. the embedder failed), or "".')


class FactFound(FactOut):
    score: float = Field(description="Cosine similarity to the query, 0 to 1.")


class FactPage(Schema):
    count: int = Field(description="How many facts match, over all pages.")
    items: list[FactOut]


class FactSearchResult(Schema):
    count: int
    items: list[FactFound]


class FactStats(Schema):
    total: int
    by_status: dict[str, int] = Field(description="Counts by status (active, superseded, forgotten).")
    by_category: dict[str, int] = Field(description="Counts by category, over every status.")
    pinned: int


class FactCreate(Schema):
    text: Text = Field(
        min_length=1, max_length=MAX_FACT_TEXT, description="One statement that reads on its own."
    )
    category: Category
    subjects: list[Subject] = Field(
        [], max_length=fact_services.MAX_SUBJECTS, description="Names it is about."
    )
    confidence: float = Field(1.0, ge=0, le=1)
    first_seq: int | None = Field(
        None, ge=0, le=MAX_SEQ, description="First message it came from (give both ends, or neither)."
    )
    last_seq: int | None = Field(None, ge=0, le=MAX_SEQ, description="Last message it came from.")
    scope: Text = Field(
        "shared", max_length=24, description='"shared", or "seat-<id>" of one of the chat\'s characters.'
    )
    pinned: bool = Field(False, description="Pin it: it never cools.")


class FactChange(Schema):
    """What to change (null is not a value: leave a field out instead). Any change but `pinned`
    makes the fact yours, with confidence 1 unless given."""

    model_config = ConfigDict(json_schema_extra={"minProperties": 1})

    text: Text = Field(None, min_length=1, max_length=MAX_FACT_TEXT)
    category: Category = Field(None)
    subjects: list[Subject] = Field(None, max_length=fact_services.MAX_SUBJECTS)
    confidence: float = Field(None, ge=0, le=1)
    pinned: bool = Field(None, description="Pin or unpin it.")


FACT_WRITE_ERRORS = {**WRITE_ERRORS, 409: Error}


def _fact_room(fact_id: int) -> int:
    room_id = selectors.fact_room_id(fact_id)
    if room_id is None:
        raise Http404("No such fact.")
    return room_id


def _fact(room: Room, request: HttpRequest, fact_id: int) -> Fact:
    fact = selectors.fact_get(room, request.auth, fact_id)
    if fact is None:
        raise Http404("No such fact.")
    return fact


def _fact_refused(exc: person.MemoryRefused) -> Exception:
    """A refusal of a fact change: a fact that must be restored first is a 409, else as for memories."""
    if exc.field == "status":
        return HttpError(409, str(exc))
    return _refused(exc)


@router.get(
    "/rooms/{room_id}/facts",
    response={200: FactPage, **READ_ERRORS},
    operation_id="fact_list",
    summary="List a chat's facts",
    tags=["facts"],
)
def fact_list(
    request: HttpRequest,
    room_id: RoomId,
    offset: Annotated[int, Query(ge=0, le=MAX_OFFSET, description="Facts to skip.")] = 0,
    limit: Annotated[int, Query(ge=1, le=100, description="Facts to return.")] = 20,
    category: Annotated[Category | None, Query(description="Only this category.")] = None,
    status: Annotated[
        FACT_STATUS, Query(description='Only this status ("superseded": corrected).')
    ] = "active",
    heat: Annotated[HEAT, Query(description="Only hot (heat 0.5 or more) or cold facts.")] = "all",
    scope: Text = Query("", max_length=24, description='Only this scope: "shared" or "seat-<id>".'),  # noqa: B008
    q: Text = Query("", max_length=MAX_QUERY, description="Words the text must hold (all of them)."),  # noqa: B008
):
    """A chat's facts, pinned first, then hottest, then newest. The host reads every scope; a
    member (when the host lets members read the chat's memory) the shared facts only."""
    room = _readable(request, room_id)
    rows = selectors.fact_list(
        room, request.auth, category=category, status=status, heat=heat, scope=scope or None, q=q
    )
    return {"count": rows.count(), "items": list(rows[offset : offset + limit])}


@router.get(
    "/rooms/{room_id}/facts/search",
    response={200: FactSearchResult, **READ_ERRORS, 503: Error},
    operation_id="fact_search",
    summary="Search a chat's facts by meaning",
    tags=["facts"],
)
def fact_search(
    request: HttpRequest,
    room_id: RoomId,
    q: Annotated[Text, Query(min_length=1, max_length=MAX_QUERY, description="What to look for.")],
    limit: Annotated[int, Query(ge=1, le=50, description="Facts to return at most.")] = 10,
    min_score: Annotated[float, Query(ge=0, le=1, description="Lowest cosine similarity kept.")] = 0.0,
):
    """The chat's active facts nearest to `q` by meaning, best first, each with its score. 503
    when the memory index cannot be searched right now."""
    room = _readable(request, room_id)
    try:
        found = selectors.fact_search(room, request.auth, q=q, limit=limit, min_score=min_score)
    except selectors.SearchUnavailable as exc:
        return 503, {"detail": str(exc)}
    for fact, score in found:
        fact.score = score
    return {"count": len(found), "items": [fact for fact, _ in found]}


@router.get(
    "/rooms/{room_id}/facts/stats",
    response={200: FactStats, **READ_ERRORS},
    operation_id="fact_stats",
    summary="Count a chat's facts",
    tags=["facts"],
)
def fact_stats(request: HttpRequest, room_id: RoomId):
    """Counts of the chat's facts you may read: by status, by category, pinned."""
    room = _readable(request, room_id)
    return selectors.fact_stats(room, request.auth)


@router.get(
    "/facts/{fact_id}",
    response={200: FactDetail, **READ_ERRORS},
    operation_id="fact_get",
    summary="Read one fact with its correction chain",
    tags=["facts"],
)
def fact_get(request: HttpRequest, fact_id: FactId):
    """One fact, with every version of its correction chain, for whoever may read it."""
    room = _readable(request, _fact_room(fact_id))
    fact = _fact(room, request, fact_id)
    fact.history = selectors.fact_history(fact)
    return fact


@router.post(
    "/rooms/{room_id}/facts",
    response={201: FactWritten, 200: FactWritten, **WRITE_ERRORS},
    operation_id="fact_create",
    summary="Add a fact to a chat",
    tags=["facts"],
)
def fact_create(request: HttpRequest, room_id: RoomId, payload: FactCreate):
    """Add your own fact ("yours": the memory cycle never changes it), optionally tied to messages
    (`first_seq`..`last_seq`, both or neither). 201; 200 with the fact already there when the same
    text in the same scope and range is known. Host only."""
    room = _writable(request, room_id)
    try:
        outcome = fact_services.fact_add_by_person(actor=request.auth, room=room, **payload.dict())
    except person.MemoryRefused as exc:
        raise _fact_refused(exc) from exc
    return (201 if outcome.changed else 200), _written(outcome.fact, outcome.notice)


@router.patch(
    "/facts/{fact_id}",
    response={200: FactWritten, **FACT_WRITE_ERRORS},
    operation_id="fact_update",
    summary="Edit or pin a fact",
    tags=["facts"],
)
def fact_update(request: HttpRequest, fact_id: FactId, payload: FactChange):
    """Change an active fact's text, category, subjects or confidence (it becomes yours), pin or
    unpin it, or both. 409 for a corrected or forgotten fact: restore it first. Host only."""
    changes = payload.dict(exclude_none=True)
    pinned = changes.pop("pinned", None)
    if not changes and pinned is None:
        raise ValidationError(
            [
                {
                    "loc": ["body", "payload"],
                    "msg": "Give text, category, subjects, confidence or pinned.",
                    "type": "missing",
                }
            ]
        )
    room = _writable(request, _fact_room(fact_id))
    fact = _fact(room, request, fact_id)
    notice = ""
    try:
        if changes:
            outcome = fact_services.fact_edit_by_person(actor=request.auth, fact=fact, **changes)
            fact, notice = outcome.fact, outcome.notice
        if pinned is not None:
            change = fact_services.fact_pin if pinned else fact_services.fact_unpin
            fact = change(fact=fact, actor=request.auth).fact
    except person.MemoryRefused as exc:
        raise _fact_refused(exc) from exc
    return _written(fact, notice)


@router.delete(
    "/facts/{fact_id}",
    response={204: None, **WRITE_ERRORS},
    operation_id="fact_delete",
    summary="Forget a fact",
    tags=["facts"],
)
def fact_delete(request: HttpRequest, fact_id: FactId):
    """Forget a fact: it is no longer recalled, and stays to be restored. Host only."""
    room = _writable(request, _fact_room(fact_id))
    try:
        fact_services.fact_forget(fact=_fact(room, request, fact_id), actor=request.auth)
    except person.MemoryRefused as exc:
        raise _fact_refused(exc) from exc
    return 204, None


@router.post(
    "/facts/{fact_id}/restore",
    response={200: FactWritten, **WRITE_ERRORS},
    operation_id="fact_restore",
    summary="Restore a forgotten or corrected fact",
    tags=["facts"],
)
def fact_restore(request: HttpRequest, fact_id: FactId):
    """Bring a forgotten or corrected fact back as the active version of its correction chain (the
    chain's active fact, if any, is then corrected by it). Host only."""
    room = _writable(request, _fact_room(fact_id))
    try:
        outcome = fact_services.fact_restore(actor=request.auth, fact=_fact(room, request, fact_id))
    except person.MemoryRefused as exc:
        raise _fact_refused(exc) from exc
    return _written(outcome.fact, outcome.notice)


@router.put(
    "/facts/{fact_id}/pin",
    response={200: FactOut, **WRITE_ERRORS},
    operation_id="fact_pin",
    summary="Pin a fact",
    tags=["facts"],
)
def fact_pin(request: HttpRequest, fact_id: FactId):
    """Pin a fact: it never cools. Host only."""
    return _set_fact_pinned(request, fact_id, pinned=True)


@router.delete(
    "/facts/{fact_id}/pin",
    response={200: FactOut, **WRITE_ERRORS},
    operation_id="fact_unpin",
    summary="Unpin a fact",
    tags=["facts"],
)
def fact_unpin(request: HttpRequest, fact_id: FactId):
    """Unpin a fact: it cools again when unused. Host only."""
    return _set_fact_pinned(request, fact_id, pinned=False)


def _set_fact_pinned(request: HttpRequest, fact_id: int, *, pinned: bool) -> Fact:
    room = _writable(request, _fact_room(fact_id))
    change = fact_services.fact_pin if pinned else fact_services.fact_unpin
    try:
        return change(fact=_fact(room, request, fact_id), actor=request.auth).fact
    except person.MemoryRefused as exc:
        raise _fact_refused(exc) from exc
