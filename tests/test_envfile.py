"""The .env file: found, read once with line numbers, and refused by the lines it cannot hold."""

import pytest

from labkit import UserError
from labkit.config import checked_env_file
from labkit.envfile import EnvFile, find_env_file, read_env_file


def written(tmp_path, text):
    path = tmp_path / ".env"
    path.write_bytes(text.encode())
    return path


@pytest.mark.parametrize("newline", ["\n", "\r\n", "\r"])
def test_each_value_keeps_the_line_it_was_set_on(tmp_path, newline):
    text = newline.join(["# settings", "", "LABKIT_MODE=live", "", "", "OPENAI_MODEL=m", ""])
    env = read_env_file(written(tmp_path, text))
    assert env.values == {"LABKIT_MODE": "live", "OPENAI_MODEL": "m"}
    assert env.lines == {"LABKIT_MODE": 3, "OPENAI_MODEL": 6}


def test_values_are_interpolated_as_python_dotenv_does(tmp_path):
    env = read_env_file(written(tmp_path, "A=one\nB=${A}-two\nC=${NOT_SET_ANYWHERE:-three}\n"))
    assert env.values == {"A": "one", "B": "one-two", "C": "three"}


def test_a_bad_line_is_named_only_by_a_known_setting_and_its_key_is_kept_for_redact(tmp_path):
    text = "LABKIT_MODE=live\nexport OPENAI_MODEL\nOPENAI_API_KEY sk-abc123\nsk-loose\n"
    env = read_env_file(written(tmp_path, text), ("OPENAI_MODEL",), ("OPENAI_API_KEY",))
    assert env.bad == ((2, "OPENAI_MODEL"), (3, ""), (4, ""))
    assert env.loose_keys == ("sk-abc123",)


@pytest.mark.parametrize(
    "content, why", [(b"A=\xff\n", "is not UTF-8 text"), (None, "cannot be read")]
)
def test_a_file_that_cannot_be_read_says_why(tmp_path, content, why):
    path = tmp_path / ".env"
    if content is None:
        path.mkdir()
    else:
        path.write_bytes(content)
    assert why in read_env_file(path).unreadable


def test_the_shell_wins_and_a_blank_value_is_unset():
    env = EnvFile({"A": "file", "B": "file", "C": "  "}, {"A": 1, "B": 2, "C": 3}, ".env")
    assert env.find("A", {"A": "shell"}) == ("shell", "the shell")
    assert env.find("B", {"B": " "}) == ("file", ".env line 2")
    assert env.find("C", {}) == (None, None)


@pytest.mark.parametrize(
    "chosen, note",
    [("none", "not read (LABKIT_ENV_FILE=none)"), ("", "not read (LABKIT_ENV_FILE=none)")],
)
def test_env_file_switched_off(tmp_path, chosen, note):
    assert find_env_file({"LABKIT_ENV_FILE": chosen}, tmp_path) == (None, note)


def test_checked_env_file_names_the_file_as_the_learner_would(tmp_path):
    path = written(tmp_path, "LABKIT_MODE=live\n")
    env, note = checked_env_file({"LABKIT_ENV_FILE": str(path)}, tmp_path)
    assert (env.shown, note, env.find("LABKIT_MODE", {})) == (".env", "", ("live", ".env line 1"))


def test_checked_env_file_refuses_a_bad_line_by_its_number_only(tmp_path):
    path = written(tmp_path, "LABKIT_MODE=live\nOPENAI_API_KEY sk-abcdefghij0123456789\n")
    with pytest.raises(UserError, match=r"^\.env line 2 \(OPENAI_API_KEY\) cannot be read") as e:
        checked_env_file({"LABKIT_ENV_FILE": str(path)}, tmp_path, ("OPENAI_API_KEY",))
    assert "sk-abcdefghij" not in str(e.value)
