"""Settings, the switch, key hygiene and doctor()."""

import subprocess
import sys
from pathlib import Path

import pytest

from labkit import UserError, connect, doctor, load_settings, redact
from labkit.config import DEFAULT_MODEL, OFFICIAL_BASE_URL, PROBLEMS, SETTINGS
from labkit.failures import explain
from labkit.keys import key_problem

KEY = "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789"


def test_defaults_are_offline_and_official():
    s = load_settings(environ={"LABKIT_ENV_FILE": "none"})
    assert (s.mode, s.model, s.api, s.base_url) == (
        "offline",
        DEFAULT_MODEL,
        "responses",
        OFFICIAL_BASE_URL,
    )
    assert s.timeout == 30.0 and s.max_retries == 0


def test_shell_wins_over_env_file(tmp_path):
    env_file = tmp_path / ".env"
    env_file.write_text(f"LABKIT_MODE=live\nOPENAI_MODEL=from-file\nOPENAI_API_KEY={KEY}\n")
    s = load_settings(environ={"LABKIT_ENV_FILE": str(env_file), "OPENAI_MODEL": "from-shell"})
    assert s.mode == "live" and s.model == "from-shell" and s.api_key == KEY
    assert s.env_file == ".env"  # a file name, never an absolute path


def test_quoted_value_in_env_file_is_unquoted_by_dotenv(tmp_path):
    env_file = tmp_path / ".env"
    env_file.write_text(f'OPENAI_API_KEY="{KEY}"\n')
    s = load_settings(environ={"LABKIT_ENV_FILE": str(env_file)})
    assert s.api_key == KEY and key_problem(s.api_key) is None


def test_every_setting_in_the_table_has_its_one_problem_line():
    assert [s.name for s in SETTINGS] == list(PROBLEMS)


def test_the_mode_passed_in_wins_and_an_error_names_it_as_passed():
    with pytest.raises(UserError, match=r"^mode='bogus' is not a mode — use mode=offline, live"):
        load_settings(mode="bogus", environ={"LABKIT_ENV_FILE": "none", "LABKIT_MODE": "live"})


def test_settings_are_checked_in_the_order_of_the_table():
    environ = {"LABKIT_BASE_URL": "http://127.0.0.1:8000/v1", "LABKIT_TIMEOUT": "0"}
    with pytest.raises(UserError, match="but LABKIT_API is not"):  # before LABKIT_TIMEOUT
        load_settings(environ={"LABKIT_ENV_FILE": "none", **environ})


@pytest.mark.parametrize(
    "base_url, key_name",
    [
        ("//", "DEEPSEEK_API_KEY"),  # only slashes: as if unset
        ("https://api.deepseek.com/v1/", "DEEPSEEK_API_KEY"),  # the preset's own, spelled out
        ("http://127.0.0.1:8000/v1", "LABKIT_API_KEY"),  # another server: never the preset's key
    ],
)
def test_a_preset_key_goes_only_to_the_preset_endpoint(base_url, key_name):
    environ = {
        "LABKIT_ENV_FILE": "none",
        "LABKIT_PROVIDER": "deepseek",
        "LABKIT_BASE_URL": base_url,
    }
    assert load_settings(environ=environ).key_name == key_name


def test_missing_env_file_is_a_clear_error():
    with pytest.raises(UserError, match="not a file"):
        load_settings(environ={"LABKIT_ENV_FILE": "no/such/.env"})


def test_key_never_in_repr():
    s = load_settings(environ={"LABKIT_ENV_FILE": "none", "OPENAI_API_KEY": KEY})
    assert KEY not in repr(s)


SETTING_PROBLEMS = [  # shell, .env text (None: no .env), what the one error must say
    ({"LABKIT_MODE": "online"}, None, ["LABKIT_MODE='online'", "(set in the shell)", "not a mode"]),
    ({}, "LABKIT_MODE=Live mode\n", ["LABKIT_MODE='Live mode'", "(set in .env line 1)"]),
    ({"LABKIT_BASE_URL": "http://127.0.0.1:11434/v1"}, None, ["LABKIT_API is not", "API=chat"]),
    ({"LABKIT_BASE_URL": "localhost:11434", "LABKIT_API": "chat"}, None, ["not an http(s) URL"]),
    ({"LABKIT_API": "completions"}, None, ["LABKIT_API='completions'", "not an API"]),
    (
        {"LABKIT_BASE_URL": "http://127.0.0.1:8000/v1", "LABKIT_API": "completions"},
        None,
        ["LABKIT_API='completions'", "(set in the shell)", "not an API"],
    ),
    (
        {},
        "LABKIT_BASE_URL=http://127.0.0.1:8000/v1\nLABKIT_API=Chats\n",
        ["LABKIT_API='Chats'", "(set in .env line 2)", "not an API"],
    ),
    ({"LABKIT_TIMEOUT": "thirty"}, None, ["LABKIT_TIMEOUT='thirty'", "seconds above 0"]),
    ({"LABKIT_TIMEOUT": "0"}, None, ["LABKIT_TIMEOUT='0'", "(set in the shell)", "above 0"]),
    ({"LABKIT_TIMEOUT": "-5"}, None, ["LABKIT_TIMEOUT='-5'", "seconds above 0"]),
    ({"LABKIT_TIMEOUT": "nan"}, None, ["LABKIT_TIMEOUT='nan'", "seconds above 0"]),
    ({"LABKIT_TIMEOUT": "inf"}, None, ["LABKIT_TIMEOUT='inf'", "seconds above 0"]),
    ({}, "# timeouts\nLABKIT_TIMEOUT=0\n", ["LABKIT_TIMEOUT='0'", "(set in .env line 2)"]),
    ({"LABKIT_MAX_RETRIES": "-1"}, None, ["LABKIT_MAX_RETRIES='-1'", "whole number >= 0"]),
    ({"LABKIT_MAX_RETRIES": "1.5"}, None, ["LABKIT_MAX_RETRIES='1.5'", "whole number >= 0"]),
    ({}, "LABKIT_MAX_RETRIES=two\n", ["LABKIT_MAX_RETRIES='two'", "(set in .env line 1)"]),
    ({"OPENAI_MODEL": "gpt-5 mini"}, None, ["OPENAI_MODEL='gpt-5 mini'", "model name alone"]),
    (
        {},
        "# my settings\nLABKIT_MODE=live\nOPENAI_API_KEY sk-proj-abcdefghij0123456789\n",
        [".env line 3 (OPENAI_API_KEY)", "NAME=value"],
    ),
    ({}, 'LABKIT_MODE="live\nOPENAI_MODEL=gpt-5\n', [".env line 1 (LABKIT_MODE)", "NAME=value"]),
    (
        {},
        "LABKIT_MODE=live\nexport OPENAI_MODEL\nsk-proj-abcdefghij0123456789\n",
        [".env lines 2, 3 (OPENAI_MODEL)", "NAME=value"],
    ),
    ({}, 'OPENAI_MODEL="gpt-5"  # the model\n\n\nLABKIT_API chat\n', [".env line 4 (LABKIT_API)"]),
]


def settings_environ(tmp_path, shell, dotenv):
    if dotenv is None:
        return {"LABKIT_ENV_FILE": "none", **shell}
    (tmp_path / ".env").write_text(dotenv)
    return {"LABKIT_ENV_FILE": str(tmp_path / ".env"), **shell}


@pytest.mark.parametrize("shell, dotenv, words", SETTING_PROBLEMS)
def test_each_setting_problem_is_reported_as_what_it_is(tmp_path, capsys, shell, dotenv, words):
    environ = settings_environ(tmp_path, shell, dotenv)
    with pytest.raises(UserError) as caught:
        load_settings(environ=environ)
    line = explain(caught.value)
    assert " — " in line and "\n" not in line
    for word in words:
        assert word in line, line
    assert "sk-proj-abcdefghij" not in line  # a broken line is named, never repeated
    assert doctor(environ) is False
    assert f"  problem     {line}" in capsys.readouterr().out


@pytest.mark.parametrize("value", ["0.5", "30", " 12 "])
def test_good_timeouts_and_retries_load(value):
    s = load_settings(
        environ={
            "LABKIT_ENV_FILE": "none",
            "LABKIT_TIMEOUT": value,
            "LABKIT_MAX_RETRIES": value.replace("0.5", "2"),
        }
    )
    assert s.timeout == float(value) and s.max_retries == int(value.replace("0.5", "2"))


def test_a_blank_shell_value_does_not_hide_the_env_file(tmp_path):
    (tmp_path / ".env").write_text(f"OPENAI_API_KEY={KEY}\nOPENAI_MODEL=gpt-5\n")
    s = load_settings(
        environ={
            "LABKIT_ENV_FILE": str(tmp_path / ".env"),
            "OPENAI_API_KEY": "  ",
            "OPENAI_MODEL": "",
        }
    )
    assert s.api_key == KEY and s.key_source == ".env line 1" and s.model == "gpt-5"


@pytest.mark.parametrize(
    "shell, dotenv, where, elsewhere",
    [
        ({"OPENAI_API_KEY": f'"{KEY}"'}, None, "(set in the shell)", "in .env"),
        ({"OPENAI_API_KEY": KEY + " "}, f"OPENAI_API_KEY={KEY}\n", "(set in the shell)", "in .env"),
        ({}, f"LABKIT_MODE=live\nOPENAI_API_KEY=' {KEY}'\n", "in .env line 2", "shell"),
        (
            {},
            "LABKIT_MODE=live\n\nOPENAI_API_KEY=AIza0123456789abcdef\n",
            "in .env line 3",
            "shell",
        ),
    ],
)
def test_a_key_problem_says_where_the_key_was_set(
    tmp_path, monkeypatch, shell, dotenv, where, elsewhere
):
    for name, value in settings_environ(tmp_path, shell, dotenv).items():
        monkeypatch.setenv(name, value)
    with pytest.raises(UserError) as caught:
        connect(mode="live")
    assert where in str(caught.value) and elsewhere not in str(caught.value)
    assert KEY not in str(caught.value)


def test_custom_base_url_uses_its_own_key_and_ignores_openai_base_url():
    s = load_settings(
        environ={
            "LABKIT_ENV_FILE": "none",
            "OPENAI_API_KEY": KEY,
            "OPENAI_BASE_URL": "http://x/v1",
            "LABKIT_BASE_URL": "http://127.0.0.1:8000/v1/",
            "LABKIT_API": "Chat",
        }
    )
    assert s.base_url == "http://127.0.0.1:8000/v1" and s.api == "chat"
    assert s.key_name == "LABKIT_API_KEY" and s.api_key is None  # the OpenAI key stays home
    s = load_settings(environ={"LABKIT_ENV_FILE": "none", "OPENAI_BASE_URL": "http://x/v1"})
    assert s.base_url == OFFICIAL_BASE_URL and s.ignored == ("OPENAI_BASE_URL",)


@pytest.mark.parametrize(
    "key, words",
    [
        (None, "not set"),
        ("", "not set"),
        (KEY + "\n", "newline"),
        (" " + KEY, "spaces"),
        ('"' + KEY + '"', "quotes"),
        ("“" + KEY + "”", "quotes"),
        ("sk-abc def" + "x" * 20, "space"),
        ("sk-abc\u00e9" + "x" * 20, "non-ASCII"),
        ("sk-...", "placeholder"),
        ("AIzaSyD" + "x" * 30, "sk-"),
    ],
)
def test_key_problems_name_the_fix_and_never_echo_the_key(key, words):
    problem = key_problem(key)
    assert problem and words in problem
    if key and len(key) > 8:
        assert key.strip().strip('"“”') not in problem


def test_good_key_and_local_server_without_key():
    assert key_problem(KEY) is None
    assert key_problem(None, official=False) is None
    assert key_problem("anything-local", official=False) is None


@pytest.mark.parametrize(
    "text, secrets, leaked",
    [
        ("Incorrect API key provided: sk-proj-abc123def456.", (), "sk-proj-abc123def456"),
        ("Authorization: Bearer tok_9f8e7d6c5b", (), "tok_9f8e7d6c5b"),
        ("custom secret hunter2hunter2 in a message", ("hunter2hunter2",), "hunter2hunter2"),
        ("GET https://api.example.com/v1?api_key=q1w2e3r4t5&q=1", (), "q1w2e3r4t5"),
        ("see https://h.example/x?q=1&access_token=zz9yy8xx7", (), "zz9yy8xx7"),
    ],
)
def test_redact(text, secrets, leaked):
    assert leaked not in redact(text, secrets)


def test_doctor_reports_without_the_key(capsys, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    assert doctor() is True
    out = capsys.readouterr().out
    assert KEY not in out and KEY[:12] not in out
    assert "present and well-formed, set in the shell" in out and "official OpenAI endpoint" in out
    assert "match requirements-lock.txt" in out and "problem" not in out


LOCAL = {"LABKIT_BASE_URL": "http://127.0.0.1:8000/v1", "LABKIT_API": "chat"}


@pytest.mark.parametrize(
    "shell, dotenv, words",
    [
        ({}, None, "OPENAI_API_KEY not set"),
        ({"OPENAI_API_KEY": ""}, None, "OPENAI_API_KEY not set"),
        ({"OPENAI_API_KEY": "   "}, None, "OPENAI_API_KEY not set"),
        ({"OPENAI_API_KEY": "\t\n"}, None, "OPENAI_API_KEY not set"),
        ({}, "OPENAI_API_KEY=\n", "OPENAI_API_KEY not set"),
        ({}, 'OPENAI_API_KEY="  "\n', "OPENAI_API_KEY not set"),
        (LOCAL, None, "LABKIT_API_KEY not set"),
        ({**LOCAL, "LABKIT_API_KEY": " "}, None, "LABKIT_API_KEY not set"),
        ({**LOCAL, "OPENAI_API_KEY": KEY}, None, "LABKIT_API_KEY not set"),
        ({"OPENAI_API_KEY": KEY}, None, "OPENAI_API_KEY present and well-formed, set in the shell"),
        ({}, f"# key\nOPENAI_API_KEY={KEY}\n", "present and well-formed, set in .env line 2"),
        ({**LOCAL, "LABKIT_API_KEY": "k3y"}, None, "LABKIT_API_KEY present and well-formed"),
        ({"OPENAI_API_KEY": f"'{KEY}'"}, None, "OPENAI_API_KEY present but malformed: "),
        (
            {"OPENAI_API_KEY": "sk-..."},
            None,
            "present but malformed: OPENAI_API_KEY (set in the shell) is still the placeholder",
        ),
    ],
)
def test_doctor_key_line_is_truthful(tmp_path, capsys, shell, dotenv, words):
    doctor(settings_environ(tmp_path, shell, dotenv))
    out = capsys.readouterr().out
    key_line = next(line for line in out.splitlines() if line.startswith("  key "))
    assert words in key_line
    assert ("present" in key_line) == ("not set" not in key_line)


@pytest.mark.parametrize(
    "environ",
    [
        {"LABKIT_MODE": "live"},
        {"LABKIT_MODE": "live", "OPENAI_API_KEY": "   "},
        {"LABKIT_MODE": "live", "OPENAI_API_KEY": "sk-..."},
        {
            "LABKIT_MODE": "live",
            "LABKIT_BASE_URL": "http://127.0.0.1:8000/v1",
            "LABKIT_API": "chat",
            "LABKIT_API_KEY": "'k3y'",
        },
        {"LABKIT_MODE": "online"},
        {"LABKIT_TIMEOUT": "0"},
    ],
)
def test_doctor_shows_a_problem_line_whenever_it_returns_false(capsys, environ):
    assert doctor({"LABKIT_ENV_FILE": "none", **environ}) is False
    out = capsys.readouterr().out
    problems = [line for line in out.splitlines() if line.startswith("  problem ")]
    assert len(problems) == 1 and " — " in problems[0]


def test_doctor_flags_a_bad_key_in_live_mode(capsys, monkeypatch):
    monkeypatch.setenv("LABKIT_MODE", "live")
    monkeypatch.setenv("OPENAI_API_KEY", f"'{KEY}'")
    assert doctor() is False
    out = capsys.readouterr().out
    assert "quotes" in out and KEY not in out


def test_doctor_names_an_ignored_openai_base_url(capsys, monkeypatch):
    monkeypatch.setenv("OPENAI_BASE_URL", "http://forgotten.example/v1")
    doctor()
    assert "ignored     OPENAI_BASE_URL" in capsys.readouterr().out


# ---------------------------------------------------------------- 01_setup as a learner runs it

ROOT = Path(__file__).resolve().parent.parent
EXAMPLE = (ROOT / ".env.example").read_text()
LEARNERS = {  # name: (the learner's shell, their .env or None for none)
    ".env copied from .env.example": ({}, EXAMPLE),
    "no .env, a key and a stray OPENAI_BASE_URL in the shell": (
        {"OPENAI_API_KEY": KEY, "OPENAI_BASE_URL": "http://old-proxy.example/v1"},
        None,
    ),
    "the key filled into .env": ({}, EXAMPLE.replace("API_KEY=\n", f"API_KEY={KEY}\n", 1)),
    "a quoted key in the shell, .env present": ({"OPENAI_API_KEY": f"'{KEY}'"}, EXAMPLE),
}


# make test runs the learner most likely to leak (a real key in .env); the other three shells are
# soak trials in make test-all (config's own tests above read each of them in-process)
IN_MAKE_TEST = "the key filled into .env"
LEARNER_RUNS = [
    pytest.param(*case, id=name, marks=() if name == IN_MAKE_TEST else pytest.mark.soak)
    for name, case in LEARNERS.items()
]


@pytest.mark.parametrize("shell, dotenv", LEARNER_RUNS)
def test_setup_notebook_run_and_saved_by_a_learner_still_passes(tmp_path, shell, dotenv):
    """Run 01_setup in a kernel with the learner's environment (no LABKIT_ENV_FILE), save it, then
    check it as `make test` does: strict nbval with the project's sanitize file, and hygiene."""
    import nbformat
    from test_notebooks import problems

    import kernels
    from offline_env import offline_environ

    if dotenv is None and (ROOT / ".env").exists():
        pytest.skip("a .env at the repository root would be read: this case needs none")
    assert dotenv is None or "OPENAI_API_KEY=" in dotenv
    folder = tmp_path / "notebooks"  # where JupyterLab runs it: notebooks/
    folder.mkdir()
    if dotenv is not None:
        (tmp_path / ".env").write_text(dotenv)
    test_env = offline_environ()
    learner = {k: v for k, v in test_env.items() if k not in ("LABKIT_ENV_FILE", "LABKIT_MODE")}
    nb = nbformat.read(ROOT / "notebooks" / "01_setup.ipynb", as_version=4)
    kernels.execute(
        nb,
        env={**learner, **shell},
        timeout=300,
        kernel_name="python3",
        record_timing=False,
        resources={"metadata": {"path": str(folder)}},
    )
    saved = folder / "01_setup.ipynb"
    nbformat.write(nb, saved)
    report = "".join(nb.cells[4].outputs[0]["text"])
    assert ("  .env        .env\n" if dotenv else "  .env        none found") in report  # theirs
    assert problems(nbformat.read(saved, as_version=4)) == []
    command = [
        sys.executable,
        "-m",
        "pytest",
        "-q",
        "-c",
        str(ROOT / "pyproject.toml"),
        "--rootdir",
        str(tmp_path),
        "--nbval-sanitize-with",
        str(ROOT / "tests" / "sanitize.cfg"),
    ]
    checked = subprocess.run(
        [*command, str(saved)], cwd=ROOT, env=test_env, capture_output=True, text=True, timeout=600
    )
    assert checked.returncode == 0, checked.stdout[-3000:]


def test_redact_keeps_a_query_that_holds_no_credential():
    url = "https://docs.python.org/3/search.html?q=json&check_keywords=yes"
    assert redact(url) == url
