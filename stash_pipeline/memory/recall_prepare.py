"""The recall statements prepared on every new pooled connection of a serving process.

A statement's first runs on a fresh connection cost more than the later ones: the
backend fills its catalog caches, and the statement is planned anew on each run until it
is prepared. For the recall statement that is about 40 ms of server CPU for the first
recall on a connection and 20 ms for the next four, against 8 ms once prepared (100,000
memories). ``prepare_on_connect`` has the pool run the recall statements, prepared, as
it opens each connection, so a request never pays for it: about 30 ms of server CPU per
connection (100,000 memories), most of it the catalog caches' fill and the one generic
plan of the recall statement.
"""

from __future__ import annotations

from stash_pipeline.memory import validate
from stash_pipeline.memory.recall import recall_parameters, statements
from stash_pipeline.memory.recall_config import DEFAULT, RecallConfig
from stash_pipeline.store import Store


def prepare_on_connect(store: Store, config: RecallConfig = DEFAULT) -> None:
    """Have each connection the store's pool opens from now on prepare the recall
    statements; call it before the store's first query.

    psycopg reuses a prepared statement for the same SQL and the same parameter types, so
    the parameters are typed as a recall with ``config`` sends them. A query seen before
    (its vector read from the cache) and a new one (its vector given) send the same types
    (``recall.statements``: no vector is a NULL typed as one), so one run prepares both.
    No leg is on, so the run finds nothing and costs its planning.
    """
    params = recall_parameters("", ["/"], None, limit=validate.RECALL_LIMIT_DEFAULT, as_of=None, known_at=None,
                               include_history=False, use_vector=False, use_text=False,
                               context=validate.RECALL_CONTEXT_DEFAULT, config=config) | {
        "text_hash": "", "embedding_model": "", "embedding_endpoint": ""}
    store.db.prepare_on_connect(*statements(params, config))
