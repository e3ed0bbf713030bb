"""The backlog path for episodes waiting for their vector: the sensor and the asset."""

from __future__ import annotations

from typing import Any

import dagster as dg
from dagster._core.test_utils import create_run_for_test

from stash_pipeline.defs import embeddings
from stash_pipeline.defs.embeddings import episode_embeddings, pending_vectors_sensor
from stash_pipeline.defs.resources import StashResource
from stash_pipeline.memory import episodes, namespaces
from stash_pipeline.memory.pending import backlog


def _tick(instance: dg.DagsterInstance, stash: StashResource) -> Any:
    return pending_vectors_sensor(dg.build_sensor_context(instance=instance, resources={"stash": stash}))


def test_sensor_waits_for_the_grace_then_the_asset_embeds_everything(
    make_store: Any, instance: dg.DagsterInstance, stash: StashResource, monkeypatch: Any
) -> None:
    assert isinstance(_tick(instance, stash), dg.SkipReason)  # nothing waits
    store = make_store(embed_on_write="async")
    namespaces.create(store, "/p")
    episodes.remember_batch(store, "/p", [{"content": f"waiting row {i}"} for i in range(3)])
    young = _tick(instance, stash)
    assert isinstance(young, dg.SkipReason) and "a service worker takes them" in (young.skip_message or "")

    monkeypatch.setattr(embeddings, "GRACE_S", 0)  # as if they had waited past the grace
    request = _tick(instance, stash)
    assert isinstance(request, dg.RunRequest) and request.run_key

    # one run at a time: while one runs, the sensor asks for no other
    queued = create_run_for_test(instance, job_name="embed_pending_episodes", status=dg.DagsterRunStatus.STARTED)
    busy = _tick(instance, stash)
    assert isinstance(busy, dg.SkipReason) and "already queued or running" in (busy.skip_message or "")
    instance.delete_run(queued.run_id)

    result = dg.materialize([episode_embeddings], instance=instance, resources={"stash": stash})
    assert result.success
    metadata = result.asset_materializations_for_node("episode_embeddings")[0].metadata
    assert (metadata["embedded"].value, metadata["still_pending"].value) == (3, 0)
    assert backlog(store).pending == 0
    assert isinstance(_tick(instance, stash), dg.SkipReason)
