"""Each leak of issue 13, one test each: the old redactor let every one of them through."""

from __future__ import annotations

import pytest

from hangscope.redact import MASK, redact_argv, redact_env, redact_obj, redact_text

SECRET = "Hx7qL2vR9sK4mZ8w"  # fake, of no known shape: only the rules can catch it
TOKEN40 = "0f1e2d3c4b5a69788796a5b4c3d2e1f00f1e2d3c"  # a GitHub-OAuth-like token of no prefix


@pytest.mark.parametrize("text", [
    f"Driver={{ODBC Driver 18 for SQL Server}};Server=db1;Uid=sa;Pwd={SECRET};Encrypt=yes",
    f"Provider=SQLOLEDB;Data Source=db1;User ID=sa;PWD={SECRET};",
    f"sqlcmd --pwd {SECRET} -S db1",
    f"app --pwd={SECRET}",
    f"pwd: {SECRET}",
])
def test_pwd_in_connection_strings_and_flags_is_masked(text: str) -> None:
    assert SECRET not in redact_text(text)


def test_pwd_flag_in_argv_is_masked() -> None:
    assert SECRET not in redact_argv(["sqlcmd", "--pwd", SECRET, "-S", "db1"])


def test_the_shells_own_pwd_stays_readable() -> None:
    assert redact_env({"PWD": "/home/alice/job", "OLDPWD": "/tmp"}) == {
        "PWD": "/home/alice/job", "OLDPWD": "/tmp"}
    assert redact_text("PWD=/home/alice/job OLDPWD=/srv/x") == "PWD=/home/alice/job OLDPWD=/srv/x"


@pytest.mark.parametrize("name", ["VALID_API_TOKENS", "EXTRA_AUTH_TOKENS", "ALLOWED_ACCESS_TOKENS",
                                  "MAX_BOT_TOKENS"])
def test_token_lists_after_count_like_words_are_secrets(name: str) -> None:
    assert redact_text(f"{name}={SECRET},{SECRET}2") == f"{name}={MASK}"
    assert redact_env({name: SECRET})[name] == MASK


@pytest.mark.parametrize("text", [
    f"git clone https://{TOKEN40}@github.com/org/repo.git",
    f"remote: https://{SECRET}{SECRET}@gitlab.example.com/org/repo",
    "SENTRY=https://e3b0c44298fc1c149afbf4c8996fb924@o123456.ingest.sentry.io/4504",
    f"url = https://{TOKEN40}:x-oauth-basic@github.com/org/repo",
    f"https://x-access-token:{SECRET}@github.com/org/repo",
])
def test_credential_only_user_part_of_a_url_is_masked(text: str) -> None:
    out = redact_text(text)
    sentry_key = "e3b0c44298fc1c149afbf4c8996fb924"
    assert SECRET not in out and TOKEN40 not in out and sentry_key not in out


def test_plain_user_names_in_urls_stay() -> None:
    for text in ("ssh://git@github.com/org/repo", "postgres://postgres@localhost/db",
                 "https://x-access-token@github.com/x"):
        assert redact_text(text) == text


@pytest.mark.parametrize("argv", [
    ["curl", "-u", f"admin:{SECRET}", "https://api.example.com"],
    ["curl", f"-uadmin:{SECRET}", "https://api.example.com"],
    ["curl", "--user", f"admin:{SECRET}", "https://api.example.com"],
    ["curl", f"--user=admin:{SECRET}", "https://api.example.com"],
    ["curl", "--proxy-user", f"admin:{SECRET}", "https://api.example.com"],
    ["sshpass", "-p", SECRET, "ssh", "host"],
    ["/usr/bin/sshpass", f"-p{SECRET}", "ssh", "host"],
    ["mysql", "-u", "root", f"-p{SECRET}", "db"],
    ["mysqldump", f"-p{SECRET}", "db"],
    ["redis-cli", "-a", SECRET, "ping"],
])
def test_short_flags_and_user_pass_arguments_are_masked(argv: list[str]) -> None:
    assert SECRET not in " ".join(redact_argv(argv))
    assert SECRET not in redact_text(" ".join(argv))


def test_user_name_of_curl_u_stays_and_other_short_flags_are_left() -> None:
    curl = ["curl", "-u", f"admin:{SECRET}", "x"]
    assert redact_argv(curl) == ["curl", "-u", f"admin:{MASK}", "x"]
    plain = ["python", "-u", "train.py", "-p", "8"]
    assert redact_argv(plain) == plain
    assert redact_argv(["docker", "run", "--user", "1000:1000", "img"])[3] == "1000:1000"
    assert redact_text("mysql -u root -p db") == "mysql -u root -p db"


@pytest.mark.parametrize("value", ["-abcDEF123xyz", "-Xq8_kLm2Zp"])
def test_secret_value_starting_with_a_dash_after_a_sensitive_flag(value: str) -> None:
    assert value not in redact_text(f"serve --api-key {value} --port 8000")
    assert value not in redact_argv(["serve", "--api-key", value, "--port", "8000"])
    # a real option after a flag still is not taken for its value
    assert redact_argv(["serve", "--api-key", "--port", "8000"])[2] == "--port"


@pytest.mark.parametrize("text", [
    f"api_key:\n    {SECRET}\nport: 8000",
    f"auth:\n  token:\n    {SECRET}\n",
    f"credentials:\n  user: alice\n  password: {SECRET}\nnext: 1",
    f"token: |\n  {SECRET}\n  {SECRET}2\n",
    f"secrets:\n  - {SECRET}\n",
])
def test_secret_on_the_line_after_its_key_is_masked(text: str) -> None:
    out = redact_text(text)
    assert SECRET not in out
    assert "port: 8000" in out or "next" in out or out.endswith("\n")


@pytest.mark.parametrize("text", [
    f'{{"token": {{"value": "{SECRET}", "kind": "pat"}}}}',
    f"config={{'api_key': {{'primary': '{SECRET}'}}}}",
    f'{{"auth": {{"basic": {{"user": "u", "pass": "{SECRET}"}}}}}}',
])
def test_secret_nested_under_a_sensitive_key_in_a_string_is_masked(text: str) -> None:
    assert SECRET not in redact_text(text)
    assert SECRET not in str(redact_obj([text, "x"]))


def test_idempotent_on_every_new_rule() -> None:
    for text in (f"Uid=sa;Pwd={SECRET};", f"https://{TOKEN40}@github.com/x", f"curl -u a:{SECRET}",
                 f"api_key:\n  {SECRET}\n", f'{{"token": {{"v": "{SECRET}"}}}}', "mysql -pX1y2z3"):
        once = redact_text(text)
        assert redact_text(once) == once


@pytest.mark.parametrize("text", [
    f"NCCL_RAS_ADDR=ras:{SECRET}@127.0.0.1:28028",
    f"proxy {SECRET[:4]}user:{SECRET}@proxy.corp.example:3128",
    f"rsync -a ckpt/ backup:{SECRET}@localhost:/srv",
])
def test_user_password_at_host_without_a_scheme_is_masked(text: str) -> None:
    assert SECRET not in redact_text(text).replace(f"{SECRET[:4]}user", "")


def test_image_digests_and_emails_are_not_credentials() -> None:
    for text in ("nvcr.io/nvidia/pytorch:24.01-py3@sha256:0a1b2c3d", "mail alice@example.com",
                 "git@github.com:org/repo.git", "rank0 at 10.0.0.1:29500"):
        assert redact_text(text) == text
