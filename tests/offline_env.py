"""The environment every test and every committed notebook output is made in, and the network guard.

Shared by tests/conftest.py and notebooks/conftest.py (pytest, and the nbval kernels that inherit
its
environment) and by .ci/execute_notebooks.py (which writes the outputs nbval later compares), so the
two can never drift apart.
"""

import ipaddress
import os
import socket

# Variables that would change what a notebook prints or where it connects.
CLEARED = (
    "OPENAI_API_KEY",
    "OPENAI_MODEL",
    "OPENAI_BASE_URL",
    "LABKIT_BASE_URL",
    "LABKIT_API",
    "LABKIT_API_KEY",
    "LABKIT_PROVIDER",
    "LABKIT_CASSETTE_DIR",
    "DEEPSEEK_API_KEY",
    "DASHSCOPE_API_KEY",
    "OPENROUTER_API_KEY",
    "LABKIT_TIMEOUT",
    "LABKIT_MAX_RETRIES",
    "OPENAI_ORG_ID",
    "OPENAI_PROJECT_ID",
)

OFFLINE_ENV = {
    "LABKIT_MODE": "offline",
    "LABKIT_ENV_FILE": "none",  # your own .env never changes what CI compares
    "HF_HUB_OFFLINE": "1",  # model weights come from installed packages only
    "TRANSFORMERS_OFFLINE": "1",
    "TOKENIZERS_PARALLELISM": "false",
    "TQDM_DISABLE": "1",  # no progress bars in outputs
    "PYTHONHASHSEED": "0",
    # subtle: any HTTP client that honours proxies (httpx, requests) fails fast instead of
    # reaching the internet from a notebook kernel; loopback stays direct for the fake server.
    "HTTP_PROXY": "http://127.0.0.1:9",
    "HTTPS_PROXY": "http://127.0.0.1:9",
    "ALL_PROXY": "http://127.0.0.1:9",
    "NO_PROXY": "127.0.0.1,localhost,::1",
}


def offline_environ(base=None):
    """A copy of `base` (default os.environ) made offline and key-free. LABKIT_MODE=replay is
    kept: a cassette answers, with no key and no network (`LABKIT_MODE=replay pytest ...`)."""
    base = os.environ if base is None else base
    env = {k: v for k, v in base.items() if k not in CLEARED}
    for name in list(env):
        if name.lower() in ("http_proxy", "https_proxy", "all_proxy", "no_proxy"):
            del env[name]
    env.update(OFFLINE_ENV)
    if (base.get("LABKIT_MODE") or "").strip().lower() == "replay":
        env["LABKIT_MODE"] = "replay"
    return env


def apply():
    """Make this process offline and key-free (kernels it starts inherit that) and guard its
    sockets."""
    env = offline_environ()
    os.environ.clear()
    os.environ.update(env)
    install_network_guard()


class NetworkBlocked(RuntimeError):
    """A test tried to reach a machine other than this one."""


def _is_loopback(host):
    if host is None or host in ("", b""):
        return True
    if isinstance(host, bytes):
        host = host.decode()
    if host in ("localhost", "ip6-localhost"):
        return True
    try:
        return ipaddress.ip_address(host.split("%")[0]).is_loopback
    except ValueError:
        return False


def _refuse_remote(sock, address):
    host = address[0] if isinstance(address, tuple) else None  # AF_UNIX paths are local
    if sock.family in (socket.AF_INET, socket.AF_INET6) and not _is_loopback(host):
        raise NetworkBlocked(f"tests may only connect to 127.0.0.1; this one tried {address!r}")


def install_network_guard():
    """Refuse every connection and name lookup that is not loopback, in this process. Idempotent."""
    if getattr(socket.socket.connect, "labkit_guard", False):
        return
    real_connect, real_connect_ex, real_getaddrinfo = (
        socket.socket.connect,
        socket.socket.connect_ex,
        socket.getaddrinfo,
    )

    def connect(self, address):
        _refuse_remote(self, address)
        return real_connect(self, address)

    def connect_ex(self, address):
        _refuse_remote(self, address)
        return real_connect_ex(self, address)

    def getaddrinfo(host, *args, **kwargs):
        if not _is_loopback(host):
            raise NetworkBlocked(
                f"tests may only resolve loopback names; this one asked for {host!r}"
            )
        return real_getaddrinfo(host, *args, **kwargs)

    connect.labkit_guard = True
    socket.socket.connect, socket.socket.connect_ex, socket.getaddrinfo = (
        connect,
        connect_ex,
        getaddrinfo,
    )
