"""20 concurrent writers, each with its own Store (pool): nothing lost, ids unique."""

from __future__ import annotations

import threading

from stash_pipeline.memory import episodes, namespaces

WRITERS = 20
PER_WRITER = 15


def test_concurrent_writers_lose_nothing(store, make_store):
    namespaces.create(store, "/load/a")
    namespaces.create(store, "/load/b")
    stores = [make_store(db_pool_max=2) for _ in range(WRITERS)]
    results: list[list[int]] = [[] for _ in range(WRITERS)]
    failures: list[BaseException] = []
    barrier = threading.Barrier(WRITERS)

    def writer(n: int) -> None:
        try:
            barrier.wait()
            ns = "/load/a" if n % 2 else "/load/b"
            for i in range(PER_WRITER):
                if i % 5 == 4:  # some batches too
                    out = episodes.remember_batch(
                        stores[n], ns, [{"content": f"writer {n} batch {i} item {j}"} for j in range(3)]
                    )
                    results[n] += [r.id for r in out]
                else:
                    results[n].append(episodes.remember(stores[n], ns, f"writer {n} episode {i}").id)
        except BaseException as exc:
            failures.append(exc)

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(WRITERS)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=120)
    assert failures == []
    ids = [i for r in results for i in r]
    expected = WRITERS * (PER_WRITER - PER_WRITER // 5 + 3 * (PER_WRITER // 5))
    assert len(ids) == expected and len(set(ids)) == expected
    with store.db.connection() as conn:
        rows = conn.execute("SELECT id, content FROM episodes ORDER BY id").fetchall()
    assert sorted(ids) == [r["id"] for r in rows]
    assert len({r["content"] for r in rows}) == expected


def test_concurrent_idempotent_replays_create_one_row(store, make_store):
    namespaces.create(store, "/load")
    stores = [make_store(db_pool_max=1) for _ in range(10)]
    out: list[dict] = []
    barrier = threading.Barrier(10)

    def writer(n: int) -> None:
        barrier.wait()
        out.append(episodes.remember(stores[n], "/load", "same event", idempotency_key="evt-1"))

    threads = [threading.Thread(target=writer, args=(n,)) for n in range(10)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=60)
    assert len(out) == 10
    assert len({r.id for r in out}) == 1
    assert sum(r.created for r in out) == 1
