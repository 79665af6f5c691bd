"""06_rag beside faiss: IndexFlatIP next to labkit's exact cosine top-k.

Outside the lessons (see labkit.labs).
"""


# ------------------------------------------------------ 06_rag: exact search beside faiss


def faiss_index(vectors):
    """faiss IndexFlatIP (exact inner product) over the unit-length rows: cosine, as faiss does it.

    Example: index = faiss_index(library.vectors); faiss_top_k(index, query_vector, 5)
    """
    import faiss
    import torch
    import torch.nn.functional as F

    unit = F.normalize(torch.as_tensor(vectors, dtype=torch.float32), dim=1)  # faiss expects unit
    index = faiss.IndexFlatIP(unit.shape[1])
    index.add(unit.numpy())
    return index


def faiss_top_k(index, query, k: int) -> list:
    """The k best rows of a faiss index, in embed.cosine_top_k's shape: [(row, similarity), ...].

    Example: faiss_top_k(faiss_index(vectors), vectors[0], 1)  ->  [(0, 1.0)]
    """
    import torch
    import torch.nn.functional as F

    query = torch.as_tensor(query, dtype=torch.float32)
    single = query.ndim == 1
    scores, rows = index.search(F.normalize(query.reshape(-1, index.d), dim=1).numpy(), k)
    found = [
        [(r, s) for r, s in zip(row, score, strict=True) if r >= 0]  # -1: fewer than k rows
        for row, score in zip(rows.tolist(), scores.tolist(), strict=True)
    ]
    return found[0] if single else found
