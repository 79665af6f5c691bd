"""Settings, the switch, key hygiene, explain() and doctor()."""
import pytest

from labkit import UserError, doctor, explain, load_settings, redact
from labkit.config import DEFAULT_MODEL, OFFICIAL_BASE_URL, key_problem

KEY = "sk-proj-abcdefghijklmnopqrstuvwxyz0123456789"


def test_defaults_are_offline_and_official():
    s = load_settings(environ={"LABKIT_ENV_FILE": "none"})
    assert (s.mode, s.model, s.api, s.base_url) == ("offline", DEFAULT_MODEL, "responses", OFFICIAL_BASE_URL)
    assert s.timeout == 30.0 and s.max_retries == 0


def test_shell_wins_over_env_file(tmp_path):
    env_file = tmp_path / ".env"
    env_file.write_text(f"LABKIT_MODE=live\nOPENAI_MODEL=from-file\nOPENAI_API_KEY={KEY}\n")
    s = load_settings(environ={"LABKIT_ENV_FILE": str(env_file), "OPENAI_MODEL": "from-shell"})
    assert s.mode == "live" and s.model == "from-shell" and s.api_key == KEY
    assert s.env_file == ".env"                       # a file name, never an absolute path


def test_quoted_value_in_env_file_is_unquoted_by_dotenv(tmp_path):
    env_file = tmp_path / ".env"
    env_file.write_text(f'OPENAI_API_KEY="{KEY}"\n')
    s = load_settings(environ={"LABKIT_ENV_FILE": str(env_file)})
    assert s.api_key == KEY and key_problem(s.api_key) is None


def test_missing_env_file_is_a_clear_error():
    with pytest.raises(UserError, match="not a file"):
        load_settings(environ={"LABKIT_ENV_FILE": "no/such/.env"})


def test_key_never_in_repr():
    s = load_settings(environ={"LABKIT_ENV_FILE": "none", "OPENAI_API_KEY": KEY})
    assert KEY not in repr(s)


@pytest.mark.parametrize("environ, words", [
    ({"LABKIT_MODE": "online"}, "not a mode"),
    ({"LABKIT_BASE_URL": "http://127.0.0.1:11434/v1"}, "LABKIT_API"),
    ({"LABKIT_BASE_URL": "localhost:11434", "LABKIT_API": "chat"}, "not an http(s) URL"),
    ({"LABKIT_API": "completions"}, "not an API"),
    ({"LABKIT_TIMEOUT": "thirty"}, "seconds"),
])
def test_bad_settings_say_what_to_fix(environ, words):
    with pytest.raises(UserError, match=words.replace("(", r"\(").replace(")", r"\)")):
        load_settings(environ={"LABKIT_ENV_FILE": "none", **environ})


def test_custom_base_url_uses_its_own_key_and_ignores_openai_base_url():
    s = load_settings(environ={"LABKIT_ENV_FILE": "none", "OPENAI_API_KEY": KEY, "OPENAI_BASE_URL": "http://x/v1",
                               "LABKIT_BASE_URL": "http://127.0.0.1:8000/v1/", "LABKIT_API": "Chat"})
    assert s.base_url == "http://127.0.0.1:8000/v1" and s.api == "chat"
    assert s.key_name == "LABKIT_API_KEY" and s.api_key is None      # the OpenAI key stays home
    s = load_settings(environ={"LABKIT_ENV_FILE": "none", "OPENAI_BASE_URL": "http://x/v1"})
    assert s.base_url == OFFICIAL_BASE_URL and s.ignored == ("OPENAI_BASE_URL",)


@pytest.mark.parametrize("key, words", [
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
])
def test_key_problems_name_the_fix_and_never_echo_the_key(key, words):
    problem = key_problem(key)
    assert problem and words in problem
    if key and len(key) > 8:
        assert key.strip().strip('"“”') not in problem


def test_good_key_and_local_server_without_key():
    assert key_problem(KEY) is None
    assert key_problem(None, official=False) is None
    assert key_problem("anything-local", official=False) is None


@pytest.mark.parametrize("text, secrets, leaked", [
    ("Incorrect API key provided: sk-proj-abc123def456.", (), "sk-proj-abc123def456"),
    ("Authorization: Bearer tok_9f8e7d6c5b", (), "tok_9f8e7d6c5b"),
    ("custom secret hunter2hunter2 in a message", ("hunter2hunter2",), "hunter2hunter2"),
])
def test_redact(text, secrets, leaked):
    assert leaked not in redact(text, secrets)


def test_explain_is_one_line_for_any_error():
    assert explain(UserError("OPENAI_API_KEY is not set — put it in .env")) == \
        "OPENAI_API_KEY is not set — put it in .env"
    line = explain(RuntimeError(f"boom with {KEY}\nsecond line"))
    assert "\n" not in line and KEY not in line and line.startswith("RuntimeError")
    assert "truncated" in explain(ValueError("Expecting value: line 1 column 1"))


def test_doctor_reports_without_the_key(capsys, monkeypatch):
    monkeypatch.setenv("OPENAI_API_KEY", KEY)
    assert doctor() is True
    out = capsys.readouterr().out
    assert KEY not in out and KEY[:12] not in out
    assert "present and well-formed" in out and "official OpenAI endpoint" in out
    assert "match requirements-lock.txt" in out


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
