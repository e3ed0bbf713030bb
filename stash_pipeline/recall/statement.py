"""Running the recall statements: one pipelined round trip, and their preparation per connection.

``round_trip`` pipelines ``recall_search_params``, ``recall_check``
(``recall/queries/recall_before.sql``) and ``recall`` (``recall/queries/recall.sql``) as one
transaction, after the embedding cache's write
when the query's vector was just computed. No vector is sent as a NULL typed as one
(``NULL_VECTOR``): a query seen before and a new one (its vector given) then use the same
prepared statements, planned once per connection.

A statement's first runs on a fresh connection cost more than the later ones: the
backend fills its catalog caches, and the statement is planned anew on each run until it
is prepared (for the recall statement about 40 ms of server CPU for the first recall on a
connection and 20 ms for the next four, against 8 ms once prepared, 100,000 memories).
``prepare_on_connect`` has the pool run the recall statements, prepared, as it opens each
connection, so a request never pays for it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from stash_pipeline import errors
from stash_pipeline.db.gateway import NULL_VECTOR
from stash_pipeline.memory import validate
from stash_pipeline.recall.config import DEFAULT, RecallConfig
from stash_pipeline.recall.parameters import statement_parameters
from stash_pipeline.recall.request import RecallRequest
from stash_pipeline.store import Store


@dataclass(frozen=True, slots=True)
class Found:
    """One round trip's answer: the rows, whether the query's vector was missing, and how
    many live episodes in scope still wait for their vector (invisible to the vector legs)."""

    rows: list[dict[str, Any]]
    needs_vector: bool = False
    pending: int = 0


def round_trip(store: Store, params: dict[str, Any], config: RecallConfig, *, cache: bool = False) -> Found:
    """The recall statements pipelined as one transaction.

    ``cache``: the query's vector was just computed; the same transaction stores it in the
    embedding cache (without waiting for the WAL flush, as every cache write), so the
    next recall of this query finds it.
    """
    writes: list[tuple[str, dict[str, Any]]] = []
    if cache:
        writes = [("embedding_cache_relaxed_commit", {}),
                  ("embedding_cache_insert_many", {
                      "model": params["embedding_model"], "endpoint": params["embedding_endpoint"],
                      "hashes": [params["text_hash"]], "embeddings": [params["embedding"]]})]
    *_, check, rows = store.db.pipelined(*writes, *statements(params, config), prepare=True)
    missing = check[0]["missing"]
    if missing:
        raise errors.NamespaceNotFound(f"namespace {missing[0]!r} not found")
    return Found(rows, bool(check[0]["needs_vector"]), int(check[0]["pending"]))


def statements(params: dict[str, Any], config: RecallConfig) -> list[tuple[str, dict[str, Any]]]:
    """The recall statements with their parameters, in the order they are pipelined."""
    if params.get("embedding") is None:
        params = params | {"embedding": NULL_VECTOR}
    return [("recall_search_params", {"ef_search": str(config.ef_search)}),
            ("recall_check", params),
            ("recall", params)]


def prepare_on_connect(store: Store, config: RecallConfig = DEFAULT) -> None:
    """Have each connection the store's pool opens from now on prepare the recall
    statements; call it before the store's first query.

    psycopg reuses a prepared statement for the same SQL and the same parameter types, so
    the parameters are typed as a recall with ``config`` sends them; a query seen before
    and a new one send the same types (``statements``), so one run prepares both. No leg is
    on, so the run finds nothing and costs its planning.
    """
    idle = RecallRequest("", ("/",), mode="text", context=validate.RECALL_CONTEXT_DEFAULT, config=config)
    params = statement_parameters(idle) | {
        "use_text": False, "text_hash": "", "embedding_model": "", "embedding_endpoint": ""}
    store.db.prepare_on_connect(*statements(params, config))
