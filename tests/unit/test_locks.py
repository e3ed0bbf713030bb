"""Advisory-lock keys live in one module; the plpgsql trigger's literal matches it."""

from __future__ import annotations

import re
from pathlib import Path

from stash_pipeline.db import locks
from stash_pipeline.stages import STAGE_NAMES

ROOT = Path(__file__).resolve().parents[2]


def test_the_id_ordering_trigger_uses_the_documented_key() -> None:
    sql = (ROOT / "stash_pipeline/db/migrations/versions/0001_initial.sql").read_text(encoding="utf-8")
    assert re.findall(r"pg_advisory_xact_lock\((\d+),", sql) == [str(locks.ID_ORDER_KEY)]


def test_stage_locks_never_take_the_id_ordering_key_and_differ_per_stage() -> None:
    keys = {locks.stage_lock_key(name) for name in STAGE_NAMES}
    assert len(keys) == len(STAGE_NAMES)
    assert not keys & {locks.ID_ORDER_KEY, locks.MAINTENANCE_KEY}
    assert all(0 <= key <= 2147483647 for key in keys)
    assert locks.stage_lock("facts", 2**31 + 5) == (locks.stage_lock_key("facts"), 6)  # int4 second key
    assert locks.MIGRATION_LOCK != locks.REEMBED_LOCK


def test_whole_database_locks_are_no_namespace_id_ordering_lock() -> None:
    for key in (locks.MIGRATION_LOCK, locks.REEMBED_LOCK):
        assert key[0] == locks.MAINTENANCE_KEY != locks.ID_ORDER_KEY


def test_no_other_module_takes_a_session_lock_or_names_a_key() -> None:
    """Session-lock SQL is in queries/locks.sql, keys in db/locks.py; no other implementation."""
    session_lock_call = re.compile(r"pg_(try_)?advisory_(lock|unlock)\(")
    offenders = []
    for path in [*(ROOT / "stash_pipeline").rglob("*.py"), *(ROOT / "stash_serve").rglob("*.py")]:
        if path == ROOT / "stash_pipeline/db/locks.py":
            continue
        text = path.read_text(encoding="utf-8")
        if session_lock_call.search(text) or re.search(r"\b731[12]\b", text):
            offenders.append(str(path.relative_to(ROOT)))
    assert offenders == []
    session_lock_sql = [
        path.name
        for path in (ROOT / "stash_pipeline/db/queries").glob("*.sql")
        if session_lock_call.search(path.read_text(encoding="utf-8"))
    ]
    assert session_lock_sql == ["locks.sql"]
