"""Reports must be safe to paste in public: planted secrets never come out, files are 0600.

A real job (tests/targets/reliability_job.py) carries fake secrets of every kind the redactor
knows, in every place hangscope reads: its environment, its ranks' command lines, a process
title, a Python thread's name, a native thread's name (comm), a non-Python child's argv, and
its log file. hangscope then dumps it in every format, to stdout and to files, saves it from
the TUI, and shows the saved dump again: no planted value may appear anywhere. ``--no-redact``
is the control: it warns loudly, and the values it is meant to reveal do appear.
"""

from __future__ import annotations

import asyncio
import json
import os
import random
import re
import stat
import string
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from targets.reliability_support import JobHandle, running_job

FAST = ("--samples", "2", "--window", "0.3")


def _token(n: int, alphabet: str = string.ascii_letters + string.digits) -> str:
    rng = random.SystemRandom()
    return "".join(rng.choice(alphabet) for _ in range(n))


# Fake secrets, fresh for every run. The key of each entry is what the test looks for: a
# value no report may contain.
S = {
    "hf": _token(34),  # hf_<34>
    "openai": _token(40),  # sk-proj-<40>
    "github": _token(36),  # ghp_<36>
    "aws_id": _token(16, string.ascii_uppercase + string.digits),  # AKIA<16>
    "aws_secret": _token(40),  # only its name says what it is
    "api_key_flag": _token(24),  # --api-key VALUE
    "hf_token_flag": _token(24),  # --hf-token=VALUE
    "url_password": _token(18),  # postgres://app:PASSWORD@db
    "assign": _token(24),  # HF_TOKEN=VALUE as an argument
    "bearer": _token(32),  # --header "Authorization: Bearer VALUE"
    "password_flag": _token(20),  # --password VALUE
    "jwt_sig": _token(43, string.ascii_letters + string.digits + "_-"),
    "slack_hook": _token(24),
    "title": _token(24),  # setproctitle("... --token=VALUE")
    "thread": _token(24),  # a Python thread named "uploader token=VALUE"
    "comm": _token(12, "ghijklmnopqrstuvwxyz"),  # a native thread named "pw=VALUE"
    "shell": _token(24),  # sh -c ... --api-key VALUE (a non-Python process)
    "env_url": _token(18),  # MASTER_ADDR=https://svc:VALUE@10.0.0.1
    "env_run_id": _token(36),  # TORCHELASTIC_RUN_ID=ghp_VALUE (a kept variable)
    "env_fr": _token(24),  # TORCH_FR_DUMP_TEMP_FILE=/tmp/.../token=VALUE/ (a kept variable)
    "env_ras": _token(20),  # NCCL_RAS_ADDR=ras:VALUE@127.0.0.1:9 (a kept variable)
    "env_slurm": _token(30),  # SLURM_JOB_NODELIST=...,sk-proj-VALUE (a kept variable)
    "env_cuda": _token(36),  # CUDA_VISIBLE_DEVICES=0,github_pat_VALUE (a kept variable)
    "odbc": _token(18),  # --conn "Server=db;Uid=sa;Pwd=VALUE;" (issue 13)
    "curl_u": _token(18),  # a child: curl -u deploy:VALUE (issue 13)
    "yaml_next": _token(24),  # api_key:\n    VALUE in the log (issue 13)
    "nested": _token(24),  # {"token": {"value": "VALUE"}} in the log (issue 13)
    "git_url": _token(40, "0123456789abcdef"),  # https://VALUE@github.com in the log
    "log": _token(24),  # printed to the job's log: "password: VALUE"
    "wandb": _token(40, "0123456789abcdef"),  # WANDB_API_KEY
    "log_ini": _token(40),  # aws_secret_access_key = VALUE (a config dump in the log)
    "log_json": _token(24),  # {"api_key": "VALUE"}
    "log_repr": _token(24),  # Args(api_key='VALUE')
}
JWT = ("eyJhbGciOiJIUzI1NiIsInR5cCI6IkpXVCJ9.eyJzdWIiOiIxMjM0NTY3ODkwIn0."
       + S["jwt_sig"])

ENV = {
    "HF_TOKEN": "hf_" + S["hf"],
    "OPENAI_API_KEY": "sk-proj-" + S["openai"],
    "AWS_SECRET_ACCESS_KEY": S["aws_secret"],
    "AWS_ACCESS_KEY_ID": "AKIA" + S["aws_id"],
    "WANDB_API_KEY": S["wandb"],
    "DATABASE_URL": f"postgres://app:{S['url_password']}@db:5432/prod",
    "MASTER_ADDR": f"https://svc:{S['env_url']}@10.0.0.1",
    "TORCHELASTIC_RUN_ID": "ghp_" + S["env_run_id"],
    "TORCH_FR_DUMP_TEMP_FILE": f"/tmp/hangscope-test-fr/token={S['env_fr']}/rank_",
    "NCCL_RAS_ADDR": f"ras:{S['env_ras']}@127.0.0.1:9",
    "SLURM_JOB_NODELIST": f"gpu[01-02],sk-proj-{S['env_slurm']}",
    "CUDA_VISIBLE_DEVICES": f"0,github_pat_{S['env_cuda']}",
}
# Planted in names hangscope does not collect at all: they must not even be named.
UNCOLLECTED_NAMES = ("HF_TOKEN", "OPENAI_API_KEY", "AWS_SECRET_ACCESS_KEY", "AWS_ACCESS_KEY_ID",
                     "WANDB_API_KEY", "DATABASE_URL")
ARGV = [
    "--api-key", S["api_key_flag"],
    f"--hf-token={S['hf_token_flag']}",
    "--db", f"postgres://app:{S['url_password']}@db:5432/prod",
    f"HF_TOKEN={S['assign']}",
    "--header", f"Authorization: Bearer {S['bearer']}",
    "--password", S["password_flag"],
    "ghp_" + S["github"],
    "AKIA" + S["aws_id"],
    JWT,
    f"https://hooks.slack.com/services/T000/B000/{S['slack_hook']}",
    "--conn", f"Driver={{ODBC Driver 18}};Server=db;Uid=sa;Pwd={S['odbc']};",
]
LOG_LINE = (f"connecting: password: {S['log']} HF_TOKEN=hf_{S['hf']} "
            f"Authorization: Bearer {S['bearer']} postgres://app:{S['url_password']}@db/x\n"
            f"aws_secret_access_key = {S['log_ini']}\n"
            f'config: {{"api_key": "{S["log_json"]}", "tp": 8}}\n'
            f"Args(model='m', api_key='{S['log_repr']}', tp_size=8)\n"
            f"api_key:\n    {S['yaml_next']}\nport: 8000\n"
            f'payload {{"token": {{"value": "{S["nested"]}"}}}}\n'
            f"git fetch https://{S['git_url']}@github.com/org/repo.git")
PEM_BODY = [_token(64, string.ascii_letters + string.digits + "+/") for _ in range(3)]
PEM_BLOCK = "\n".join(["-----BEGIN RSA PRIVATE KEY-----", *PEM_BODY,
                       "-----END RSA PRIVATE KEY-----"])

# What --no-redact must reveal (hangscope reads these places); the control for the test.
COLLECTED = ("api_key_flag", "hf_token_flag", "url_password", "assign", "bearer",
             "password_flag", "github", "aws_id", "jwt_sig", "slack_hook", "title", "thread",
             "comm", "shell", "hf", "env_url", "env_run_id", "log", "log_ini", "log_json",
             "log_repr", "env_fr", "env_ras", "env_slurm", "env_cuda", "odbc", "yaml_next",
             "nested", "git_url", "curl_u")


_LAYOUT = re.compile(r"[\s\u2500-\u257f]+")  # white space and box drawing


def leaks(text: str) -> list[str]:
    """The planted secrets that appear in ``text``, also when a table wrapped one over lines."""
    joined = _LAYOUT.sub("", text)
    return [name for name, value in S.items() if value in text or value in joined]


@pytest.fixture(scope="module")
def secret_job(tmp_path_factory: pytest.TempPathFactory) -> Iterator[JobHandle]:
    workdir = tmp_path_factory.mktemp("secrets")
    args = ["--title", f"reliability-rank0 --token={S['title']}",
            "--secret-thread-name", f"uploader token={S['thread']}",
            "--native-thread-name", f"pw={S['comm']}",
            "--foreign-secret", S["shell"],
            "--foreign-curl-password", S["curl_u"],
            "--say", LOG_LINE,
            *ARGV]
    with running_job(workdir, ranks=2, mode="idle", args=args, env=ENV,
                     expect=["shell", "curl"]) as handle:
        yield handle


def test_the_job_really_carries_the_secrets(secret_job: JobHandle) -> None:
    """The plants are where the tests think they are (else the tests below prove nothing)."""
    rank0 = secret_job.rank(0)
    assert S["title"] in Path(f"/proc/{rank0}/cmdline").read_text()
    rank1_argv = Path(f"/proc/{secret_job.rank(1)}/cmdline").read_text()
    assert S["api_key_flag"] in rank1_argv and S["slack_hook"] in rank1_argv
    # setproctitle overwrites rank 0's environ area: rank 1's environment is the readable one.
    assert S["hf"] in Path(f"/proc/{secret_job.rank(1)}/environ").read_text()
    comms = [p.read_text() for p in Path(f"/proc/{rank0}/task").glob("*/comm")]
    assert f"pw={S['comm']}\n" in comms
    assert S["log"] in secret_job.log.read_text()
    assert S["shell"] in Path(f"/proc/{secret_job.pids['shell']}/cmdline").read_text()


@pytest.mark.extended
@pytest.mark.parametrize("fmt", ["text", "md", "json"])
def test_dump_in_every_format_shows_no_secret(secret_job: JobHandle, hangscope_cli: Any,
                                              tmp_path: Path, fmt: str) -> None:
    shown = hangscope_cli("dump", str(secret_job.launcher), "--format", fmt, *FAST, timeout=90)
    assert shown.returncode == 0, shown.stderr
    assert leaks(shown.stdout + shown.stderr) == []
    out = tmp_path / f"report.{fmt}"
    out.write_text("stale")
    out.chmod(0o644)  # an existing, world-readable file is made private
    written = hangscope_cli("dump", str(secret_job.rank(1)), "--format", fmt, "-o", str(out),
                            *FAST, timeout=90)
    assert written.returncode == 0, written.stderr
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    text = out.read_text()
    assert leaks(text + written.stderr) == []
    if fmt == "json":
        doc = json.loads(text)
        assert doc["redacted"] is True
        # The names stay visible: a reader sees that a token was set and passed.
        rank = next(p for p in doc["processes"] if p["pid"] == secret_job.rank(1))
        assert "--api-key" in rank["cmdline"]
        for proc in doc["processes"]:  # only what hangscope reads is collected
            assert not set(proc["environ"]) & set(UNCOLLECTED_NAMES), proc["environ"]
        assert "TORCHELASTIC_RUN_ID" in rank["environ"]


@pytest.mark.extended
def test_saved_dump_shown_again_shows_no_secret(secret_job: JobHandle, hangscope_cli: Any,
                                                tmp_path: Path) -> None:
    saved = tmp_path / "dump.json"
    result = hangscope_cli("dump", str(secret_job.launcher), "-f", "json", "-o", str(saved),
                           *FAST, timeout=90)
    assert result.returncode == 0, result.stderr
    for fmt in ("text", "md", "json"):
        out = tmp_path / f"shown.{fmt}"
        shown = hangscope_cli("show", str(saved), "-f", fmt, "-o", str(out))
        assert shown.returncode == 0, shown.stderr
        assert stat.S_IMODE(out.stat().st_mode) == 0o600
        assert leaks(out.read_text() + shown.stderr) == []


def test_tui_save_and_screen_show_no_secret(secret_job: JobHandle, tmp_path: Path) -> None:
    """`s` in the TUI writes a Markdown and a JSON report (0600) with no secret in them."""
    from replay import ReplaySampler

    from hangscope.live.sampler import SampleOptions, Sampler
    from hangscope.tui.app import make_app

    snap = Sampler(secret_job.launcher, SampleOptions(samples=2, window=0.3)).snapshot()
    app = make_app(ReplaySampler([snap]), interval=3600, save_dir=tmp_path)
    screens: list[str] = []

    async def drive() -> None:
        async with app.run_test(size=(160, 50)) as pilot:
            for _ in range(200):
                if app.raw is not None:
                    break
                await pilot.pause(0.05)
            assert app.raw is not None, "the TUI never showed the snapshot"
            await pilot.press("s")
            await pilot.pause()
            screens.append(app.export_screenshot())

    asyncio.run(drive())
    assert app.saved is not None, "`s` did not save"
    for path in app.saved:
        assert stat.S_IMODE(path.stat().st_mode) == 0o600
        assert leaks(path.read_text()) == []
    assert str(secret_job.rank(1)) in screens[0]  # the screen shows the job
    assert leaks(screens[0]) == []


def test_no_redact_warns_loudly_and_reveals_what_it_says(secret_job: JobHandle,
                                                         hangscope_cli: Any,
                                                         tmp_path: Path) -> None:
    """The control: with --no-redact the collected secrets do appear, so the tests above look
    in the right places; the warning says so, and the file is still 0600."""
    out = tmp_path / "raw.json"
    result = hangscope_cli("dump", str(secret_job.launcher), "-f", "json", "-o", str(out),
                           "--no-redact", *FAST, timeout=90)
    assert result.returncode == 0, result.stderr
    assert "WARNING: --no-redact" in result.stderr
    assert "Do not paste it anywhere public" in result.stderr
    assert stat.S_IMODE(out.stat().st_mode) == 0o600
    text = out.read_text()
    assert json.loads(text)["redacted"] is False
    missing = [name for name in COLLECTED if S[name] not in text]
    assert missing == [], f"--no-redact did not show {missing}: those places are not read"
    help_text = hangscope_cli("dump", "--help").stdout
    assert "--no-redact" in help_text and "DANGER" in help_text


def test_report_files_are_created_0600_whatever_the_umask(secret_job: JobHandle,
                                                         tmp_path: Path) -> None:
    from hangscope.render.output import write_private

    old = os.umask(0)
    try:
        path = write_private(tmp_path / "r.md", "x")
    finally:
        os.umask(old)
    assert stat.S_IMODE(path.stat().st_mode) == 0o600


def test_private_key_cut_off_by_the_tail_window_is_masked() -> None:
    """A log tail can start inside a key: the body before a lone END line is masked too."""
    from hangscope.redact import redact_text

    cut = "\n".join(["step 10 loss 2.1", *PEM_BODY[1:], "-----END RSA PRIVATE KEY-----",
                     "step 11"])
    shown = redact_text(cut)
    assert not any(line in shown for line in PEM_BODY)
    assert "step 10 loss 2.1" in shown and "step 11" in shown
    escaped = "\\n".join([*PEM_BODY[1:], "-----END PRIVATE KEY-----"])  # a repr'd key
    assert not any(line in redact_text(escaped) for line in PEM_BODY)


@pytest.mark.extended
def test_private_key_printed_to_the_log_is_masked(tmp_path: Path,
                                                 hangscope_cli: Any) -> None:
    with running_job(tmp_path / "pem", ranks=1, mode="idle",
                     args=["--say", f"loading key\n{PEM_BLOCK}\nkey loaded"]) as handle:
        assert PEM_BODY[0] in handle.log.read_text()
        result = hangscope_cli("dump", str(handle.launcher), "-f", "json", *FAST, timeout=90)
    assert result.returncode == 0, result.stderr
    assert "key loaded" in result.stdout  # the log tail was read
    assert [line for line in PEM_BODY if line in result.stdout] == []


PATHOLOGICAL = {
    "base64-lines-and-a-key-mention": ("A" * 64 + "\n") * 1800 + "PRIVATE KEY",
    "many-lone-end-lines": ("A" * 64 + "\n-----END PRIVATE KEY-----\n") * 1800,
    "escaped-newlines": "x" * 8 + "n\\" * 50_000 + "-----END PRIVATE KEY-----",
    "open-quote": 'token="' + "a\\" * 60_000,
    "url-like": "http://a:b" * 12_000,
    "flags": "--token " * 15_000,
    "lists": "api_key=[" * 13_000,
}


@pytest.mark.quiet  # a time is the assertion
@pytest.mark.parametrize("name", sorted(PATHOLOGICAL))
def test_redaction_stays_fast_on_pathological_text(name: str) -> None:
    """A 64 KiB log tail or a 128 KiB argument must not stall a dump (a quadratic rule once
    took 17 s on the first case)."""
    import time

    from hangscope.redact import redact_text

    started = time.perf_counter()
    redact_text(PATHOLOGICAL[name])
    assert time.perf_counter() - started < 5.0  # generous: a quadratic rule took 17 s
