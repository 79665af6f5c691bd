"""Where a model can be reached: the provider presets (LABKIT_PROVIDER), the key variable each
one's key is in, and URLs shown with their credentials masked.

Built in 01_setup for labkit.config, which picks one preset from the settings. Plain data: it
imports nothing of labkit, so errors and keys can name an endpoint without loading the settings.
"""

from dataclasses import dataclass

DEFAULT_MODEL = "gpt-5-mini"  # the one default; override with OPENAI_MODEL
OFFICIAL_BASE_URL = "https://api.openai.com/v1"
TIMEOUT_SECONDS = 30.0  # per request; no silent retries unless asked


@dataclass(frozen=True, kw_only=True)
class Provider:
    """An endpoint preset: where it is, which API it speaks, and the one variable its key is in."""

    name: str
    base_url: str
    api: str = "chat"
    key_name: str = "LABKIT_API_KEY"  # its key goes to this base_url and nowhere else
    model: str | None = None  # the default model name; None: OPENAI_MODEL must name one
    server: str  # how a cassette's label names the server
    timeout: float = TIMEOUT_SECONDS  # per request, unless LABKIT_TIMEOUT says otherwise
    max_output_tokens: int | None = None  # each reply's cap when connect() is given none


LOCAL_PORT = 8011  # `make local-model` serves SmolLM2-135M-Instruct here
PRESETS = (
    Provider(
        name="openai",
        base_url=OFFICIAL_BASE_URL,
        api="responses",
        key_name="OPENAI_API_KEY",
        model=DEFAULT_MODEL,
        server="OpenAI API",
    ),
    Provider(
        name="local",
        base_url=f"http://127.0.0.1:{LOCAL_PORT}/v1",
        model="SmolLM2-135M-Instruct",
        server="llama.cpp, local: a tiny real model",
        timeout=300.0,  # 2 shared cores: a long reply or a prompt with tools can take minutes
        max_output_tokens=512,  # a tiny model may ramble on until its context (8192 tokens) is full
    ),
    Provider(name="ollama", base_url="http://127.0.0.1:11434/v1", server="Ollama"),
    Provider(name="vllm", base_url="http://127.0.0.1:8000/v1", server="vLLM"),
    Provider(name="lmstudio", base_url="http://127.0.0.1:1234/v1", server="LM Studio"),
    Provider(name="llamacpp", base_url="http://127.0.0.1:8080/v1", server="llama.cpp server"),
    Provider(
        name="deepseek",
        base_url="https://api.deepseek.com/v1",
        key_name="DEEPSEEK_API_KEY",
        model="deepseek-chat",
        server="DeepSeek API",
    ),
    Provider(
        name="dashscope",
        base_url="https://dashscope.aliyuncs.com/compatible-mode/v1",
        key_name="DASHSCOPE_API_KEY",
        model="qwen-plus",
        server="DashScope (Qwen) API",
    ),
    Provider(
        name="openrouter",
        base_url="https://openrouter.ai/api/v1",
        key_name="OPENROUTER_API_KEY",
        server="OpenRouter",
    ),
)
PROVIDERS = {p.name: p for p in PRESETS}
# every variable a key can be set in (redact() scrubs them all)
KEY_NAMES = tuple(dict.fromkeys(["OPENAI_API_KEY", *(p.key_name for p in PROVIDERS.values())]))


def shown_url(url: str) -> str:
    """A URL safe to print: user:password and every query value masked.

    Example: shown_url("http://ana:pw@127.0.0.1/v1?key=k")  ->  "http://***@127.0.0.1/v1?key=***"
    """
    scheme, sep, rest = str(url).partition("://")
    if not sep:
        scheme, rest = "", scheme
    rest, fragment, _ = rest.partition("#")
    rest, question, query = rest.partition("?")
    if "@" in rest:  # a pasted password may hold "/": cut at the last "@"
        rest = "***@" + rest.rpartition("@")[2]
    if question:
        rest += "?" + "&".join(
            f"{p.partition('=')[0]}=***" if "=" in p else "***" for p in query.split("&")
        )
    return f"{scheme}{sep}{rest}" + ("#***" if fragment else "")
