"""``episodes`` (external) and one asset per consolidation stage, generated from ``STAGES``.

Each stage asset is partitioned by namespace; its body runs the library's
``run_stage`` for that namespace and maps the ``StageReport`` to a ``MaterializeResult``
(stable metadata keys, ``REPORT_KEYS``) plus the checks of ``checks.py``. Dependencies come
from ``StageSpec.deps``; they give lineage and ordering, the watermark sensor gives
triggering.

Failures: transient errors (model endpoint down, database unreachable, another runner
holding the stage lock) are re-raised so the ``RetryPolicy`` retries the step with
exponential backoff; anything else fails the step with a clear description and no
retry. Re-running or backfilling is always safe: stages only move their cursor forward
with their outputs, in one transaction per batch.
"""

from __future__ import annotations

import dagster as dg

from stash_pipeline import errors
from stash_pipeline.defs import checks
from stash_pipeline.defs.partitions import namespace_slug, namespaces_partitions
from stash_pipeline.defs.resources import StashResource
from stash_pipeline.stages import STAGES, StageReport, StageSpec
from stash_pipeline.store import Store

GROUP = "consolidation"

#: Transient failures: 3 retries, ~10 s, 20 s, 40 s apart (± jitter so namespaces don't stampede).
RETRY_POLICY = dg.RetryPolicy(max_retries=3, delay=10, backoff=dg.Backoff.EXPONENTIAL, jitter=dg.Jitter.PLUS_MINUS)

episodes = dg.AssetSpec(
    "episodes",
    description="What agents witnessed, written by the MCP service / CLI (`remember`). Not materialized here.",
    partitions_def=namespaces_partitions,
    group_name=GROUP,
    kinds={"postgres"},
)


def run_or_fail(store: Store, slug: str, stage: str, run_id: str) -> StageReport:
    """``run_stage``, with its outcome sorted into retry (re-raise) or permanent failure (``dg.Failure``)."""
    # Imported here: the runner pulls in the reasoner/openai stack, which sensor ticks and
    # the webserver (both import this module) never need.
    from stash_pipeline.consolidation import run_stage

    try:
        report = run_stage(store, slug, stage, run_id=run_id)
        if report.status == "busy":
            raise errors.StageBusy(report.message or None)
    except errors.StashError as exc:
        if exc.transient:
            raise  # RetryPolicy: the endpoint, the database or the lock may be free later
        raise dg.Failure(
            description=f"{stage} failed for {slug}: {exc.message}", metadata={"error": exc.code}, allow_retries=False
        ) from exc
    except Exception as exc:
        # Not a failure Stash knows (a bug): retrying the same input would fail the same way.
        raise dg.Failure(
            description=f"{stage} failed for {slug}: {type(exc).__name__}: {exc}", allow_retries=False
        ) from exc
    return report


def build_stage_asset(spec: StageSpec, *, retry_policy: dg.RetryPolicy | None = RETRY_POLICY) -> dg.AssetsDefinition:
    """The partitioned asset of one stage: a thin wrapper around ``run_stage``."""

    @dg.asset(
        name=spec.name,
        description=spec.description,
        partitions_def=namespaces_partitions,
        deps=[dg.AssetKey(dep) for dep in spec.deps],
        group_name=GROUP,
        pool=spec.pool,
        retry_policy=retry_policy,
        check_specs=checks.check_specs(spec),
        kinds={"postgres", "openai"} if spec.needs_model else {"postgres"},
        tags={"stash/model": "yes" if spec.needs_model else "no"},
    )
    # `context` stays unannotated: Dagster compares the raw annotation object, which
    # `from __future__ import annotations` turns into a string it rejects.
    def stage_asset(context, stash: StashResource) -> dg.MaterializeResult:  # type: ignore[no-untyped-def]
        slug = namespace_slug(context.partition_key)
        with stash.open_store() as store:
            report = run_or_fail(store, slug, spec.name, context.run.run_id)
            return dg.MaterializeResult(
                metadata={**report.metadata(), "status": report.status, "message": report.message},
                check_results=checks.check_results(spec, report, store, slug),
            )

    return stage_asset


def build_stage_assets(*, retry_policy: dg.RetryPolicy | None = RETRY_POLICY) -> list[dg.AssetsDefinition]:
    return [build_stage_asset(spec, retry_policy=retry_policy) for spec in STAGES]


stage_assets = build_stage_assets()
STAGE_KEYS: dict[str, dg.AssetKey] = {spec.name: dg.AssetKey(spec.name) for spec in STAGES}
