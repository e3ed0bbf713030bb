"""The all-MiniLM-L6-v2 encoder written as an ONNX graph from the bundled weights.

No exported model file ships anywhere Stash can download it from, so the graph is built
here, node by node with the ``onnx`` helper API, from the same ``model.safetensors`` the
numpy forward pass reads (``minilm.py`` documents the architecture). The graph computes
exactly that forward pass:

* inputs ``input_ids`` and ``attention_mask``, both int64 (batch, tokens);
* word + position + token-type embeddings, LayerNorm (eps 1e-12);
* 6 layers: fused query/key/value matmul, 12 heads of 32, softmax with padded keys at
  -1e9, output projection, residual + LayerNorm, erf GELU feed-forward, residual +
  LayerNorm;
* mean pooling over real tokens, L2 normalisation; output ``embedding`` (batch, 384).

ONNX Runtime's graph optimiser fuses the LayerNorm, GELU and bias patterns itself.
``quantized`` turns the result into int8 weights with dynamic activation quantisation
(``onnxruntime.quantization.quantize_dynamic``): about a quarter of the weight bytes and
faster matmuls, for vectors that differ slightly from the float ones. The quantiser's
advice to pre-process the graph first is not passed on (``_NoPreprocessingAdvice``).
"""

from __future__ import annotations

import contextlib
import logging
import tempfile
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import numpy as np

OPSET = 17
_LAYERS = 6
_HEADS = 12
_HEAD_DIM = 32
_HIDDEN = 384
_LN_EPS = 1e-12


def build(weights_path: Path) -> bytes:
    """The serialised float32 ONNX model for the safetensors file at ``weights_path``."""
    import onnx
    import safetensors.numpy
    from onnx import TensorProto, helper, numpy_helper

    w = {k: v.astype(np.float32, copy=False) for k, v in safetensors.numpy.load_file(str(weights_path)).items()}
    nodes: list[Any] = []
    initializers: list[Any] = []

    def const(name: str, value: np.ndarray) -> str:
        # np.ascontiguousarray would turn a 0-d scalar into shape (1,); Gather needs the scalar.
        initializers.append(numpy_helper.from_array(np.array(value, order="C"), name))
        return name

    def node(op: str, inputs: list[str], output: str, **attrs: Any) -> str:
        nodes.append(helper.make_node(op, inputs, [output], **attrs))
        return output

    def linear(x: str, weight: np.ndarray, bias: np.ndarray, name: str) -> str:
        product = node("MatMul", [x, const(name + ".w", weight)], name + ".mm")
        return node("Add", [product, const(name + ".b", bias)], name)

    def layer_norm(x: str, prefix: str, name: str) -> str:
        return node(
            "LayerNormalization",
            [x, const(name + ".g", w[prefix + ".weight"]), const(name + ".beta", w[prefix + ".bias"])],
            name,
            axis=-1,
            epsilon=_LN_EPS,
        )

    # Shapes and scalars shared by every layer.
    const("c.zero", np.array([0], dtype=np.int64))
    const("c.axis0", np.array([0], dtype=np.int64))
    const("c.axis1", np.array([1], dtype=np.int64))
    const("c.axis2", np.array([2], dtype=np.int64))
    const("c.axes12", np.array([1, 2], dtype=np.int64))
    const("c.qkv_shape", np.array([0, 0, 3, _HEADS, _HEAD_DIM], dtype=np.int64))
    const("c.hidden_shape", np.array([0, 0, _HIDDEN], dtype=np.int64))
    const("c.one", np.array(1.0, dtype=np.float32))
    const("c.half", np.array(0.5, dtype=np.float32))
    const("c.neg_big", np.array(-1e9, dtype=np.float32))
    const("c.inv_sqrt2", np.array(1.0 / np.sqrt(2.0), dtype=np.float32))
    const("c.scale", np.array(1.0 / np.sqrt(_HEAD_DIM), dtype=np.float32))
    const("c.tiny", np.array(1e-9, dtype=np.float32))
    for i in range(3):
        const(f"c.index{i}", np.array(i, dtype=np.int64))

    # Embeddings: word + position (first `tokens` rows) + token type 0.
    word = node("Gather", [const("emb.word", w["embeddings.word_embeddings.weight"]), "input_ids"], "emb.words")
    tokens = node("Shape", ["input_ids"], "emb.tokens", start=1, end=2)
    positions = node(
        "Slice", [const("emb.position", w["embeddings.position_embeddings.weight"]), "c.zero", tokens, "c.axis0"],
        "emb.positions",
    )
    summed = node("Add", [word, positions], "emb.sum1")
    summed = node("Add", [summed, const("emb.type0", w["embeddings.token_type_embeddings.weight"][0])], "emb.sum2")
    x = layer_norm(summed, "embeddings.LayerNorm", "emb.ln")

    # Padded keys get -1e9 before the softmax, so they weigh exactly 0.
    mask = node("Cast", ["attention_mask"], "mask.f", to=TensorProto.FLOAT)
    inverted = node("Sub", ["c.one", mask], "mask.inv")
    bias = node("Mul", [inverted, "c.neg_big"], "mask.bias2d")
    bias = node("Unsqueeze", [bias, "c.axes12"], "mask.bias")

    for i in range(_LAYERS):
        p = f"encoder.layer.{i}."
        att = p + "attention.self."
        n = f"l{i}"
        qkv_w = np.concatenate([w[att + k + ".weight"] for k in ("query", "key", "value")]).T
        qkv_b = np.concatenate([w[att + k + ".bias"] for k in ("query", "key", "value")])
        qkv = linear(x, qkv_w, qkv_b, n + ".qkv")
        qkv = node("Reshape", [qkv, "c.qkv_shape"], n + ".qkv5")
        q = node("Gather", [qkv, "c.index0"], n + ".q4", axis=2)
        k = node("Gather", [qkv, "c.index1"], n + ".k4", axis=2)
        v = node("Gather", [qkv, "c.index2"], n + ".v4", axis=2)
        q = node("Transpose", [q], n + ".q", perm=[0, 2, 1, 3])
        k = node("Transpose", [k], n + ".k", perm=[0, 2, 3, 1])
        v = node("Transpose", [v], n + ".v", perm=[0, 2, 1, 3])
        scores = node("MatMul", [q, k], n + ".scores")
        scores = node("Mul", [scores, "c.scale"], n + ".scaled")
        scores = node("Add", [scores, bias], n + ".masked")
        probs = node("Softmax", [scores], n + ".probs", axis=-1)
        context = node("MatMul", [probs, v], n + ".context4")
        context = node("Transpose", [context], n + ".context_t", perm=[0, 2, 1, 3])
        context = node("Reshape", [context, "c.hidden_shape"], n + ".context")
        out = linear(
            context, w[p + "attention.output.dense.weight"].T, w[p + "attention.output.dense.bias"], n + ".attn_out"
        )
        out = node("Add", [out, x], n + ".attn_res")
        x = layer_norm(out, p + "attention.output.LayerNorm", n + ".ln1")
        hidden = linear(x, w[p + "intermediate.dense.weight"].T, w[p + "intermediate.dense.bias"], n + ".ff1")
        # BERT's GELU is the exact erf form: 0.5 * h * (1 + erf(h / sqrt 2)).
        erf = node("Erf", [node("Mul", [hidden, "c.inv_sqrt2"], n + ".gelu_in")], n + ".gelu_erf")
        gate = node("Mul", [node("Add", [erf, "c.one"], n + ".gelu_plus"), "c.half"], n + ".gelu_gate")
        hidden = node("Mul", [hidden, gate], n + ".gelu")
        out = linear(hidden, w[p + "output.dense.weight"].T, w[p + "output.dense.bias"], n + ".ff2")
        out = node("Add", [out, x], n + ".ff_res")
        x = layer_norm(out, p + "output.LayerNorm", n + ".ln2")

    # Mean over real tokens, then unit length.
    weights = node("Unsqueeze", [mask, "c.axis2"], "pool.weights")
    total = node("ReduceSum", [node("Mul", [x, weights], "pool.masked"), "c.axis1"], "pool.sum", keepdims=0)
    count = node("ReduceSum", [weights, "c.axis1"], "pool.count", keepdims=0)
    pooled = node("Div", [total, node("Max", [count, "c.tiny"], "pool.count_safe")], "pool.mean")
    node("LpNormalization", [pooled], "embedding", axis=-1, p=2)

    graph = helper.make_graph(
        nodes,
        "all-MiniLM-L6-v2",
        [
            helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "tokens"]),
            helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "tokens"]),
        ],
        [helper.make_tensor_value_info("embedding", TensorProto.FLOAT, ["batch", _HIDDEN])],
        initializers,
    )
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="stash")
    model.ir_version = 8
    onnx.checker.check_model(model)
    return model.SerializeToString()


def quantized(model_bytes: bytes) -> bytes:
    """``model_bytes`` with int8 weights and dynamically quantised activations.

    Only the matmuls are quantised, one scale per output channel (a single scale per
    matrix drifted to cosine 0.98 from the float vectors, per channel 0.993); the
    word-embedding table stays float so a token's lookup is exact. ``quantize_dynamic`` works on files, hence the temporary directory.
    """
    from onnxruntime.quantization import QuantType, quantize_dynamic

    with tempfile.TemporaryDirectory(prefix="stash-onnx-") as tmp, _without_preprocessing_advice():
        source, target = Path(tmp) / "model.onnx", Path(tmp) / "model-int8.onnx"
        source.write_bytes(model_bytes)
        quantize_dynamic(
            source, target, weight_type=QuantType.QInt8, per_channel=True, op_types_to_quantize=["MatMul"]
        )
        return target.read_bytes()


class _NoPreprocessingAdvice(logging.Filter):
    """Drops the quantiser's "Please consider to run pre-processing before quantization".

    The advice is about the quantisation tool's input (shape inference and graph
    optimisation of an exported model); the graph quantised here is the one ``build``
    writes, whose shapes and quantised vectors the tests check. Nobody who sees it at a
    first start can act on it. Every other record passes.
    """

    def filter(self, record: logging.LogRecord) -> bool:
        return not str(record.msg).startswith(("Please consider to run pre-processing", "Please consider pre-processing"))


@contextlib.contextmanager
def _without_preprocessing_advice() -> Iterator[None]:
    """The quantiser logs through the root logger's module functions (``logging.warning``):
    the filter sits on the root logger meanwhile. A root logger without handlers borrows
    ``logging.lastResort`` (what would print a warning anyway), so the quantiser's call does
    not set up logging for the whole process (``logging.basicConfig``) as a side effect."""
    root = logging.getLogger()
    advice = _NoPreprocessingAdvice()
    borrowed = logging.lastResort if not root.handlers and logging.lastResort is not None else None
    root.addFilter(advice)
    if borrowed is not None:
        root.addHandler(borrowed)
    try:
        yield
    finally:
        if borrowed is not None:
            root.removeHandler(borrowed)
        root.removeFilter(advice)
