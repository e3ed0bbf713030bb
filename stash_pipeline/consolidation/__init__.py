"""Consolidation around the stage table: running stages, planning, rebuilding, the model.

One module per role; this package face imports nothing, so the stage modules can use
the reasoner without pulling in the runner that calls them:

* ``runner`` — ``run_stage`` / ``run_all`` / ``run_tree`` / ``status``: the one entry
  point Dagster, the CLI and MCP call (lock, checkpoint, report);
* ``plan`` — what a run would do now (items waiting, model calls), without doing it;
* ``rebuild`` — withdraw what one stage derived in a namespace and rewind its cursor;
* ``dead_letters`` — list, retry or drop the items a stage gave up on;
* ``reasoner`` — OpenAI-compatible structured calls, tolerant parsing, the ledger;
* ``model_server`` — what the reasoner needs to live with real model servers
  (structured-output modes remembered per endpoint + model, output budgets, slots);
* ``probe`` — the one tiny model call ``stash doctor`` makes.

The stages themselves live in ``stash_pipeline.stages`` (the table and one module each).
"""
