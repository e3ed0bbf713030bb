"""The stats operation: counts of everything in the namespace trees.

The library side is ``stash_pipeline.memory.admin`` (imported inside the call, so the
declaration loads without the database layer). The other admin commands (doctor,
config, tokens, reembed…) have no tool and stay written by hand in
``stash_serve/cli/admin.py``.
"""

from __future__ import annotations

from typing import Any

from stash_pipeline.models import StoreStats
from stash_pipeline.operations.base import Arguments, CliView, Operation
from stash_pipeline.operations.fields import Namespaces


class Stats(Arguments):
    namespaces: Namespaces = None


def _stats(store: Any, a: Stats, namespaces: list[str]) -> StoreStats:
    from stash_pipeline.memory import admin

    return admin.stats(store, namespaces)


STATS = Operation(
    name="stats",
    description="Counts of each kind of record (episodes, facts, goals…) in the namespace trees.",
    arguments=Stats,
    call=_stats,
    right="read",
    reach="trees",
    effect="read",
    result=StoreStats,
    cli=CliView(
        path=("stats",),
        summary="Count namespaces, episodes, facts and the rest in a namespace tree.",
        example="stash stats -n /projects",
    ),
)

OPERATIONS = (STATS,)
