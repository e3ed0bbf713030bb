"""``stash recall``: facts and episodes together, best first.

Derived from ``stash_pipeline.operations.recall``: the command answers what the tool
does; ``--json`` prints its ``results`` list, the table one row per result.
"""

from __future__ import annotations

from typing import Any

from stash_pipeline.operations import recall as ops
from stash_serve.cli.derive import command
from stash_serve.cli.output import show


def _results(result: Any, as_json: bool, args: Any) -> None:
    show(result["results"], as_json, ops.RECALL.cli.columns)  # type: ignore[union-attr]


recall_command = command(ops.RECALL, render=_results)

COMMANDS = (recall_command,)
