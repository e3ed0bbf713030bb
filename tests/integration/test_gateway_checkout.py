"""The pool's checkout: a live idle connection is handed out without a probe round trip;
one the server closed is found, swept and replaced before the caller sees it."""

from __future__ import annotations

import time

import psycopg
from psycopg_pool import ConnectionPool


def _probes(monkeypatch) -> list[object]:
    """Record each liveness probe (an empty query, one round trip) the gateway makes."""
    calls: list[object] = []
    probe = ConnectionPool.check_connection

    def counted(conn: object) -> None:
        calls.append(conn)
        probe(conn)

    monkeypatch.setattr(ConnectionPool, "check_connection", staticmethod(counted))
    return calls


def test_a_live_idle_connection_is_handed_out_without_a_probe(store, monkeypatch):
    assert store.db.scalar("recall_search_params", ef_search="40") == "40"  # the pool holds a connection
    probes = _probes(monkeypatch)
    for _ in range(3):
        assert store.db.scalar("recall_search_params", ef_search="40") == "40"
    assert probes == []


def test_connections_the_server_closed_are_replaced_on_checkout(store, monkeypatch):
    with store.db.connection() as conn:  # the pool's idle connection(s)
        database = conn.info.dbname
    with psycopg.connect(store.db.dsn, autocommit=True) as admin:
        pids = [r[0] for r in admin.execute(
            "SELECT pid FROM pg_stat_activity WHERE datname = %s AND pid <> pg_backend_pid()", (database,))]
        assert pids
        for pid in pids:
            admin.execute("SELECT pg_terminate_backend(%s, 5000)", (pid,))
    time.sleep(0.1)  # the FATAL message and the close reach the client's socket
    probes = _probes(monkeypatch)
    for _ in range(3):  # whichever connection comes next, the call succeeds
        assert store.db.scalar("recall_search_params", ef_search="40") == "40"
    assert probes  # the dead connection was probed, found dead and swept
