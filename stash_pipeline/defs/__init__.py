"""The Dagster layer: a thin declaration of partitions, resources, assets, sensors, schedules, checks, jobs.

No stage logic lives here: an asset body opens the ``Store`` through
``StashResource``, calls ``stash_pipeline.consolidation.runner.run_stage`` and maps the
``StageReport`` to a ``MaterializeResult``. Everything is generated from the stage table
``stash_pipeline.stages.STAGES``: stage code versions (``stages/versions.py``), the
rebuild jobs (``jobs.py``, calling ``stash_pipeline.consolidation.rebuild``), the watermark sensor that
also reports episode heads as ``episodes`` data versions (``episodes.py``). The code
location is ``stash_pipeline.defs.definitions`` (see ``workspace.yaml`` and
``docs/dagster.md``).
"""
