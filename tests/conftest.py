"""Test-wide setup: an offline, key-free environment and a guard against non-loopback connections.

Applied at import, before nbval starts any kernel, so notebooks executed by `pytest --nbval` run
exactly as .ci/execute_notebooks.py ran them when their outputs were saved (see offline_env.py).
Also 06_rag's corpus and library, shared by test_rag and test_labs (built once per session).
"""

import pytest

import kernels
import offline_env

offline_env.apply()
kernels.install()  # nbval's kernels: one that dies while starting is started again


@pytest.fixture(autouse=True)
def progress_in_tmp(tmp_path, monkeypatch):
    """labkit.check records passed tasks: a test writes them in its tmp dir, never in .runtime/."""
    monkeypatch.setenv("LABKIT_PROGRESS", str(tmp_path / "progress.json"))


@pytest.fixture(scope="session")
def docs():
    from labkit.rag import load_corpus

    return load_corpus()


@pytest.fixture(scope="session")
def chunks(docs):
    from labkit.rag import chunk_corpus

    return chunk_corpus(docs)


@pytest.fixture(scope="session")
def minilm():
    from labkit.embed import MiniLM

    return MiniLM()


@pytest.fixture(scope="session")
def library(chunks, minilm, tmp_path_factory):
    from labkit.rag import Library

    return Library(chunks, embedder=minilm, cache_dir=tmp_path_factory.mktemp("emb"))
