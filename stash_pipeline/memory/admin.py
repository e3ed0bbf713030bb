"""Admin reads: row counts of a namespace tree (``stash stats`` / the MCP ``stats`` tool).

Counts follow the memory semantics: episodes exclude forgotten ones (counted apart),
facts split into current and retired (superseded, expired, withdrawn), derived rows
count only while not withdrawn, and model calls include those without a namespace when
the whole store ('/') is asked for.

``stats`` takes the parsed namespace paths (``validate``'s module docstring says which
layer checks what) and returns the model the operation publishes.
"""

from __future__ import annotations

from collections.abc import Sequence

from stash_pipeline.memory import validate
from stash_pipeline.memory.scope import read_scope
from stash_pipeline.models import StoreStats
from stash_pipeline.store import Store


def stats(store: Store, namespaces: Sequence[str] = ("/",)) -> StoreStats:
    """Counts of everything stored in the given trees (default: all)."""
    with store.db.transaction() as tx:
        all_ns, ids = read_scope(tx, list(namespaces))
        row = tx.one("admin_stats", all_namespaces=all_ns, namespace_ids=ids)
    assert row is not None
    out = {k: (int(v) if isinstance(v, int) else v) for k, v in row.items()}
    out["hypotheses"] = {s: int(row["hypotheses"].get(s, 0)) for s in validate.HYPOTHESIS_STATUSES}
    out["goals"] = {s: int(row["goals"].get(s, 0)) for s in validate.GOAL_STATUSES}
    out["facts"] = {"current": out.pop("facts_current"), "retired": out.pop("facts_retired")}
    out["dead_letters"] = {"pending": out.pop("dead_letters_pending"), "dead": out.pop("dead_letters_dead")}
    out["tokens"] = {"prompt": int(out.pop("prompt_tokens")), "completion": int(out.pop("completion_tokens"))}
    return StoreStats.model_validate(out)
