"""``episodes`` (external) and one asset per consolidation stage, generated from ``STAGES``.

Each stage asset is partitioned by namespace; its body runs the library's
``run_stage`` for that namespace and maps the ``StageReport`` to a ``MaterializeResult``
(stable metadata keys, ``REPORT_KEYS``) plus the checks of ``checks.py``. Dependencies come
from ``StageSpec.deps``; they give lineage and ordering, the watermark sensor gives
triggering.

A run tagged ``stash/rebuild=<stage>`` (the ``rebuild_<stage>`` jobs) makes that stage's
asset rebuild its namespace first (``rebuild_first``). SQL-only stages have a
single-run backfill policy: a run over a range of namespaces runs each of them and
records one summary (``run_many``).

A model stage without a reasoner (``STASH_REASONER_MODEL`` / ``STASH_OPENAI_BASE_URL``
unset) fails at once, without retry, with a description naming the missing settings:
a green materialization would claim the partition is up to date while its episodes wait.

Failures are ``dg.Failure``s whose description is the cause (``facts failed for /x: …``,
with the server's message) and whose metadata says what the run did (``failure_metadata``),
without a Python traceback. Transient errors (model endpoint unavailable, database
unreachable, another runner holding the stage lock) are retried by the ``RetryPolicy``,
except on the last attempt, which fails with the cause rather than Dagster's "Exceeded
max_retries", and except a model endpoint marked down (``reasoner.Breaker``), which fails
at once. A setup the endpoint refuses (model name, key, route), a missing reasoner and
anything else fail at once, without retry. Re-running or backfilling is always safe:
stages only move their cursor forward with their outputs, in one transaction per batch.
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import dagster as dg

from stash_pipeline import errors
from stash_pipeline.defs import checks
from stash_pipeline.defs.episodes import GROUP, episodes
from stash_pipeline.defs.partitions import namespace_slug, namespaces_partitions
from stash_pipeline.defs.resources import StashResource
from stash_pipeline.stages import REPORT_KEYS, STAGES, StageReport, StageSpec
from stash_pipeline.stages.versions import code_version
from stash_pipeline.store import Store

#: Run tag that makes a stage asset rebuild its namespace before running (``jobs.py``).
REBUILD_TAG = "stash/rebuild"
#: Run tag saying who launched a run, set when it starts (``launched_by``).
LAUNCHED_BY_TAG = "stash/launched_by"

__all__ = [
    "GROUP", "LAUNCHED_BY_TAG", "REBUILD_TAG", "RETRY_POLICY", "STAGE_KEYS", "build_stage_assets", "episodes", "failure_metadata",
    "run_or_fail",
]

#: Transient failures: 3 retries, ~10 s, 20 s, 40 s apart (± jitter so namespaces don't stampede).
RETRY_POLICY = dg.RetryPolicy(max_retries=3, delay=10, backoff=dg.Backoff.EXPONENTIAL, jitter=dg.Jitter.PLUS_MINUS)



def run_or_fail(store: Store, slug: str, stage: str, run_id: str, *, attempt: int = 0, retries: int = 0) -> StageReport:
    """``run_stage``, with its outcome sorted into a retry or a ``dg.Failure`` that names the cause.

    ``attempt`` is the step's retry number and ``retries`` its policy's ``max_retries``.
    A transient error is retried while attempts remain; the last attempt, an endpoint
    marked down and every other error fail without retry.
    """
    # Imported here: the runner pulls in the reasoner/openai stack, which sensor ticks and
    # the webserver (both import this module) never need.
    from stash_pipeline.consolidation.runner import run_stage

    try:
        report = run_stage(store, slug, stage, run_id=run_id)
        if report.status == "busy":
            raise errors.StageBusy(report.message or None)
        if report.status == "not_configured":
            # Not a green "nothing to do": the stage could not look at its input at all.
            raise errors.ReasonerNotConfigured(
                f"{stage} needs a reasoning model: set STASH_REASONER_MODEL and STASH_OPENAI_BASE_URL "
                "(in the environment of the Dagster daemon and code server) and re-execute"
            )
    except errors.StashError as exc:
        retry = exc.transient and attempt < retries and not exc.details.get("endpoint_down")
        # `from None`: the headline and metadata say it all; the HTTP client's traceback does not help
        raise dg.Failure(
            description=f"{stage} failed for {slug}: {exc.message}",
            metadata=failure_metadata(exc, attempt),
            allow_retries=retry,
        ) from None
    except Exception as exc:
        # Not a failure Stash knows (a bug): retrying the same input would fail the same way.
        raise dg.Failure(
            description=f"{stage} failed for {slug}: {type(exc).__name__}: {exc}", allow_retries=False
        ) from exc
    return report


def failure_metadata(exc: errors.StashError, attempt: int = 0) -> dict[str, Any]:
    """What a failed step reports: the error's code and details, and what the run did before it."""
    metadata: dict[str, Any] = {"error": exc.code, "transient": exc.transient, "attempt": attempt + 1}
    for key, value in exc.details.items():
        if isinstance(value, str | int | float | bool):
            metadata[key] = value
    report = getattr(exc, "stage_report", None)
    if isinstance(report, StageReport):
        metadata.update(report.metadata())
    return metadata


def launched_by(tags: dict[str, str]) -> str:
    """Who launched a run, from its tags: a re-execution first, since it inherits its parent's tags.

    Dagster copies a parent run's tags, ``dagster/sensor_name`` included, onto a
    re-execution, so its "Launched by" names the parent's sensor; this names the hand.
    """
    parent = tags.get("dagster/parent_run_id")
    if parent:
        if "dagster/retry_number" in tags:
            return f"automatic retry {tags['dagster/retry_number']} of run {parent[:8]} (its run worker died)"
        return f"re-execution of run {parent[:8]}, launched by hand"
    if "dagster/backfill" in tags:
        return f"backfill {tags['dagster/backfill']}"
    if "dagster/sensor_name" in tags:
        return f"sensor {tags['dagster/sensor_name']}"
    if "dagster/schedule_name" in tags:
        return f"schedule {tags['dagster/schedule_name']}"
    trigger = {"cli": "stash consolidate run", "mcp": "the consolidate tool (MCP)"}.get(tags.get("stash/trigger", ""))
    return trigger or "by hand (Dagster UI or CLI)"


def note_launcher(context: dg.AssetExecutionContext) -> None:
    """Tag the run with who launched it (once per run) and say it in the run's log."""
    if LAUNCHED_BY_TAG in context.run.tags:
        return
    who = launched_by(dict(context.run.tags))
    context.instance.add_run_tags(context.run.run_id, {LAUNCHED_BY_TAG: who})
    context.log.info(f"launched by: {who}")


def rebuild_first(context: dg.AssetExecutionContext, store: Store, slug: str, stage: str) -> None:
    """Withdraw what ``stage`` derived in the namespace and rewind it (``stash_pipeline.consolidation.rebuild``).

    The token is the root run id: a step retry or a re-execution of this run does not
    withdraw again what the run has re-derived since.
    """
    from stash_pipeline.consolidation.rebuild import rebuild_namespace
    from stash_pipeline.memory.namespaces import get as get_namespace

    with store.db.transaction() as tx:
        row = get_namespace(tx, slug)
    try:
        report = rebuild_namespace(
            store, int(row["id"]), slug, stage, apply=True, token=context.run.root_run_id or context.run.run_id
        )
    except errors.StashError as exc:
        if exc.transient:
            raise
        raise dg.Failure(description=f"rebuild of {stage} failed for {slug}: {exc.message}", allow_retries=False) from exc
    context.log.info(f"rebuild of {stage} in {slug}: {report.to_json()}")


def run_many(context: dg.AssetExecutionContext, stash: StashResource, spec: StageSpec) -> dg.MaterializeResult:
    """One run over a range of namespaces (SQL-only stages): every namespace, then one summary.

    Dagster records the summary on every partition of the range. A namespace that fails
    does not stop the others; the step fails afterwards, naming them.
    """
    from stash_pipeline.consolidation.runner import run_stage

    slugs = [namespace_slug(key) for key in context.partition_keys]
    totals = StageReport(stage=spec.name, namespace="")
    failed: list[str] = []
    with stash.open_store() as store:
        for slug in slugs:
            try:
                report = run_stage(store, slug, spec.name, run_id=context.run.run_id, wait=True)
            except Exception as exc:  # reported below; the other namespaces still run
                failed.append(f"{slug}: {exc}")
                continue
            for key in REPORT_KEYS:
                setattr(totals, key, getattr(totals, key) + getattr(report, key))
    if failed:
        raise dg.Failure(
            description=f"{spec.name} failed in {len(failed)} of {len(slugs)} namespace(s): " + "; ".join(failed[:10]),
            allow_retries=False,
        )
    return dg.MaterializeResult(
        metadata={**totals.metadata(), "namespaces": len(slugs), "status": "ok", "message": ""},
        check_results=[
            dg.AssetCheckResult(
                check_name=checks.ITEM_CHECK,
                passed=totals.items_failed == 0 and totals.dead_lettered == 0,
                severity=dg.AssetCheckSeverity.WARN,
                metadata={"items_failed": totals.items_failed, "dead_lettered": totals.dead_lettered},
            )
        ],
    )


def build_stage_asset(
    spec: StageSpec, *, retry_policy: dg.RetryPolicy | None = RETRY_POLICY, model: str | None = None
) -> dg.AssetsDefinition:
    """The partitioned asset of one stage: a thin wrapper around ``run_stage``.

    ``model`` is the reasoning model's name, part of the stage's code version.
    """

    @dg.asset(
        name=spec.name,
        code_version=code_version(spec, model),
        description=spec.description,
        partitions_def=namespaces_partitions,
        deps=[dg.AssetKey(dep) for dep in spec.deps],
        group_name=GROUP,
        pool=spec.pool,
        retry_policy=retry_policy,
        # SQL-only stages run every namespace of a backfill in one run (no model, no per-run cost)
        backfill_policy=None if spec.needs_model else dg.BackfillPolicy.single_run(),
        check_specs=checks.check_specs(spec),
        kinds={"postgres", "openai"} if spec.needs_model else {"postgres"},
        tags={"stash/model": "yes" if spec.needs_model else "no"},
    )
    # `context` stays unannotated: Dagster compares the raw annotation object, which
    # `from __future__ import annotations` turns into a string it rejects.
    def stage_asset(context, stash: StashResource) -> Iterator[dg.MaterializeResult]:  # type: ignore[no-untyped-def]
        note_launcher(context)
        if not context.has_partition_key:
            # A single-run backfill over many namespaces (SQL-only stages): one summary.
            yield run_many(context, stash, spec)
            return
        slug = namespace_slug(context.partition_key)
        with stash.open_store() as store:
            if context.run.tags.get(REBUILD_TAG) == spec.name:
                rebuild_first(context, store, slug, spec.name)
            report = run_or_fail(
                store, slug, spec.name, context.run.run_id,
                attempt=context.retry_number, retries=retry_policy.max_retries if retry_policy else 0,
            )
            yield dg.MaterializeResult(
                metadata={**report.metadata(), "status": report.status, "message": report.message},
                check_results=checks.check_results(spec, report, store, slug),
            )

    return stage_asset


def build_stage_assets(
    *, retry_policy: dg.RetryPolicy | None = RETRY_POLICY, model: str | None = None
) -> list[dg.AssetsDefinition]:
    return [build_stage_asset(spec, retry_policy=retry_policy, model=model) for spec in STAGES]


STAGE_KEYS: dict[str, dg.AssetKey] = {spec.name: dg.AssetKey(spec.name) for spec in STAGES}
