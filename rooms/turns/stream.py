"""A reply from the provider into its variant, and its tokens to the room as they arrive."""

from __future__ import annotations

import asyncio
import logging
import time

from channels.db import database_sync_to_async
from django.utils import timezone

from orbchat.connections import gateway
from rooms import events, memory_port, services
from rooms.models import Variant
from rooms.prompting import TurnPlan
from rooms.turns import stop

# What every member hears when a reply fails; the host alone hears the provider's reason.
REPLY_FAILED = "The reply failed."
STREAM_CUT = (
    "The provider's stream was cut off before the reply finished; what arrived is kept. "
    "Retry to write it again."
)

log = logging.getLogger(__name__)

SAVE_EVERY = 0.5  # seconds between saves of a growing reply
PROVIDER_TIMEOUT = 120.0  # seconds without an answer before a turn is called failed
# litellm prepares and sends a request in a few milliseconds; the provider may take seconds to
# answer it. What waits for the request to be out (the recall log, held events) waits this long at most.
REQUEST_GRACE = 0.02

running: set[asyncio.Task] = set()  # the turns' tasks: the loop holds tasks only weakly


def keep(task: asyncio.Task) -> asyncio.Task:
    """Hold a reference to the task until it is done (the loop holds tasks only weakly)."""
    running.add(task)
    task.add_done_callback(running.discard)
    return task


class TokenSender:
    """Send tokens to the room's tabs without ever falling behind the provider.

    A token goes out at once when nothing is in flight; tokens that arrive while a send is
    in flight go out together in the next one. With many tabs a send costs more than the gap
    between tokens, and this keeps the delay at about one send instead of a growing queue.
    """

    def __init__(self, variant: Variant) -> None:
        self.room_id = variant.room_id
        self.message_id = variant.message_id
        self.variant_id = variant.pk
        self.pending: list[str] = []
        self.wake = asyncio.Event()
        self.closing = False
        self.task = asyncio.create_task(self._run())

    def add(self, delta: str) -> None:
        self.pending.append(delta)
        self.wake.set()

    async def _run(self) -> None:
        while True:
            await self.wake.wait()
            self.wake.clear()
            if self.pending:
                delta, self.pending = "".join(self.pending), []
                await events.ato_tokens(
                    self.room_id,
                    {
                        "type": "room.token",
                        "message": self.message_id,
                        "variant": self.variant_id,
                        "delta": delta,
                    },
                )
            if self.closing and not self.pending:
                return

    async def close(self) -> None:
        """Send what is left, then stop."""
        self.closing = True
        self.wake.set()
        await self.task


async def notice(room_id: int, text: str, *, retry: bool = False) -> None:
    await events.ato_room(room_id, {"type": "room.notice", "text": text, "retry": retry})


async def reply_failed(
    room_id: int, host_id: int, error: str, *, cut: bool = False, retry: bool = True
) -> None:
    """Tell the room a reply failed (or was cut off mid-way); only the host hears the provider's why.

    Retry is offered only when trying again can help (not for a refused key or an unknown model).
    """
    await notice(room_id, STREAM_CUT if cut else REPLY_FAILED, retry=retry or cut)
    if error != STREAM_CUT:
        await events.ato_user(host_id, {"type": "user.notice", "text": f"{REPLY_FAILED} {error}"})


def _recalled(variant: Variant, plan: TurnPlan) -> None:
    """Log the reply's recall and show its detail to the host alone (the room has its count)."""
    outcome = plan.recall
    memory_port.log(room_id=variant.room_id, variant_id=variant.pk, speaker=plan.speaker, outcome=outcome)
    events.recall_detail(plan.host_id, variant.room_id, outcome.detail())
    for text in outcome.notices:
        events.user_notice(plan.host_id, text)


class _RecallLog:
    """Log the turn's recall once the provider has the request (or REQUEST_GRACE has passed)."""

    def __init__(self, variant: Variant, plan: TurnPlan) -> None:
        self.variant, self.plan = variant, plan
        self.task: asyncio.Task | None = None
        self.started = plan.recall is None or plan.recall.state == "off"  # nothing to log

    def __call__(self) -> None:
        if not self.started:
            self.started = True
            self.task = keep(asyncio.create_task(self._log()))

    async def _log(self) -> None:
        try:
            await database_sync_to_async(_recalled)(self.variant, self.plan)
        except Exception:  # a lost log line must not touch the reply
            log.exception("room %s: could not log the recall", self.variant.room_id)


class Reply:
    """One reply streaming from the provider into its variant, started when made.

    `sent()` returns once the provider has the request (or REQUEST_GRACE has passed): preparing
    it is the last step of the turn's overhead, which room events wait for (`events.held`).
    `finished()` returns the state the reply ended in (done, stopped or error).
    """

    def __init__(self, variant: Variant, plan: TurnPlan) -> None:
        self.variant, self.plan = variant, plan
        self.requested = asyncio.get_running_loop().create_future()
        self.task = keep(asyncio.create_task(self._stream()))

    async def sent(self) -> None:
        try:
            await asyncio.wait([self.requested, self.task], return_when=asyncio.FIRST_COMPLETED)
        except asyncio.CancelledError:
            self.task.cancel()
            raise

    async def finished(self) -> str:
        return await self.task

    async def _stream(self) -> str:
        """Stream the reply from the provider into the variant; finish it whatever happens."""
        variant, plan = self.variant, self.plan
        room_id = variant.room_id
        sender = TokenSender(variant)
        text = variant.text  # "continue" appends to what is there
        state, finish_reason, error = Variant.State.DONE, "", ""
        retry = True
        usage = {}
        first_token_at = None
        last_save = last_poll = time.monotonic()
        started = time.time()
        recall_log = _RecallLog(variant, plan)

        def request_out() -> None:
            recall_log()
            if not self.requested.done():
                self.requested.set_result(None)

        grace = asyncio.get_running_loop().call_later(REQUEST_GRACE, request_out)
        try:
            try:
                if plan.text_prompt is not None:
                    response = await gateway.atext_stream(
                        plan.target, plan.text_prompt, timeout=PROVIDER_TIMEOUT, **plan.params
                    )
                else:
                    response = await gateway.astream(
                        plan.target,
                        plan.prompt.messages,
                        timeout=PROVIDER_TIMEOUT,
                        stable=plan.prompt.stable_messages,
                        **plan.params,
                    )
            finally:
                grace.cancel()
                request_out()
            async for chunk in response:
                if getattr(chunk, "usage", None):
                    usage = {"prompt": chunk.usage.prompt_tokens, "completion": chunk.usage.completion_tokens}
                if not chunk.choices:
                    continue
                choice = chunk.choices[0]
                delta = (choice.text if plan.text_prompt is not None else choice.delta.content) or ""
                if choice.finish_reason:
                    finish_reason = choice.finish_reason
                if delta:
                    if first_token_at is None:
                        first_token_at = timezone.now()
                    text += delta
                    sender.add(delta)
                now = time.monotonic()
                if now - last_poll >= stop.STOP_POLL:
                    last_poll = now
                    if await stop.requested(room_id, started):
                        state, finish_reason = Variant.State.STOPPED, "stopped"
                        break
                if now - last_save >= SAVE_EVERY:
                    last_save = now
                    await database_sync_to_async(services.turn_progress)(variant_id=variant.pk, text=text)
            if state == Variant.State.DONE and not finish_reason:
                # The stream ended without saying why: the connection was cut.
                state, error = Variant.State.ERROR, STREAM_CUT
        except asyncio.CancelledError:
            state, finish_reason = Variant.State.STOPPED, "cancelled"
            raise
        except Exception as exc:  # noqa: BLE001 - every provider failure becomes a notice, never a lost message
            failure = gateway.explain(exc)
            # Once tokens have arrived, a failure is the stream being cut, whatever litellm calls it.
            state, error, retry = (
                Variant.State.ERROR,
                STREAM_CUT if first_token_at else failure.text,
                failure.retry,
            )
            log.info("turn in room %s failed: %s", room_id, gateway.mask(str(exc)))
        finally:
            await sender.close()
            if recall_log.task is not None:
                # The log points at the variant, which a failed reply removes: it goes first.
                await asyncio.gather(recall_log.task, return_exceptions=True)
            await database_sync_to_async(services.turn_finish)(
                variant_id=variant.pk,
                text=text,
                state=state,
                finish_reason=finish_reason,
                error=error,
                prompt_tokens=usage.get("prompt"),
                completion_tokens=usage.get("completion"),
                first_token_at=first_token_at,
            )
            if error:
                await reply_failed(room_id, plan.host_id, error, cut=first_token_at is not None, retry=retry)
        return state
