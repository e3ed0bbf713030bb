"""Reads for people looking at memory (the console): overviews the tools do not offer.

Each takes the caller's trees as parsed paths (``scope.read`` resolved them: a token's
trees, or the ones asked for inside them) and reads only inside them; a path naming no
namespace is ``NamespaceNotFound``, as for every read.
"""

from __future__ import annotations

from collections.abc import Sequence

from stash_pipeline.memory.scope import read_scope
from stash_pipeline.models import NamespaceOverview
from stash_pipeline.store import Store

#: the most namespaces one overview lists
NAMESPACES_MAX = 500


def namespaces(store: Store, paths: Sequence[str]) -> list[NamespaceOverview]:
    """The namespaces of the trees ``paths``, by path, each with its counts and last write."""
    with store.db.transaction() as tx:
        all_namespaces, ids = read_scope(tx, list(paths))
        rows = tx.all("browse_namespaces", all_namespaces=all_namespaces, ids=ids, limit=NAMESPACES_MAX)
    return [NamespaceOverview.from_row(r) for r in rows]
