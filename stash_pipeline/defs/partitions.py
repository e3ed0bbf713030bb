"""One dynamic partition per namespace, keyed by the namespace slug itself.

Dagster forbids ``...`` and control characters in partition keys
(``dagster._core.definitions.partitions.utils.base.INVALID_PARTITION_SUBSTRINGS``); a
namespace slug is ``/`` or ``(/[a-z0-9][a-z0-9_-]{0,63})+`` (enforced by a CHECK in the
schema), so it can contain neither and ``/`` is an ordinary character for Dagster. The
key is therefore the slug, unchanged: what the UI shows is what an agent wrote. The two
helpers below are the one place that mapping lives, should it ever need an encoding.
"""

from __future__ import annotations

import dagster as dg

NAMESPACES = "namespaces"

namespaces_partitions = dg.DynamicPartitionsDefinition(name=NAMESPACES)

#: Tag Dagster puts on every single-partition run; dagster.yaml limits it to one run per value.
PARTITION_TAG = "dagster/partition"
#: Tags of a run over a range of partitions (Dagster's own, as set by single-run backfills).
RANGE_START_TAG = "dagster/asset_partition_range_start"
RANGE_END_TAG = "dagster/asset_partition_range_end"


def partition_key(slug: str) -> str:
    """The partition key of a namespace slug."""
    return slug


def namespace_slug(key: str) -> str:
    """The namespace slug of a partition key."""
    return key
