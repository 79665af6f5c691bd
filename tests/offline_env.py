"""The environment every test and every committed notebook output is made in.

Shared by tests/conftest.py (pytest + nbval kernels inherit it) and .ci/execute_notebooks.py
(which writes the outputs nbval later compares), so the two can never drift apart.
"""
import os

# Variables that would change what a notebook prints or where it connects.
CLEARED = ("OPENAI_API_KEY", "OPENAI_MODEL", "OPENAI_BASE_URL", "LABKIT_BASE_URL", "LABKIT_API",
           "LABKIT_API_KEY", "LABKIT_TIMEOUT", "LABKIT_MAX_RETRIES", "OPENAI_ORG_ID", "OPENAI_PROJECT_ID")

OFFLINE_ENV = {
    "LABKIT_MODE": "offline",
    "LABKIT_ENV_FILE": "none",          # your own .env never changes what CI compares
    "HF_HUB_OFFLINE": "1",              # model weights come from installed packages only
    "TRANSFORMERS_OFFLINE": "1",
    "TOKENIZERS_PARALLELISM": "false",
    "TQDM_DISABLE": "1",                # no progress bars in outputs
    "PYTHONHASHSEED": "0",
    # subtle: any HTTP client that honours proxies (httpx, requests) fails fast instead of
    # reaching the internet from a notebook kernel; loopback stays direct for the fake server.
    "HTTP_PROXY": "http://127.0.0.1:9",
    "HTTPS_PROXY": "http://127.0.0.1:9",
    "ALL_PROXY": "http://127.0.0.1:9",
    "NO_PROXY": "127.0.0.1,localhost,::1",
}


def offline_environ(base=None):
    """A copy of `base` (default os.environ) made offline and key-free."""
    env = {k: v for k, v in (os.environ if base is None else base).items() if k not in CLEARED}
    for name in list(env):
        if name.lower() in ("http_proxy", "https_proxy", "all_proxy", "no_proxy"):
            del env[name]
    env.update(OFFLINE_ENV)
    return env
