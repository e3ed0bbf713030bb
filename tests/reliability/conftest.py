"""Shared pieces of the reliability suites: a richer corpus, a canonical dump, integrity checks.

The scripted model server and model-backed store come from the consolidation tests
(``model``, ``server``, ``cstore`` are re-exported here as fixtures); the HTTP server
helpers come from the MCP transport tests. What is added here is what every suite
compares: a canonical, id-free dump of everything consolidation derives, orphan-lineage
and cursor checks, and a table checksum snapshot for "the database did not change".
"""

from __future__ import annotations

import os
import random
import sys
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

import pytest

from stash_pipeline.consolidation import runner
from stash_pipeline.memory import failures, goals, hypotheses
from tests.integration.consolidation.conftest import cstore, model, rows, seed, server  # noqa: F401

#: Settings every consolidation worker in these suites uses (in-process and subprocess alike):
#: small batches so a run commits many batches and a kill lands between and inside them.
WORKER_SETTINGS: dict[str, Any] = {
    "embedder": "hash",
    "vector_dim": 384,
    "reasoner_model": "scripted",
    "reasoner_backoff_s": 0.01,
    "reasoner_timeout_s": 5.0,
    "reasoner_max_retries": 1,
    "reasoner_max_attempts": 2,
    "consolidation_batch_size": 4,
    "facts_clusters_per_call": 2,
    "facts_batch_size": 4,
    "relationships_facts_per_call": 3,
}

_PEOPLE = ["Alice", "Bob", "Carol", "Dave", "Erin", "Frank"]
_PLACES = ["Lyon", "Paris", "Berlin", "Oslo", "Madrid", "Kyoto"]
_ORGS = ["Acme", "Globex", "Initech", "Umbrella", "Hooli", "Vandelay"]
_TOOLS = ["Kubernetes", "Postgres", "Terraform", "Redis", "Kafka", "Nginx"]


def corpus(n: int = 24, seed_value: int = 7) -> list[str]:
    """``n`` episodes in near-duplicate pairs (so facts cluster), about people, tools and failures."""
    rng = random.Random(seed_value)
    out: list[str] = []
    while len(out) < n:
        who, where, org, tool = rng.choice(_PEOPLE), rng.choice(_PLACES), rng.choice(_ORGS), rng.choice(_TOOLS)
        base = rng.choice(
            [
                f"{who} works at {org} in the {where} office",
                f"{who} deploys {tool} clusters every Friday",
                f"Deploy script failed on Friday with {tool} timeout",
                f"{who} moved from {where} to {rng.choice(_PLACES)} last spring",
                f"{who} is not using {tool} for the {org} project",
            ]
        )
        if base not in out:
            out += [base, base + " again"]
    return out[:n]


def prepare(store: Any, slug: str, n: int = 24) -> None:
    """A namespace with a goal, a hypothesis, a failure and ``n`` episodes (same for every slug)."""
    seed(store, slug, [])
    goals.create(store, slug, "Make Kubernetes deploys on Friday safe for Alice")
    hypotheses.create(
        store, slug, "Kubernetes deploys on Friday cause Postgres timeout",
        "Compare Friday Kubernetes deploy logs with Postgres timeout errors",
    )
    failures.create(store, slug, "Deploy script failed with Postgres timeout", "pool too small", "raise the pool size")
    seed(store, slug, corpus(n))


# -- figures for docs/reliability.md ----------------------------------------------------------
#: suite -> counter of what happened (printed at the end of the session)
FIGURES: dict[str, Counter] = defaultdict(Counter)


def pytest_terminal_summary(terminalreporter: Any) -> None:
    if not FIGURES:
        return
    terminalreporter.section("reliability figures")
    for suite, counts in sorted((k, c) for k, c in FIGURES.items() if c):
        shown = ", ".join(f"{k}={v}" for k, v in sorted(counts.items(), key=lambda kv: str(kv[0])))
        terminalreporter.write_line(f"{suite}: {shown}")


# -- canonical dump ------------------------------------------------------------------------
#: every row kind lineage may name, with an id-free text for it
_NODES = """
    SELECT 'episode' AS kind, id, namespace_id, kind || ':' || content AS txt FROM episodes
    UNION ALL SELECT 'fact', id, namespace_id, origin || ':' || content FROM facts
    UNION ALL SELECT 'failure', id, namespace_id, content FROM failures
    UNION ALL SELECT 'relationship', id, namespace_id, from_entity || ' ' || relation_type || ' ' || to_entity
              FROM relationships
    UNION ALL SELECT 'causal_link', id, namespace_id, COALESCE(rationale, '') FROM causal_links
    UNION ALL SELECT 'pattern', id, namespace_id, content FROM patterns
    UNION ALL SELECT 'contradiction', id, namespace_id, classification || ':' || explanation FROM contradictions
    UNION ALL SELECT 'goal_note', id, namespace_id, kind || ':' || content FROM goal_notes
    UNION ALL SELECT 'hypothesis', id, namespace_id, status || ':' || content FROM hypotheses
    UNION ALL SELECT 'hypothesis_evidence', id, namespace_id, verdict || ':' || reasoning FROM hypothesis_evidence
"""

#: derived rows per namespace, ids masked (namespaces draw ids from shared sequences)
CANONICAL: dict[str, str] = {
    "facts": "SELECT content, origin, entity, property, value, round(confidence::numeric, 3) AS c,"
             " withdrawn_at IS NULL AS live, valid_until IS NULL AS open, superseded_by IS NULL AS top"
             " FROM facts WHERE namespace_id = %(ns)s",
    "relationships": "SELECT from_entity, relation_type, to_entity, round(confidence::numeric, 3) AS c"
                     " FROM relationships WHERE namespace_id = %(ns)s",
    "causal_links": "SELECT rationale, method, round(confidence::numeric, 3) AS c FROM causal_links"
                    " WHERE namespace_id = %(ns)s",
    "patterns": "SELECT content, rationale FROM patterns WHERE namespace_id = %(ns)s",
    "contradictions": "SELECT classification, explanation, resolved, resolution FROM contradictions"
                      " WHERE namespace_id = %(ns)s",
    "goal_notes": "SELECT author, kind, content FROM goal_notes WHERE namespace_id = %(ns)s",
    "evidence": "SELECT verdict, reasoning, action FROM hypothesis_evidence WHERE namespace_id = %(ns)s",
    "hypotheses": "SELECT status, round(confidence::numeric, 2) AS c FROM hypotheses WHERE namespace_id = %(ns)s",
    "episodes": "SELECT kind, content FROM episodes WHERE namespace_id = %(ns)s AND deleted_at IS NULL",
    "dead_letters": "SELECT stage, item_kind, status, attempts FROM dead_letters WHERE namespace_id = %(ns)s",
    "lineage": f"""WITH nodes AS ({_NODES})
        SELECT l.child_kind, c.txt AS child, l.parent_kind, p.txt AS parent
        FROM lineage l
        LEFT JOIN nodes c ON c.kind = l.child_kind AND c.id = l.child_id
        LEFT JOIN nodes p ON p.kind = l.parent_kind AND p.id = l.parent_id
        WHERE l.namespace_id = %(ns)s""",
}


def namespace_id(store: Any, slug: str) -> int:
    return int(rows(store, "SELECT id FROM namespaces WHERE slug = %(s)s", s=slug)[0]["id"])


def canonical(store: Any, slug: str) -> dict[str, list[str]]:
    """Everything consolidation derived in ``slug`` as sorted id-free strings (a multiset per kind)."""
    ns = namespace_id(store, slug)
    import re

    def mask(value: Any) -> str:
        return re.sub(r"[0-9]+", "#", str(value))

    return {
        name: sorted(mask(sorted(r.items())) for r in rows(store, sql, ns=ns)) for name, sql in CANONICAL.items()
    }


def orphan_lineage(store: Any) -> list[dict[str, Any]]:
    """Lineage rows whose child or parent row does not exist (in the same namespace)."""
    return rows(
        store,
        f"""WITH nodes AS ({_NODES})
        SELECT l.* FROM lineage l
        WHERE NOT EXISTS (SELECT 1 FROM nodes n WHERE n.kind = l.child_kind AND n.id = l.child_id
                          AND n.namespace_id = l.namespace_id)
           OR NOT EXISTS (SELECT 1 FROM nodes n WHERE n.kind = l.parent_kind AND n.id = l.parent_id)""",
    )


def duplicate_rows(store: Any, slug: str) -> dict[str, int]:
    """Rows of ``slug`` that exist twice with the same identity (per table), and doubled lineage edges."""
    checks = {
        "facts": "SELECT count(*) - count(DISTINCT (content, origin)) AS n FROM facts WHERE namespace_id = %(ns)s",
        "relationships": "SELECT count(*) - count(DISTINCT (source_fact_id, from_entity, relation_type, to_entity))"
                         " AS n FROM relationships WHERE namespace_id = %(ns)s",
        "causal_links": "SELECT count(*) - count(DISTINCT (cause_fact_id, effect_fact_id, effect_failure_id)) AS n"
                        " FROM causal_links WHERE deleted_at IS NULL AND namespace_id = %(ns)s",
        "goal_notes": "SELECT count(*) - count(DISTINCT (goal_id, fact_id, kind, content)) AS n FROM goal_notes"
                      " WHERE namespace_id = %(ns)s",
        "evidence": "SELECT count(*) - count(DISTINCT (hypothesis_id, fact_id)) AS n FROM hypothesis_evidence"
                    " WHERE namespace_id = %(ns)s",
        "lineage": "SELECT count(*) - count(DISTINCT (child_kind, child_id, parent_kind, parent_id)) AS n"
                   " FROM lineage WHERE namespace_id = %(ns)s",
        "episodes": "SELECT count(*) - count(DISTINCT content) AS n FROM episodes WHERE namespace_id = %(ns)s",
    }
    ns = namespace_id(store, slug)
    return {name: int(rows(store, sql, ns=ns)[0]["n"]) for name, sql in checks.items()}


def until_caught_up(store: Any, slug: str, max_runs: int = 6, **kwargs: Any) -> int:
    """``run_all`` until a run writes nothing, fails nothing and leaves no stage with work; the run count.

    Stages feed each other (failure_patterns writes repeat-failure episodes the facts stage
    reads next time), so one pass is not always a fixed point."""
    for n in range(1, max_runs + 1):
        reports = runner.run_all(store, slug, **kwargs)
        quiet = all(r.rows_written == 0 and r.items_failed == 0 for r in reports)
        if quiet and not any(r["has_work"] for r in runner.status(store, slug)):
            return n
    raise AssertionError(f"{slug} not caught up after {max_runs} runs: {runner.status(store, slug)}")


def cursor_problems(store: Any, slug: str) -> list[dict[str, Any]]:
    """(namespace, stage) rows whose cursor is beyond its source head."""
    return [r for r in runner.status(store, slug) if r["stage"] != "decay" and r["cursor"] > r["head"]]


def uncovered_before_cursor(store: Any, slug: str) -> list[str]:
    """Episodes at or before the facts cursor that no fact (and no dead letter) accounts for."""
    ns = namespace_id(store, slug)
    found = rows(
        store,
        """SELECT e.content FROM episodes e
           JOIN stage_checkpoints c ON c.namespace_id = e.namespace_id AND c.stage = 'facts'
           WHERE e.namespace_id = %(ns)s AND e.id <= c.cursor AND e.kind = 'observation'
             AND NOT EXISTS (SELECT 1 FROM lineage l WHERE l.parent_kind = 'episode' AND l.parent_id = e.id)
             AND NOT EXISTS (SELECT 1 FROM dead_letters d WHERE d.namespace_id = e.namespace_id
                             AND d.stage = 'facts' AND d.item_id = e.id)""",
        ns=ns,
    )
    return sorted(r["content"] for r in found)


# -- "the database did not change" ---------------------------------------------------------
#: tables a rejected call must leave alone (caches, ledgers and token use times excluded)
SNAPSHOT_TABLES = (
    "namespaces", "episodes", "facts", "lineage", "relationships", "causal_links", "patterns",
    "contradictions", "contexts", "hypotheses", "hypothesis_evidence", "goals", "goal_notes",
    "failures", "stage_checkpoints", "dead_letters",
)


def snapshot(store: Any) -> dict[str, tuple[int, str]]:
    """Row count and an md5 over every row's text, per table."""
    out: dict[str, tuple[int, str]] = {}
    for table in SNAPSHOT_TABLES:
        row = rows(
            store,
            f"SELECT count(*) AS n, md5(COALESCE(string_agg(t::text, '|' ORDER BY t::text), '')) AS h FROM {table} t",
        )[0]
        out[table] = (int(row["n"]), str(row["h"]))
    return out


# -- subprocess workers ----------------------------------------------------------------------
REPO = Path(__file__).resolve().parents[2]
#: the `stash` console script of the running interpreter (works without an activated venv)
STASH = str(Path(sys.executable).with_name("stash"))


def worker_env(database_url: str, home: Path, base_url: str | None, **extra: Any) -> dict[str, str]:
    """Environment for a `stash` subprocess using WORKER_SETTINGS against ``database_url``."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("STASH_")}
    env.update(
        {
            "STASH_DATABASE_URL": database_url,
            "STASH_HOME": str(home),
            "STASH_ENV_FILE": "/nonexistent/.env",
            "STASH_LOG_LEVEL": "warning",
        }
    )
    values = dict(WORKER_SETTINGS)
    values.update(extra)
    for key, value in values.items():
        env[f"STASH_{key.upper()}"] = str(value)
    if base_url:
        env["STASH_OPENAI_BASE_URL"] = base_url
    return env


@pytest.fixture
def wstore(make_store: Any, server: Any) -> Any:  # noqa: F811 (the imported fixture)
    """A store with WORKER_SETTINGS whose reasoner talks to the scripted server."""
    return make_store(openai_base_url=server.base_url, **WORKER_SETTINGS)


def trials(fast: int, full: int) -> list[Any]:
    """Trial indices: the first ``fast`` run by default, the rest only with --run-slow."""
    return [pytest.param(i, id=f"t{i}") for i in range(fast)] + [
        pytest.param(i, id=f"t{i}", marks=pytest.mark.slow) for i in range(fast, full)
    ]
