"""What a consolidation run would do now, without doing it (``stash consolidate run --dry-run``).

``plan(store, namespaces, stages)`` lists, per namespace of the trees and stage in run
order: how many items wait (the stage's backlog after its cursor plus dead letters
queued for a retry), how many items one model call takes (the stage's ``items_per_call`` in ``STAGES``),
and the model calls that
makes. It reads ``runner.status`` only: no model call, no write, no checkpoint.

The call count is an estimate from the backlog and the batch sizes: for the facts stage
it is an upper bound (it counts every episode as its own cluster; related episodes share
one), and neither the contradiction checks a new fact may need nor retries of invalid
answers are counted.
"""

from __future__ import annotations

import math
from collections.abc import Iterable
from typing import Any

from stash_pipeline.consolidation import runner
from stash_pipeline.stages import get_stage
from stash_pipeline.store import Store


def plan(store: Store, namespaces: Any = "/", stages: Iterable[str] | None = None) -> list[dict[str, Any]]:
    """Per (namespace, stage) of the trees: action, items, items_per_call, model_calls.

    ``action`` is ``run`` (there is work, or the stage needs no model and always runs),
    ``idle`` (nothing new) or ``not_configured`` (a model stage with work but no reasoner
    configured: the run would skip it).
    """
    wanted = None if stages is None else {get_stage(name).name for name in stages}
    settings = store.settings
    rows = []
    for status in runner.status(store, namespaces):
        stage = status["stage"]
        if wanted is not None and stage not in wanted:
            continue
        retries = int(status["dead_letters_pending"])
        items = (int(status["backlog"]) if status["has_work"] else 0) + retries
        per_call = get_stage(stage).per_call(settings)  # the table's items_per_call
        if per_call is None:
            action = "run"  # a stage without a model (decay) runs every time, whatever the backlog
        elif items == 0:
            action = "idle"
        elif per_call is not None and not settings.reasoner_configured:
            action = "not_configured"
        else:
            action = "run"
        rows.append(
            {
                "namespace": status["namespace"],
                "stage": stage,
                "action": action,
                "items": items,
                "retries": retries,
                "items_per_call": per_call,
                "model_calls": math.ceil(items / per_call) if per_call and action == "run" else 0,
            }
        )
    return rows


__all__ = ["plan"]
