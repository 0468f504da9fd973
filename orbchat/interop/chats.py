"""SillyTavern chat files (JSONL) to and from OrbChat's normalized chat, and a plain-text transcript.

Line 1 of a chat file is a header (who is talking, when the chat began, `chat_metadata`); every further
line is one message. Group chats may have no header. A line that cannot be read is reported in
`ChatFile.problems` by its number and skipped, so one bad line never costs the rest of the chat.
"""

from __future__ import annotations

import json
import math
import re
from dataclasses import dataclass, field
from datetime import UTC, datetime, timedelta, tzinfo
from typing import Any

from orbchat.interop.errors import MAX_BYTES, MAX_DEPTH, InteropError, check_size, too_deep

HEADER_KEYS = ("user_name", "character_name", "create_date", "chat_metadata")
MESSAGE_KEYS = frozenset(
    {"name", "is_user", "is_system", "send_date", "mes", "swipes", "swipe_id", "swipe_info", "extra"}
)
MONTH_NAMES = "january february march april may june july august september october november december"
MONTHS = {
    name: number for number, full in enumerate(MONTH_NAMES.split(), start=1) for name in (full, full[:3])
} | {"sept": 9}
# SillyTavern's humanized dates: "June 19, 2023 2:20pm", "Jun 19, 2023 2:20 PM".
HUMAN_DATE = re.compile(
    r"([a-z]+)\.?\s+(\d{1,2}),?\s+(\d{4}),?\s+(\d{1,2}):(\d{2})(?::(\d{2}))?\s*(?:([ap])\.?\s*m\.?)?",
    re.IGNORECASE,
)
# SillyTavern's file-name style dates: "2024-7-12@01h31m37s", "2024-6-5 @14h 56m 50s 682ms".
AT_DATE = re.compile(
    r"(\d{4})-(\d{1,2})-(\d{1,2})\s*@\s*(\d{1,2})h\s*(\d{1,2})m\s*(\d{1,2})s(?:\s*(\d{1,3})ms)?",
    re.IGNORECASE,
)
# SillyTavern's author's-note roles (`note_role`), by number.
NOTE_ROLES = ("system", "user", "assistant")
NOTE_DEPTH = 4
NOTE_DEPTH_MAX = 999  # SillyTavern's author's-note depth field allows 0–999
NUMBER = re.compile(r"-?\d+(?:\.\d+)?")
EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


@dataclass
class ChatMessage:
    name: str
    is_user: bool
    hidden: bool = False
    send_date: datetime | None = None
    swipes: list[str] = field(default_factory=list)
    swipe_id: int = 0
    swipe_info: list[dict] = field(default_factory=list)
    extra: dict = field(default_factory=dict)
    other: dict = field(default_factory=dict)

    @property
    def is_narrator(self) -> bool:
        """Return whether SillyTavern's narrator (`/sys`) wrote the message, not a character."""
        return not self.is_user and self.extra.get("type") == "narrator"

    @property
    def mes(self) -> str:
        """Return the shown text: the swipe at swipe_id."""
        swipes, swipe_id = _shown(self.swipes, self.swipe_id)
        return swipes[swipe_id]


@dataclass
class ChatFile:
    user_name: str
    character_name: str
    create_date: str = ""
    chat_metadata: dict = field(default_factory=dict)
    header_other: dict = field(default_factory=dict)
    messages: list[ChatMessage] = field(default_factory=list)
    problems: list[str] = field(default_factory=list)


def _text(value: Any) -> str:
    if isinstance(value, str):
        return value
    if isinstance(value, int | float) and not isinstance(value, bool):
        return str(value)
    return ""


def _bool(value: Any) -> bool:
    if isinstance(value, str):
        return value.strip().lower() in ("true", "1", "yes", "on")
    return bool(value) if isinstance(value, bool | int | float) else False


def _int(value: Any, default: int) -> int:
    if isinstance(value, bool):
        return int(value)
    if isinstance(value, int):
        return value
    if isinstance(value, float):
        return int(value) if math.isfinite(value) else default
    if isinstance(value, str) and NUMBER.fullmatch(value.strip()):
        try:
            return int(float(value.strip()))
        except (ValueError, OverflowError):
            return default
    return default


@dataclass(frozen=True)
class AuthorsNote:
    text: str = ""
    depth: int = NOTE_DEPTH
    role: str = NOTE_ROLES[0]


def authors_note(metadata: dict) -> AuthorsNote:
    """Return the author's note a chat's `chat_metadata` holds (SillyTavern's defaults when missing)."""
    role = _int(metadata.get("note_role"), 0)
    return AuthorsNote(
        text=_text(metadata.get("note_prompt")),
        depth=min(max(_int(metadata.get("note_depth"), NOTE_DEPTH), 0), NOTE_DEPTH_MAX),
        role=NOTE_ROLES[role] if 0 <= role < len(NOTE_ROLES) else NOTE_ROLES[0],
    )


def with_authors_note(metadata: dict, note: AuthorsNote) -> dict:
    """Return `chat_metadata` holding `note`; a key that already means the same is left as it is."""
    out = dict(metadata)
    was = authors_note(metadata)
    if note.text != was.text or (note.text and "note_prompt" not in out):
        out["note_prompt"] = note.text
    if note.depth != was.depth:
        out["note_depth"] = note.depth
    if note.role != was.role:
        out["note_role"] = NOTE_ROLES.index(note.role) if note.role in NOTE_ROLES else 0
    return out


def _to_utc(moment: datetime, zone: tzinfo = UTC) -> datetime:
    """Return the moment in UTC (a naive one is read in `zone`), cut to whole milliseconds."""
    moment = (moment.replace(tzinfo=zone) if moment.tzinfo is None else moment).astimezone(UTC)
    # SillyTavern keeps milliseconds; cutting here makes an export and re-import give the same moment.
    return moment.replace(microsecond=moment.microsecond // 1000 * 1000)


def _human_date(match: re.Match) -> datetime | None:
    month_name, day, year, hour, minute, second, meridiem = match.groups()
    month = MONTHS.get(month_name.lower())
    if month is None:
        return None
    hour_number = int(hour)
    if meridiem:
        if not 1 <= hour_number <= 12:
            return None
        hour_number = hour_number % 12 + (12 if meridiem.lower() == "p" else 0)
    return datetime(int(year), month, int(day), hour_number, int(minute), int(second or 0))


def _at_date(match: re.Match) -> datetime:
    year, month, day, hour, minute, second, millis = (int(part or 0) for part in match.groups())
    return datetime(year, month, day, hour, minute, second, millis * 1000)


def parse_send_date(value: Any, zone: tzinfo = UTC) -> datetime | None:
    """Return a message's send_date as an aware UTC datetime, or None when it is not a date we know.

    SillyTavern writes its humanized and file-name style dates, and ISO dates without an offset,
    in the local time of the machine it runs on: such a date is read in `zone`. Unix times and ISO
    dates with an offset are absolute.
    """
    try:
        if isinstance(value, int | float) and not isinstance(value, bool):
            return _to_utc(EPOCH + timedelta(milliseconds=value)) if math.isfinite(value) else None
        if not isinstance(value, str):
            return None
        text = value.strip()
        if NUMBER.fullmatch(text):
            return _to_utc(EPOCH + timedelta(milliseconds=float(text)))
        if match := HUMAN_DATE.fullmatch(text):
            moment = _human_date(match)
            return _to_utc(moment, zone) if moment else None
        if match := AT_DATE.fullmatch(text):
            return _to_utc(_at_date(match), zone)
        return _to_utc(datetime.fromisoformat(text), zone)
    except (ValueError, OverflowError, OSError):
        return None


def format_send_date(moment: datetime | None) -> str:
    """Return the date as SillyTavern writes new ones ("2024-07-12T01:31:37.000Z"); "" for None."""
    if moment is None:
        return ""
    moment = _to_utc(moment)
    return (
        f"{moment.year:04d}-{moment.month:02d}-{moment.day:02d}T"
        f"{moment.hour:02d}:{moment.minute:02d}:{moment.second:02d}.{moment.microsecond // 1000:03d}Z"
    )


def _shown(swipes: list[str], swipe_id: int) -> tuple[list[str], int]:
    """Return swipes (never empty) and swipe_id clamped into them."""
    swipes = list(swipes) or [""]
    return swipes, min(max(swipe_id, 0), len(swipes) - 1)


def _swipe_info(value: Any, count: int) -> list[dict]:
    """Return one info object per swipe: dicts kept as they are, {} for anything else or missing."""
    items = value[:count] if isinstance(value, list) else []
    infos = [item if isinstance(item, dict) else {} for item in items]
    return infos + [{} for _ in range(count - len(infos))]


def _message(raw: dict, zone: tzinfo) -> ChatMessage | None:
    """Return the message of one chat line, or None when it has neither `mes` nor `swipes`."""
    has_mes = isinstance(raw.get("mes"), str | int | float) and not isinstance(raw.get("mes"), bool)
    raw_swipes = raw.get("swipes")
    swipes = [_text(swipe) for swipe in raw_swipes] if isinstance(raw_swipes, list) else []
    if not has_mes and not swipes:
        return None
    if not swipes:
        swipes = [_text(raw["mes"])]
    swipes, swipe_id = _shown(swipes, _int(raw.get("swipe_id"), 0))
    if has_mes:
        # SillyTavern shows `mes`; a stale or out-of-range swipe must not replace what the user saw.
        swipes[swipe_id] = _text(raw["mes"])
    return ChatMessage(
        name=_text(raw.get("name")),
        is_user=_bool(raw.get("is_user")),
        hidden=_bool(raw.get("is_system")),
        send_date=parse_send_date(raw.get("send_date"), zone),
        swipes=swipes,
        swipe_id=swipe_id,
        swipe_info=_swipe_info(raw.get("swipe_info"), len(swipes)),
        extra=raw["extra"] if isinstance(raw.get("extra"), dict) else {},
        other={key: value for key, value in raw.items() if key not in MESSAGE_KEYS},
    )


def _is_header(obj: dict) -> bool:
    return "mes" not in obj and any(key in obj for key in ("user_name", "character_name", "chat_metadata"))


def _decode(data: bytes | str, max_bytes: int) -> str:
    check_size(data, max_bytes)
    if isinstance(data, bytes | bytearray):
        try:
            return bytes(data).decode("utf-8-sig")
        except UnicodeDecodeError as exc:
            raise InteropError("the chat file is not UTF-8 text") from exc
    if not isinstance(data, str):
        raise InteropError("the chat file is not text")
    return data.removeprefix("\ufeff")


def _load_line(line: str) -> tuple[Any, str | None]:
    """Return (object, None) for a readable line, or (None, why not)."""
    try:
        obj = json.loads(line)
    except json.JSONDecodeError as exc:
        return None, f"not valid JSON ({exc.msg} at column {exc.colno})"
    except RecursionError:
        return None, "its JSON is nested too deeply"
    if too_deep(obj):
        return None, f"its JSON is nested too deeply (more than {MAX_DEPTH} levels)"
    if not isinstance(obj, dict):
        kind = "an array" if isinstance(obj, list) else "a single value"
        return None, f"not a JSON object (it is {kind})"
    return obj, None


def parse_chat_jsonl(data: bytes | str, *, max_bytes: int = MAX_BYTES, zone: tzinfo = UTC) -> ChatFile:
    """Return the normalized chat of a SillyTavern JSONL chat file, bad lines listed in `problems`.

    Dates without a time zone are read in `zone` (see parse_send_date).
    """
    text = _decode(data, max_bytes)
    header: dict | None = None
    messages: list[ChatMessage] = []
    problems: list[str] = []
    first = True
    # Split on "\n" only: str.splitlines would also break at U+2028 and the like, which JSON strings
    # may hold unescaped.
    for number, line in enumerate(text.split("\n"), start=1):
        line = line.strip()
        if not line:
            continue
        obj, problem = _load_line(line)
        is_first, first = first, False
        if problem:
            problems.append(f"line {number}: {problem}")
            continue
        if is_first and _is_header(obj):
            header = obj
            continue
        message = _message(obj, zone)
        if message is None:
            problems.append(f"line {number}: a message needs 'mes' or 'swipes'")
            continue
        messages.append(message)
    if header is None and not messages:
        raise InteropError("no messages: the file has no valid chat lines")
    header = header or {}
    user_name = _text(header.get("user_name")) or next(
        (message.name for message in messages if message.is_user and message.name), ""
    )
    character_name = _text(header.get("character_name")) or next(
        (message.name for message in messages if not message.is_user and not message.hidden and message.name),
        next((message.name for message in messages if not message.is_user and message.name), ""),
    )
    return ChatFile(
        user_name=user_name,
        character_name=character_name,
        create_date=_text(header.get("create_date")),
        chat_metadata=header["chat_metadata"] if isinstance(header.get("chat_metadata"), dict) else {},
        header_other={key: value for key, value in header.items() if key not in HEADER_KEYS},
        messages=messages,
        problems=problems,
    )


def _json_line(obj: dict) -> str:
    line = json.dumps(obj, ensure_ascii=False, separators=(",", ":"))
    try:
        line.encode("utf-8")
    except UnicodeEncodeError:
        # A lone surrogate (from a "\ud800" escape) cannot be UTF-8; escaped, it still round-trips.
        line = json.dumps(obj, ensure_ascii=True, separators=(",", ":"))
    return line


def export_chat_jsonl(chat: ChatFile) -> bytes:
    """Return the chat as a SillyTavern JSONL chat file (header line, then one line per message)."""
    header: dict[str, Any] = {
        "user_name": chat.user_name,
        "character_name": chat.character_name,
        "create_date": chat.create_date,
        "chat_metadata": chat.chat_metadata,
    }
    for key, value in chat.header_other.items():
        header.setdefault(key, value)
    lines = [_json_line(header)]
    for message in chat.messages:
        swipes, swipe_id = _shown(message.swipes, message.swipe_id)
        out: dict[str, Any] = {
            "name": message.name,
            "is_user": message.is_user,
            "is_system": message.hidden,
            "send_date": format_send_date(message.send_date),
            "mes": swipes[swipe_id],
            "swipes": swipes,
            "swipe_id": swipe_id,
            "swipe_info": _swipe_info(message.swipe_info, len(swipes)),
            "extra": message.extra,
        }
        for key, value in message.other.items():
            out.setdefault(key, value)
        lines.append(_json_line(out))
    return ("\n".join(lines) + "\n").encode("utf-8")


def _readable_date(moment: datetime) -> str:
    moment = _to_utc(moment)
    return f"{moment.year:04d}-{moment.month:02d}-{moment.day:02d} {moment.hour:02d}:{moment.minute:02d} UTC"


def export_chat_text(chat: ChatFile) -> str:
    """Return a plain transcript: one "[date] Name: text" block per message, blank lines between."""
    blocks = []
    for message in chat.messages:
        date = f"[{_readable_date(message.send_date)}] " if message.send_date else ""
        hidden = " (hidden)" if message.hidden else ""
        name = message.name or (chat.user_name if message.is_user else chat.character_name)
        blocks.append(f"{date}{name}{hidden}: {message.mes}")
    return "\n\n".join(blocks) + "\n" if blocks else ""
