"""A purge and a derivation at the same time: whichever commits first, nothing derived
from the erased record survives it."""

from __future__ import annotations

import threading
import time
from typing import Any

import pytest

from stash_pipeline import errors
from stash_pipeline.memory import episodes, erasure, facts, namespaces

NS = "/race"


def _derive(tx: Any, store: Any, episode_id: int) -> int:
    """What a stage's batch does: a fact with its source episode as lineage parent."""
    nsid = namespaces.resolve_id(tx, NS)
    row = facts.insert_fact(tx, store, namespace_id=nsid, content="Rosa keeps the vault codes in a red notebook",
                            origin="synthesis", confidence=0.8, parents=[("episode", episode_id)])
    return int(row["id"])


def _exists(store: Any, table: str, ident: int) -> bool:
    with store.db.connection() as conn:
        found = conn.execute(f"SELECT 1 FROM {table} WHERE id = %s", (ident,)).fetchone()
        conn.commit()
    return found is not None


@pytest.fixture
def episode(store: Any) -> int:
    namespaces.create(store, NS)
    return int(episodes.remember(store, NS, "Rosa keeps the vault codes in a red notebook").id)


def test_a_purge_waits_for_a_derivation_in_flight_and_erases_it_too(store: Any, episode: int) -> None:
    derived: list[int] = []
    written, release = threading.Event(), threading.Event()

    def batch() -> None:
        with store.db.transaction() as tx:
            derived.append(_derive(tx, store, episode))
            written.set()
            release.wait(10)

    worker = threading.Thread(target=batch)
    worker.start()
    assert written.wait(10)
    purged: list[dict[str, Any]] = []
    purge = threading.Thread(target=lambda: purged.append(episodes.purge(store, episode)))
    purge.start()
    time.sleep(0.5)
    assert purge.is_alive(), "the purge must wait for the derivation's transaction"
    release.set()
    worker.join(10)
    purge.join(10)
    assert purged and purged[0].erased.erased_fact_ids == derived
    assert not _exists(store, "facts", derived[0]) and not _exists(store, "episodes", episode)


def test_a_derivation_after_a_purge_in_flight_is_refused(store: Any, episode: int) -> None:
    erased, release = threading.Event(), threading.Event()

    def purge() -> None:
        with store.db.transaction() as tx:
            erasure.erase(tx, store, [("episode", episode)])
            erased.set()
            release.wait(10)

    worker = threading.Thread(target=purge)
    worker.start()
    assert erased.wait(10)
    outcome: list[BaseException] = []

    def batch() -> None:
        try:
            with store.db.transaction() as tx:
                _derive(tx, store, episode)
        except BaseException as exc:
            outcome.append(exc)

    deriving = threading.Thread(target=batch)
    deriving.start()
    time.sleep(0.5)
    assert deriving.is_alive(), "the derivation must wait for the purge's transaction"
    release.set()
    worker.join(10)
    deriving.join(10)
    assert outcome and isinstance(outcome[0], errors.Conflict), outcome
    with store.db.connection() as conn:
        assert conn.execute("SELECT count(*) AS n FROM facts").fetchone()["n"] == 0
        conn.commit()
