"""Stage code versions: a digest of everything that decides what a stage writes.

``code_version(spec, model)`` hashes the stage's prompts (``StageSpec.prompts``: the
system text and the JSON schema of each answer it asks the model for; the runner lets a
stage send no other), the model name and the stage's
``logic_version`` (bumped by hand when its Python logic changes what it writes). Change
any of them and the version changes, so Dagster marks every materialized partition of
that stage as unsynced ("code version changed") until it is rebuilt.

SQL-only stages have no prompt and no model: their version is their logic version alone.
"""

from __future__ import annotations

import hashlib
import json
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from stash_pipeline.stages import StageSpec

#: Length of the hex digest shown in the UI: short enough to read, long enough never to collide.
DIGEST_CHARS = 12


def version_inputs(spec: StageSpec, model: str | None) -> dict[str, object]:
    """What the version is a digest of (also useful to show why two versions differ)."""
    return {
        "stage": spec.name,
        "logic_version": spec.logic_version,
        "model": model if spec.needs_model else None,
        "prompts": [
            {"system": system, "schema": schema.model_json_schema()} for system, schema in spec.prompts
        ],
    }


def code_version(spec: StageSpec, model: str | None) -> str:
    """``v<logic version>-<digest>``: changes with the prompts, schemas, model or logic version."""
    payload = json.dumps(version_inputs(spec, model), sort_keys=True, default=str)
    digest = hashlib.sha256(payload.encode()).hexdigest()[:DIGEST_CHARS]
    return f"v{spec.logic_version}-{digest}"
