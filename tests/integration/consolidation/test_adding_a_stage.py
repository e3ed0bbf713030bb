"""Adding a stage is one ``STAGES`` entry (plus its module): everything else follows.

The test copies the package, adds one entry (and ``stages/echo.py``) to the copy's stage
table, and asks a fresh interpreter running the copy about every place that reads the
table: the Dagster asset, its checks and dependencies, the watermark sensor, the rebuild
job, the code version (with the entry's prompts in it), the backlog query, the dry-run
plan (items per call), a rebuild preview — against a real database — and the
``consolidate`` operation's ``stage`` argument. Nothing else is
edited, so a second list of stages anywhere would show up here as a missing stage.
"""

from __future__ import annotations

from pathlib import Path

from tests.support.package_copy import copy_package, run_probe

ENTRY = '''    StageSpec("echo", "Echo new facts (a stage added by a test).", echo.run, ("facts", "relationships"), "facts",
              prompts=((prompts.PATTERNS, prompts.PatternsAnswer),), items_per_call=lambda settings: 4,
              outputs=("pattern",), rebuild_query="rebuild_withdraw_patterns"),
'''

MODULE = '''"""A stage that reads its batch and writes nothing (added by a test)."""

from __future__ import annotations


def run(ctx):
    return None
'''

PROBE = r'''
import json, os, sys, warnings
import dagster as dg
warnings.simplefilter("ignore")
from stash_pipeline.config import load_settings
from stash_pipeline.consolidation.plan import plan
from stash_pipeline.consolidation.rebuild import rebuild
from stash_pipeline.defs.definitions import build_definitions
from stash_pipeline.defs.sensors import WATERMARK_STAGES, watermark_sensor
from stash_pipeline.memory import namespaces
from stash_pipeline.operations.consolidation import CONSOLIDATE
from stash_pipeline.stages import REBUILDABLE, STAGE_NAMES, backlog_parameters, get_stage, prompts
from stash_pipeline.stages.versions import code_version, version_inputs
from stash_pipeline.store import Store

defs = build_definitions(model="m")
with dg.instance_for_test():
    graph = defs.resolve_asset_graph()
asset = defs.resolve_assets_def("echo")
spec = get_stage("echo")
store = Store.open(load_settings(database_url=os.environ["PROBE_DSN"], embedder="hash"))
namespaces.create(store, "/echo")
out = {
    "module": __import__("stash_pipeline").__file__,
    "names": list(STAGE_NAMES),
    "parents": sorted(k.to_user_string() for k in graph.get(dg.AssetKey("echo")).parent_keys),
    "checks": sorted(k.name for k in asset.check_keys),
    "pool": asset.op.pool,
    "watermark": "echo" in WATERMARK_STAGES,
    "sensor_targets_it": dg.AssetKey("echo") in watermark_sensor.targets[0].job_def.selection.resolve(graph),
    "rebuildable": list(REBUILDABLE),
    "rebuild_job": defs.resolve_job_def("rebuild_echo").name,
    "version_prompts": [p["system"] for p in version_inputs(spec, "m")["prompts"]] == [prompts.PATTERNS],
    "version": code_version(spec, "m"),
    "backlog_stages": backlog_parameters()["stages"],
    "backlog_rows": [r["stage"] for r in store.db.all("stage_backlog", **backlog_parameters())],
    "plan": [r for r in plan(store, "/echo") if r["stage"] == "echo"],
    "rebuild": [r.to_json() for r in rebuild(store, "/echo", "echo", apply=False)],
    "consolidate_stage": CONSOLIDATE.arguments.model_json_schema()["properties"]["stage"]["description"],
    "consolidate_accepts": CONSOLIDATE.parse({"stage": "echo"}).stage,
}
store.close()
print(json.dumps(out))
'''


def test_one_entry_adds_a_stage_everywhere(tmp_path: Path, database_url: str) -> None:
    copy = copy_package(tmp_path)
    table = copy / "stages" / "__init__.py"
    text = table.read_text()
    decay = '    StageSpec("decay",'
    assert decay in text and "    relationships,\n)" in text
    text = text.replace(decay, ENTRY + decay, 1).replace("    relationships,\n)", "    echo,\n    relationships,\n)", 1)
    table.write_text(text)
    (copy / "stages" / "echo.py").write_text(MODULE)

    out = run_probe(tmp_path, PROBE, database_url)
    assert out["names"][-2:] == ["echo", "decay"]
    assert out["parents"] == ["facts", "relationships"]
    assert out["checks"] == ["lineage_complete", "no_item_errors"]
    assert out["pool"] == "model"
    assert out["watermark"] and out["sensor_targets_it"]
    assert "echo" in out["rebuildable"] and out["rebuild_job"] == "rebuild_echo"
    assert out["version_prompts"] and out["version"].startswith("v1-")
    assert "echo" in out["backlog_stages"] and "echo" in out["backlog_rows"]
    (row,) = out["plan"]
    assert row["items_per_call"] == 4 and row["action"] == "idle"
    (preview,) = out["rebuild"]
    assert preview["stage"] == "echo" and preview["status"] == "preview"
    # the consolidate tool and `stash consolidate run` offer it (its schema names it, its model takes it)
    assert "profiles, echo, decay." in out["consolidate_stage"] and out["consolidate_accepts"] == "echo"
