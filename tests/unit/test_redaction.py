"""What leaves the machine in a diagnostics zip (engines/redaction.py): each kind of personal text replaced."""

from __future__ import annotations

from engines.redaction import environment_secrets, make_redactor


def test_home_user_folders_and_texts_get_placeholders() -> None:
    r = make_redactor(home="/home/alice", user="alice", folders={"<data>": "/home/alice/.local/share/NPU Studio"},
                      texts=["Be terse, Alice's rules.", "Tax return 2025"])  # fmt: skip
    assert r.text("/home/alice/.local/share/NPU Studio/models/x") == "<data>/models/x"
    assert r.text("open /home/alice/Pictures/cat.jpg") == "open ~/Pictures/cat.jpg"
    assert r.text("/tmp/alice/cache, C:\\Users\\alice\\AppData, user alice") == (
        "/tmp/<user>/cache, C:\\Users\\<user>\\AppData, user <user>")
    assert r.text("title 'Tax return 2025' saved; prompt Be terse, Alice's rules.") == (
        "title '<redacted>' saved; prompt <redacted>")
    assert r.text("/home/alicex/file") == "/home/alicex/file"  # neither the home nor the name as a prefix


def test_a_path_is_not_replaced_inside_a_longer_name() -> None:
    r = make_redactor(folders={"<data>": "/srv/data"})
    assert r.text("/srv/data/models and /srv/database") == "<data>/models and /srv/database"


def test_windows_paths_match_with_either_slash_and_any_case() -> None:
    r = make_redactor(home="C:\\Users\\Bob", user="Bob")
    r = type(r)(r.replacements, r.user, ignore_case=True)
    assert r.text("c:\\users\\bob\\Documents and C:/Users/Bob/x") == "~\\Documents and ~/x"


def test_secrets_from_the_environment_and_token_shapes_are_replaced() -> None:
    env = {"HF_TOKEN": "value-of-the-token", "PATH": "/usr/bin", "DB_PASSWORD": "pw-123456", "SHORT_KEY": "ab"}
    assert sorted(environment_secrets(env)) == ["pw-123456", "value-of-the-token"]
    r = make_redactor(secrets=environment_secrets(env))
    text = ("t=value-of-the-token hf_abcdefghijklmnopqrstu sk-abcdefghijklmnopqrstuv ghp_abcdefghijklmnopqrstuvwx "
            "AKIAABCDEFGHIJKLMNOP Authorization: Bearer abc.def.ghi-123 api_key=12345678 password: hunter2x")
    assert r.text(text) == ("t=<redacted> <secret> <secret> <secret> <secret> Authorization: Bearer <secret> "
                            "api_key=<secret> password: <secret>")


def test_data_is_walked_keys_included() -> None:
    r = make_redactor(home="/home/eve", texts=["secret plan"])
    assert r.data({"/home/eve/x": ["secret plan", 3, None, {"k": "/home/eve"}]}) == {"~/x": ["<redacted>", 3, None,
                                                                                             {"k": "~"}]}


def test_a_text_is_replaced_as_a_whole_word_only() -> None:
    r = make_redactor(texts=["api_key", "!odd one!"])
    assert r.text('"serve_api_key": 1, api_key: x, (api_key)') == '"serve_api_key": 1, <redacted>: x, (<redacted>)'
    assert r.text("a!odd one!b") == "a<redacted>b"
