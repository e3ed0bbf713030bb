"""The query's vector: which text it is made from, and the key it is cached under.

A hybrid query naming an entity common in scope (a speaker's name on every turn they
spoke) gets a vector mostly of its text with that name masked (``embedded_text``: the
``recall_names`` statement names them, ``entities.masked`` masks them; the text and
entity legs keep the name) and weighs the cosine by ``w_vector_masked`` (the words left
carry the question). ``query_vector`` mixes the two vectors in one model call.
``prepared`` is the statement's parameters with the cache key and model of the vector.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from stash_pipeline.embedding.cache import query_key
from stash_pipeline.recall import entities
from stash_pipeline.recall.config import RecallConfig
from stash_pipeline.recall.parameters import statement_parameters
from stash_pipeline.recall.request import RecallRequest
from stash_pipeline.store import Store


def prepared(store: Store, request: RecallRequest) -> tuple[dict[str, Any], str]:
    """The statement's parameters for ``request`` and the text its vector is made from."""
    embedder = store.embedder
    paths = list(request.paths)
    params = statement_parameters(request) | {"embedding_model": embedder.name, "embedding_endpoint": embedder.endpoint}
    text = request.query
    masked = embedded_text(store, text, paths, params, request.config) if request.hybrid else text
    if masked != text:
        params["w_vector"] = request.config.w_vector_masked
    params["text_hash"] = query_key(text, paths, masked=masked)
    return params, masked


def embedded_text(store: Store, text: str, paths: list[str], params: dict[str, Any], config: RecallConfig) -> str:
    """A hybrid query with the names common in scope masked (``recall_names``,
    ``entities.masked``), looked up in a short round trip unless this process did so
    within ``cache.MASKED_FOR`` seconds; the query itself when it names none."""
    if not (config.mask_names and params["phrases"]):
        return text
    asked = query_key(text, paths)
    masked = store.embedder.embedded_as(asked)
    if masked is None:
        (named,) = store.db.pipelined(("recall_names", params), prepare=True)
        masked = entities.masked(text, [r["normalised"] for r in named], config)
        store.embedder.note_embedded_as(asked, masked)
    return masked


def query_vector(embedder: Any, text: str, masked: str, config: RecallConfig) -> Any:
    """The vector of ``text``; of a query with names masked, ``mask_weight`` times the masked
    text's vector plus the rest times the query's own, renormalised (one model call): the
    model matches a name to every turn its speaker said, so it counts for less."""
    if masked == text:
        return embedder.compute({"q": text})["q"]
    vectors = embedder.compute({"m": masked, "q": text})
    mixed = config.mask_weight * vectors["m"] + (1 - config.mask_weight) * vectors["q"]
    return (mixed / np.linalg.norm(mixed)).astype(np.float32)
