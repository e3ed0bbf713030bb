"""Consolidation cost: model calls (and tokens) per episode across all stages.

Migrates a fresh database (``STASH_DATABASE_URL``'s server, or an embedded server in a
temporary STASH_HOME), loads ``bench/data/consolidation_fixture.jsonl`` (~200 episodes
in 3 namespaces), creates goals, failures and hypotheses, then runs every stage of every
namespace against the scripted OpenAI-compatible model (the real ``openai`` client over
HTTP). It prints per stage: model calls, tokens in/out, rows written — and, computed on
the same data, the reference's call pattern (one call per cluster with seed clustering,
one per fact for relationships, one per contradiction pair, causal windows of 30 stepping
25, one call per 30-item batch elsewhere). Target: ≤ 0.35 calls per episode.

    python bench/consolidation_cost.py [--plot bench/out/consolidation_cost.png]
    python bench/consolidation_cost.py --write-fixture   # regenerate the fixture (seeded)
"""

from __future__ import annotations

import argparse
import json
import math
import random
import sys
import tempfile
import uuid
from collections import Counter, defaultdict
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(ROOT))

FIXTURE = ROOT / "bench" / "data" / "consolidation_fixture.jsonl"
TARGET = 0.35

TOPICS = {
    "/bench/ops": [
        "Bob deploys Kubernetes clusters every Friday",
        "Alice works at Acme in the Lyon office",
        "The Billing service uses Postgres 15 in production",
        "Carol maintains the Nimbus API gateway",
        "Deploy script failed with Postgres timeout during the release",
        "Grafana dashboards alert Dave about Redis memory",
        "The Checkout team runs Terraform plans on Monday",
        "Erin rotates the Vault secrets every month",
        "Jenkins builds the Android app nightly",
        "The Search service depends on Elasticsearch 8",
        "Frank reviews Helm charts before each release",
        "Staging uses Redis 7 for session caching",
        "Release train ships on Thursday with Argo",
        "Gina owns the Kafka topics for Orders",
    ],
    "/bench/research": [
        "Hana trains the Falcon model on TPU pods",
        "The Orion dataset contains 40000 labelled images",
        "Ivan evaluates Falcon with BLEU scores",
        "Jonas writes PyTorch code for the Vega project",
        "The Vega project uses Weights and Biases for tracking",
        "Kira reads papers about Mamba architectures",
        "Falcon training diverged after the learning rate increase",
        "Luca prepares the NeurIPS submission for Vega",
        "The cluster scheduler is Slurm on the Atlas machines",
        "Mira benchmarks Falcon against Llama baselines",
        "Nora cleans the Orion annotations weekly",
        "Omar tunes the tokenizer for Falcon",
        "The Atlas machines have 8 A100 GPUs each",
    ],
    "/bench/personal": [
        "Alice lives in Paris near the river Seine",
        "Paul runs in the Bois de Boulogne on Sundays",
        "Quinn learns Japanese with Duolingo every evening",
        "Rosa cooks Italian food on Saturday",
        "Sam plays chess on Lichess after dinner",
        "Tara reads novels by Murakami",
        "Uma drives a Tesla to the Lyon office",
        "Victor drinks espresso from Lavazza",
        "Wendy volunteers at the Paris food bank",
        "Xavier practices guitar with Fender amps",
        "Yara visits her family in Lisbon each summer",
        "Zoe studies for the GMAT exam",
        "Paul plans a trip to Kyoto in April",
    ],
}
CHANGES = {
    "/bench/ops": [
        "The Billing service uses Postgres 16 in production now",
        "Deploy script failed again with Postgres timeout at noon",
        "Nightly deploy script failed with Postgres timeout",
    ],
    "/bench/research": [
        "Falcon training diverged again after the warmup change",
        "The Orion dataset contains 52000 labelled images now",
    ],
    "/bench/personal": ["Alice lives in Berlin since the spring", "Uma drives a Volvo to the Lyon office now"],
}
SUFFIXES = ["", " today", " again", " this week", " as usual", " once more"]

AGENDA: dict[str, dict[str, list[Any]]] = {
    "/bench/ops": {
        "goals": ["Move the Billing service to Postgres 16", "Make Kubernetes deploys on Friday safe"],
        "failures": [("Deploy script failed with Postgres timeout", "connection pool too small", "raise the pool size")],
        "hypotheses": [("Friday deploys of Kubernetes clusters cause outages", "Compare Friday deploy logs with outages")],
    },
    "/bench/research": {
        "goals": ["Submit the Vega paper to NeurIPS"],
        "failures": [("Falcon training diverged after the learning rate increase", "learning rate too high",
                      "warm up the learning rate")],
        "hypotheses": [("Falcon training diverged because the learning rate was too high",
                        "Rerun Falcon training with a lower learning rate")],
    },
    "/bench/personal": {
        "goals": ["Pass the GMAT exam", "Learn Japanese before the Kyoto trip"],
        "failures": [],
        "hypotheses": [],
    },
}


def write_fixture(path: Path = FIXTURE) -> int:
    rng = random.Random(7)
    lines = []
    for namespace, topics in TOPICS.items():
        episodes = [t + SUFFIXES[k] for t in topics for k in range(rng.choice([4, 5, 6]))]
        rng.shuffle(episodes)
        episodes += CHANGES[namespace]
        lines += [{"namespace": namespace, "content": e + "."} for e in episodes]
    path.write_text("".join(json.dumps(line) + "\n" for line in lines), encoding="utf-8")
    return len(lines)


def load_fixture(path: Path = FIXTURE) -> dict[str, list[str]]:
    out: dict[str, list[str]] = defaultdict(list)
    for line in path.read_text(encoding="utf-8").splitlines():
        if line.strip():
            item = json.loads(line)
            out[item["namespace"]].append(item["content"])
    return dict(out)


# -- the reference's call pattern on the same data --------------------------------------
def reference_calls(store: Any, counts: dict[str, Any]) -> dict[str, int]:
    """Model calls the Go reference would make on this data (its batching, one tick per batch)."""
    import numpy as np

    from stash_pipeline.embedding.vectors import unit_vector

    settings = store.settings
    calls: Counter[str] = Counter()
    with store.db.connection() as conn:
        namespaces = conn.execute("SELECT id, slug FROM namespaces WHERE slug LIKE %s", ("/bench/%",)).fetchall()
        for ns in namespaces:
            episodes = conn.execute(
                "SELECT id, embedding FROM episodes WHERE namespace_id = %s AND kind <> 'repeat_failure' ORDER BY id",
                (ns["id"],),
            ).fetchall()
            for start in range(0, len(episodes), 100):  # stage 1: seed clustering, one call per cluster
                batch = [unit_vector(e["embedding"]) for e in episodes[start : start + 100]]
                taken = [False] * len(batch)
                for i in range(len(batch)):
                    if taken[i]:
                        continue
                    taken[i] = True
                    calls["facts"] += 1
                    for j in range(i + 1, len(batch)):
                        if not taken[j] and float(np.dot(batch[i], batch[j])) >= settings.consolidation_similarity_threshold:
                            taken[j] = True
            n_facts = counts["facts_in"][ns["slug"]]
            calls["relationships"] += n_facts  # one call per fact
            calls["causal_links"] += max(0, math.ceil((n_facts - 5) / 25)) if n_facts >= 2 else 0
            calls["patterns"] += math.ceil(n_facts / 30)
            if counts["goals"][ns["slug"]]:
                calls["goal_progress"] += math.ceil(n_facts / 30)
            if counts["hypotheses"][ns["slug"]]:
                calls["hypothesis_evidence"] += math.ceil(n_facts / 30)
            if counts["failures"][ns["slug"]]:
                calls["failure_patterns"] += math.ceil(len(episodes) / 30)
    calls["contradictions"] = counts["contradiction_pairs"]  # one call per pair
    return dict(calls)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--write-fixture", action="store_true", help="regenerate the fixture and exit")
    parser.add_argument("--plot", default=str(ROOT / "bench" / "out" / "consolidation_cost.png"))
    args = parser.parse_args()
    if args.write_fixture:
        print(f"wrote {write_fixture()} episodes to {FIXTURE}")
        return 0

    import os

    import psycopg

    from stash_pipeline.config import load_settings
    from stash_pipeline.consolidation import runner
    from stash_pipeline.db.dsn import database_dsn
    from stash_pipeline.db.migrate import migrate
    from stash_pipeline.memory import episodes, failures, goals, hypotheses, namespaces
    from stash_pipeline.store import Store
    from testkit.openai_server import ScriptedOpenAI
    from testkit.scripted_model import ScriptedModel

    server_handle = None
    dbname = f"stash_bench_{uuid.uuid4().hex[:8]}"
    base_url = os.environ.get("STASH_DATABASE_URL")
    if base_url:
        admin = database_dsn(load_settings(database_url=base_url, embedder="hash"), "postgres")
    else:
        from stash_pipeline.db.embedded import EmbeddedServer

        home = Path(tempfile.mkdtemp(prefix="stash-bench-"))
        import socket

        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = int(s.getsockname()[1])
        server_handle = EmbeddedServer(load_settings(home=home, db_port=port, embedder="hash"))
        server_handle.start()
        admin = server_handle.url("postgres")
    with psycopg.connect(admin, autocommit=True) as conn:
        conn.execute(f'CREATE DATABASE "{dbname}"')
    from psycopg.conninfo import conninfo_to_dict, make_conninfo

    parts = conninfo_to_dict(admin)
    parts["dbname"] = dbname
    dsn = make_conninfo(**parts)
    model = ScriptedModel()
    try:
        with ScriptedOpenAI(model) as chat:
            settings = load_settings(
                database_url=dsn, embedder="hash", vector_dim=384, home=Path(tempfile.mkdtemp()),
                openai_base_url=chat.base_url, reasoner_model="scripted", reasoner_backoff_s=0.05,
            )
            migrate(settings, dsn)
            store = Store.open(settings)
            data = load_fixture()
            counts: dict[str, Any] = {"goals": Counter(), "failures": Counter(), "hypotheses": Counter(),
                                      "facts_in": Counter()}
            for namespace, texts in data.items():
                namespaces.create(store, namespace)
                agenda = AGENDA.get(namespace, {})
                for content in agenda.get("goals", []):
                    goals.create(store, namespace, content)
                    counts["goals"][namespace] += 1
                for what, why, lesson in agenda.get("failures", []):
                    failures.create(store, namespace, what, why, lesson)
                    counts["failures"][namespace] += 1
                for content, plan in agenda.get("hypotheses", []):
                    hypotheses.create(store, namespace, content, plan)
                    counts["hypotheses"][namespace] += 1
                episodes.remember_batch(store, namespace, [{"content": t} for t in texts])
            n_episodes = sum(len(t) for t in data.values())

            reports = runner.run_tree(store, "/bench")
            per_stage: dict[str, Counter[str]] = defaultdict(Counter)
            for report in reports:
                stats = per_stage[report.stage]
                stats["calls"] += report.model_calls
                stats["tokens_in"] += report.tokens_in
                stats["tokens_out"] += report.tokens_out
                stats["rows_written"] += report.rows_written
                stats["rows_in"] += report.rows_in
                stats["items_failed"] += report.items_failed
                if report.stage == "relationships":
                    counts["facts_in"][report.namespace] = report.rows_in
                if report.status not in ("ok", "idle"):
                    print(f"warning: {report.namespace} {report.stage}: {report.status} {report.message}")
            # contradiction calls are made inside the fact producers; split them out
            with store.db.connection() as conn:
                rows = conn.execute(
                    "SELECT count(*) AS n, COALESCE(sum(prompt_tokens), 0) AS tin,"
                    " COALESCE(sum(completion_tokens), 0) AS tout FROM model_calls WHERE ok"
                ).fetchone()
            counts["contradiction_pairs"] = sum(int(r.details.get("contradiction_pairs", 0)) for r in reports)
            contradiction_calls = sum(int(r.details.get("contradiction_calls", 0)) for r in reports)
            reference = reference_calls(store, counts)
            store.close()
    finally:
        with psycopg.connect(admin, autocommit=True) as conn:
            conn.execute(f'DROP DATABASE IF EXISTS "{dbname}" WITH (FORCE)')
        if server_handle is not None:
            server_handle.stop()

    total_calls = sum(s["calls"] for s in per_stage.values())
    total_in = sum(s["tokens_in"] for s in per_stage.values())
    total_out = sum(s["tokens_out"] for s in per_stage.values())
    ref_total = sum(reference.values())
    header = f"{'stage':<20}{'calls':>7}{'tokens_in':>11}{'tokens_out':>12}{'rows_in':>9}{'written':>9}{'failed':>8}{'reference':>11}"
    print(f"consolidation cost — {n_episodes} episodes, {len(data)} namespaces, scripted model\n")
    print(header)
    print("-" * len(header))
    from stash_pipeline.stages import STAGE_NAMES

    for stage in STAGE_NAMES:
        s = per_stage[stage]
        ref = reference.get(stage, 0)
        print(f"{stage:<20}{s['calls']:>7}{s['tokens_in']:>11}{s['tokens_out']:>12}{s['rows_in']:>9}"
              f"{s['rows_written']:>9}{s['items_failed']:>8}{ref:>11}")
    # contradiction checks run inside the fact producers: their calls are part of the rows
    # above; rows_in here = pairs classified; the reference made one call per pair
    print(f"{' (contradictions)':<20}{contradiction_calls:>7}{'':>11}{'':>12}{counts['contradiction_pairs']:>9}"
          f"{'':>9}{'':>8}{reference.get('contradictions', 0):>11}")
    print("-" * len(header))
    print(f"{'total':<20}{total_calls:>7}{total_in:>11}{total_out:>12}{'':>9}{'':>9}{'':>8}{ref_total:>11}")
    print()
    per_episode = total_calls / n_episodes
    print(f"model calls per episode: {per_episode:.3f}  (target ≤ {TARGET}; reference pattern {ref_total / n_episodes:.3f},"
          f" ratio {ref_total / max(total_calls, 1):.1f}x)")
    print(f"tokens per episode: {(total_in + total_out) / n_episodes:.0f} ({total_in / n_episodes:.0f} in,"
          f" {total_out / n_episodes:.0f} out)")
    print(f"model_calls rows (ok): {rows['n']} (matches reports: {rows['n'] == total_calls})")
    if args.plot:
        try:
            import matplotlib

            matplotlib.use("Agg")
            import matplotlib.pyplot as plt

            stages = [*STAGE_NAMES[:-1], "contradictions"]
            ours = [per_stage[s]["calls"] for s in STAGE_NAMES[:-1]] + [contradiction_calls]
            ours[0] -= contradiction_calls  # the check runs inside the fact producers (mostly facts)
            theirs = [reference.get(s, 0) for s in stages]
            fig, ax = plt.subplots(figsize=(9, 4))
            xs = range(len(stages))
            ax.bar([x - 0.2 for x in xs], theirs, width=0.4, label="reference call pattern")
            ax.bar([x + 0.2 for x in xs], ours, width=0.4, label="stash (batched)")
            ax.set_xticks(list(xs), stages, rotation=30, ha="right")
            ax.set_ylabel("model calls")
            ax.set_title(f"{n_episodes} episodes: {per_episode:.3f} calls/episode (reference {ref_total / n_episodes:.3f})")
            ax.legend()
            fig.tight_layout()
            Path(args.plot).parent.mkdir(parents=True, exist_ok=True)
            fig.savefig(args.plot, dpi=100)
            print(f"plot: {args.plot}")
        except ImportError:
            print("matplotlib not installed: no plot")
    return 0 if per_episode <= TARGET else 1


if __name__ == "__main__":
    raise SystemExit(main())
