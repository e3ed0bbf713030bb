"""Asset checks, emitted from each stage asset's body (``check_specs`` on the asset).

* ``no_item_errors`` on every stage: WARN when the run saw failed or dead-lettered items.
  "Completed with errors" means the stage succeeded for the good items (its cursor
  advanced) and tells the operator to look at ``dead_letters``; downstream stages are not
  blocked.
* ``lineage_complete`` on the stages whose rows must point at their sources (those whose
  ``outputs`` in ``STAGES`` include a kind ``dagster_lineage_orphans`` counts,
  ``LINEAGE_KINDS``): WARN when a derived row of such a kind in the namespace has no
  lineage parent — every derived row must be traceable to what it came
  from. Asserted facts and links are the agent's own words and are exempt.

Both are partitioned by namespace, so the UI shows them per partition. Partitioned
check specs are a preview feature in Dagster 1.13 (``PreviewWarning``); the numbers are
also in the materialization metadata, which is the stable record.
"""

from __future__ import annotations

import warnings

import dagster as dg

from stash_pipeline.defs.partitions import namespaces_partitions
from stash_pipeline.stages import StageReport, StageSpec
from stash_pipeline.store import Store

ITEM_CHECK = "no_item_errors"
LINEAGE_CHECK = "lineage_complete"
#: the derived kinds the ``dagster_lineage_orphans`` query counts (one column each)
LINEAGE_KINDS = ("fact", "relationship", "pattern", "causal_link")


def lineage_kinds(spec: StageSpec) -> list[str]:
    """The stage's output kinds that ``lineage_complete`` checks."""
    return [kind for kind in spec.outputs if kind in LINEAGE_KINDS]


def check_specs(spec: StageSpec) -> list[dg.AssetCheckSpec]:
    """The checks a stage asset declares (and must emit on every materialization)."""
    # Partitioned checks are "preview" in 1.13; accepted knowingly (see the module docstring),
    # so the warning is not repeated on every import of the code location.
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", dg.PreviewWarning)
        return _check_specs(spec)


def _check_specs(spec: StageSpec) -> list[dg.AssetCheckSpec]:
    checks = [
        dg.AssetCheckSpec(
            ITEM_CHECK,
            asset=spec.name,
            partitions_def=namespaces_partitions,
            description="Warns when items failed or were dead-lettered in this run (see dead_letters).",
        )
    ]
    kinds = lineage_kinds(spec)
    if kinds:
        checks.append(
            dg.AssetCheckSpec(
                LINEAGE_CHECK,
                asset=spec.name,
                partitions_def=namespaces_partitions,
                description=f"Every derived {' / '.join(kinds)} of the namespace has at least one lineage parent.",
            )
        )
    return checks


def check_results(spec: StageSpec, report: StageReport, store: Store, slug: str) -> list[dg.AssetCheckResult]:
    """Results for every check ``check_specs(spec)`` declared."""
    results = [
        dg.AssetCheckResult(
            check_name=ITEM_CHECK,
            passed=report.items_failed == 0 and report.dead_lettered == 0,
            severity=dg.AssetCheckSeverity.WARN,
            metadata={"items_failed": report.items_failed, "dead_lettered": report.dead_lettered},
        )
    ]
    kinds = lineage_kinds(spec)
    if kinds:
        row = store.db.one("dagster_lineage_orphans", slug=slug) or {}
        orphans = sum(int(row.get(kind) or 0) for kind in kinds)
        results.append(
            dg.AssetCheckResult(
                check_name=LINEAGE_CHECK,
                passed=orphans == 0,
                severity=dg.AssetCheckSeverity.WARN,
                metadata={"orphans": orphans, "kind": ", ".join(kinds)},
            )
        )
    return results
