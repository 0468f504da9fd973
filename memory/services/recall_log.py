"""Writes of the recall log: what recall did for one reply."""

from __future__ import annotations

from django.db.models import Q
from django.utils import timezone

from memory import facts
from memory.models import RecallLog, Summary
from memory.recall.recaller import Outcome
from memory.services.facts import facts_warm


def log_save(*, room_id: int, variant_id: int | None, speaker: str, outcome: Outcome) -> RecallLog:
    """Keep what recall did for one reply (the host reads it; members only ever see the count),
    and stamp the memories it sent as last recalled now; the facts it sent warm up (one more
    use each). A dry run (the Preview) saves no log, so it warms nothing."""
    keys = [s.item for s in outcome.kept]
    if keys:
        match = Q()
        for item in keys:
            match |= Q(scope=item.scope, tier=item.tier, block=item.block)
        Summary.objects.filter(match, room_id=room_id).update(last_recalled_at=timezone.now())
    if outcome.facts:
        facts_warm(ids=[p.fact.id for p in outcome.facts], amount=facts.WARM_AMOUNT)
    return RecallLog.objects.create(
        room_id=room_id,
        variant_id=variant_id,
        speaker=speaker[:200],
        state=outcome.state,
        mode=outcome.mode,
        count=outcome.count,
        detail=outcome.detail(),
    )
