"""A corpus of real secret shapes (all fake) as they appear in argv, env, configs and logs.

Each entry is a text a hung job can print or be started with, and the secret parts that must not
survive ``redact_text``. The Hypothesis tests put generated secrets inside realistic lines, and
check that ordinary diagnostic text (paths, PIDs, NCCL communicator hashes, SHAs, shapes) stays.
"""

from __future__ import annotations

import shlex
import string
from urllib.parse import quote

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from hangscope.redact import MASK, redact_argv, redact_env, redact_obj, redact_text

AWS_ID = "AKIA" + "Z7Q4XK2MNB8RT5WY"
AWS_STS_ID = "ASIA" + "Q2W3E4R5T6Y7U8I9"
AWS_SECRET = "wJalrXUtnFEMI/K7MDENG/bPxRfiCYz9q8Lk2VbN"
AWS_SESSION = "IQoJb3JpZ2luX2VjEJr//////////wEaCXVzLWVhc3QtMSJHMEUCIQD6v8"
GCP_KEY_BODY = "MIIEvQIBADANBgkqhkiG9w0BAQEFAASCBKcwggSjAgEAAoIBAQC7Vq3z"
AZURE_KEY = (
    "Eby8vdM02xNOcqFlqUwJPLlmEtlCDXJ1OUzFT50uSRZ6IFsuFq2UVErCz4I6tq/K1SZFPTOtr/KBHBeksoGMGw=="
)
SAS_SIG = "2f8Q%2BkTfV9mZq3xW7yNcR5aLbE1oH4uJ6iK0pD8sG2c%3D"
DB_PW = "Tr0ub4dor&3xQ"
GH_TOKEN = "ghp_" + "k3J9xZ2mQ7wR4tY8uI1oP5aS6dF0gH3jK7lL"
GL_TOKEN = "glpat-" + "Xy7Zq2Wm9Kp4Rt8Vn3Bc"
SLACK_BOT = "xoxb-" + "2048-409612345678-Kq8ZxV3mN7pR2tY6wB1cD4fG"
SLACK_USER = "xoxp-" + "1111-2222333344-5555666677-abcdef0123456789"
STRIPE = "sk_live_" + "51HqZ3kLm9Np2Qr7St4Uv6Wx"
STRIPE_RK = "rk_test_" + "4eC39HqLyjWDarjtT1zdp7dc"
OPENAI = "sk-proj-" + "Qm3ZxT8kL2pW7nR4vB9cY6sD1fG5hJ0a"
ANTHROPIC = "sk-ant-api03-" + "Zx8Kq3Lm7Np2Qr9St4Uv6Wx1Yz5Ab0Cd-_Ef"
HF = "hf_" + "QwErTyUiOpAsDfGhJkLzXcVbNm12345678"
JWT = (
    "eyJhbGciOiJSUzI1NiIsImtpZCI6IjFlOWdkazcifQ"
    ".eyJpc3MiOiJodHRwczovL2t1YmVybmV0ZXMuZGVmYXVsdCIsInN1YiI6InN5c3RlbSJ9"
    ".Qm3ZxT8kL2pW7nR4vB9cY6sD1fG5hJ0aXq"
)
KUBE_KEY_DATA = "LS0tLS1CRUdJTiBSU0EgUFJJVkFURSBLRVktLS0tLQpNSUlFcEFJQkFBS0NBUUVB"
DOCKER_AUTH = "ZGVwbG95OmhIN2tNMnhRcTlaYlA0dlc="
BASIC = "YWxpY2U6czNjcjN0LXBhc3N3MHJk"
NETRC_PW = "n3trcPa55w0rd"
SENTRY_KEY = "9f8e7d6c5b4a39281706f5e4d3c2b1a0"
PEM_BODY = "MIIEowIBAAKCAQEAt5Zq3xZkLm9Np2Qr7St4Uv6WxYz0Ab1Cd2Ef3Gh4Ij5K"

CORPUS: list[tuple[str, str, tuple[str, ...]]] = [
    (
        "aws env export",
        f"export AWS_ACCESS_KEY_ID={AWS_ID}\nexport AWS_SECRET_ACCESS_KEY={AWS_SECRET}",
        (AWS_ID[4:], AWS_SECRET),
    ),
    (
        "aws credentials file",
        f"[default]\naws_access_key_id = {AWS_STS_ID}\n"
        f"aws_secret_access_key = {AWS_SECRET}\naws_session_token = {AWS_SESSION}",
        (AWS_STS_ID[4:], AWS_SECRET, AWS_SESSION),
    ),
    (
        "aws key in a boto error",
        f"botocore: signing with credentials {AWS_ID} for s3",
        (AWS_ID[4:],),
    ),
    (
        "gcp service account json",
        '{"type": "service_account", "project_id": "ml-prod", "private_key_id": "a1b2c3d4e5f6a7b8",'
        ' "private_key": "-----BEGIN PRIVATE KEY-----\\n'
        f'{GCP_KEY_BODY}\\n-----END PRIVATE KEY-----\\n",'
        ' "client_email": "trainer@ml-prod.iam.gserviceaccount.com"}',
        (GCP_KEY_BODY, "a1b2c3d4e5f6a7b8"),
    ),
    (
        "azure storage connection string",
        "DefaultEndpointsProtocol=https;AccountName=mlprod;"
        f"AccountKey={AZURE_KEY};EndpointSuffix=core.windows.net",
        (AZURE_KEY[:20],),
    ),
    (
        "azure service bus",
        "Endpoint=sb://ns.servicebus.windows.net/;SharedAccessKeyName=Root;"
        f"SharedAccessKey={AZURE_KEY[:44]}",
        (AZURE_KEY[:20],),
    ),
    (
        "azure sas url",
        "https://mlprod.blob.core.windows.net/ckpt/model.pt?sv=2022-11-02&ss=b"
        f"&srt=co&sp=rl&se=2026-12-01T00:00:00Z&sig={SAS_SIG}",
        (SAS_SIG,),
    ),
    (
        "git credential url",
        f"fatal: unable to access 'https://alice:{GH_TOKEN}@github.com/o/r.git/'",
        (GH_TOKEN[4:],),
    ),
    (
        "git token-only url",
        f"remote.origin.url=https://{GL_TOKEN}@gitlab.com/o/r.git",
        (GL_TOKEN[6:],),
    ),
    ("git x-access-token", f"https://x-access-token:{DB_PW}@github.com/o/r", (DB_PW,)),
    ("postgres dsn", f"DATABASE_URL=postgres://app:{DB_PW}@db.internal:5432/ml", (DB_PW,)),
    ("mysql dsn", f"mysql://root:{DB_PW}@10.0.0.5:3306/runs", (DB_PW,)),
    (
        "mongodb srv",
        f"mongodb+srv://trainer:{DB_PW}@cluster0.ab1cd.mongodb.net/?retryWrites=true",
        (DB_PW,),
    ),
    ("redis no user", f"CELERY_BROKER=redis://:{DB_PW}@redis:6379/0", (DB_PW,)),
    ("jdbc query", f"jdbc:postgresql://db:5432/ml?user=app&password={DB_PW}&ssl=true", (DB_PW,)),
    (
        "jdbc sqlserver",
        f"jdbc:sqlserver://db:1433;databaseName=ml;user=sa;password={DB_PW};",
        (DB_PW,),
    ),
    ("odbc", f"Driver={{ODBC Driver 18}};Server=db;Database=ml;Uid=sa;Pwd={DB_PW};", (DB_PW,)),
    ("bearer header", f"-H 'Authorization: Bearer {JWT}'", (JWT[10:],)),
    ("basic header", f"Authorization: Basic {BASIC}", (BASIC,)),
    ("header dict", f"headers={{'Authorization': 'Basic {BASIC}', 'Accept': 'json'}}", (BASIC,)),
    ("netrc", f"machine api.wandb.ai login user password {NETRC_PW}", (NETRC_PW,)),
    ("netrc multiline", f"machine github.com\n  login alice\n  password {NETRC_PW}\n", (NETRC_PW,)),
    (
        "yaml config",
        f"wandb:\n  entity: ml\n  api_key: {HF}\nhub:\n  token:\n    {DB_PW}\n",
        (HF[3:], DB_PW),
    ),
    (
        "json config",
        f'{{"hub": {{"token": "{HF}"}}, "db": {{"password": "{DB_PW}"}}}}',
        (HF[3:], DB_PW),
    ),
    (
        "toml config",
        f'[openai]\napi_key = "{OPENAI}"\n[db]\npassword = "{DB_PW}"',
        (OPENAI[8:], DB_PW),
    ),
    (
        "kube config",
        "users:\n- name: admin\n  user:\n    client-certificate-data: LS0tQ0VSVA==\n"
        f"    client-key-data: {KUBE_KEY_DATA}\n    token: {JWT}\n",
        (KUBE_KEY_DATA, JWT[10:]),
    ),
    (
        "docker config.json",
        '{"auths": {"registry.example.com": {"auth": "'
        + DOCKER_AUTH
        + '", "identitytoken": "'
        + DB_PW
        + '"}}}',
        (DOCKER_AUTH, DB_PW),
    ),
    (
        "slack",
        f"SlackApiError: token {SLACK_BOT} revoked; user {SLACK_USER}",
        (SLACK_BOT[5:], SLACK_USER[5:]),
    ),
    ("stripe", f"stripe.api_key set: {STRIPE} fallback {STRIPE_RK}", (STRIPE[8:], STRIPE_RK[8:])),
    ("github", f"using {GH_TOKEN} for the hub", (GH_TOKEN[4:],)),
    ("gitlab", f"CI_JOB_TOKEN fallback {GL_TOKEN}", (GL_TOKEN[6:],)),
    ("openai", f"openai.AuthenticationError: Incorrect API key provided: {OPENAI}", (OPENAI[8:],)),
    ("anthropic", f"client = Anthropic({ANTHROPIC!r})", (ANTHROPIC[13:],)),
    ("huggingface", f"huggingface-cli login --token {HF}", (HF[3:],)),
    ("jwt alone", f"refresh failed for {JWT}", (JWT[10:],)),
    (
        "pem",
        f"-----BEGIN EC PRIVATE KEY-----\n{PEM_BODY}\n{PEM_BODY[::-1]}\n"
        "-----END EC PRIVATE KEY-----",
        (PEM_BODY, PEM_BODY[::-1]),
    ),
    (
        "sentry dsn",
        f"sentry_sdk.init('https://{SENTRY_KEY}@o450123.ingest.sentry.io/5501234')",
        (SENTRY_KEY,),
    ),
    ("curl -u", f"curl -sf -u deploy:{DB_PW} https://nexus/repo", (DB_PW,)),
    ("sshpass", f"sshpass -p {DB_PW} rsync -a ckpt/ node2:/ckpt", (DB_PW,)),
    ("mysql -p", f"mysql -h db -u root -p{DB_PW} runs", (DB_PW,)),
    ("dash-leading api key", f"python serve.py --api-key -{DB_PW}Zz --port 8000", (DB_PW,)),
    ("token list", f"VALID_API_TOKENS={DB_PW},{NETRC_PW}", (DB_PW, NETRC_PW)),
]


@pytest.mark.parametrize(
    "text,secrets", [(t, s) for _, t, s in CORPUS], ids=[name for name, _, _ in CORPUS]
)
def test_every_secret_of_the_corpus_is_masked_in_text(text: str, secrets: tuple[str, ...]) -> None:
    out = redact_text(text)
    for secret in secrets:
        assert secret not in out, out
    assert MASK in out
    assert redact_text(out) == out


COMMANDS = frozenset({"curl", "sshpass", "mysql", "python", "huggingface-cli", "-H", "export"})


@pytest.mark.parametrize(
    "text,secrets", [(t, s) for _, t, s in CORPUS], ids=[name for name, _, _ in CORPUS]
)
def test_every_secret_of_the_corpus_is_masked_as_argv_env_and_json(
    text: str, secrets: tuple[str, ...]
) -> None:
    channels = [
        " ".join(redact_argv(["python", "-c", text])),
        str(redact_env({"EXTRA_ARGS": text, "NCCL_DEBUG": text})),
        str(redact_obj({"log_tail": text, "title": text, "threads": [{"name": text}]})),
    ]
    if text.split(" ")[0] in COMMANDS:  # a command line: its words as a process's argv
        channels.append(" ".join(redact_argv(shlex.split(text))))
    for out in channels:
        for secret in secrets:
            assert secret not in out, out


# --------------------------------------------------------------------------------------
# Generated: secrets of known shapes inside realistic lines
# --------------------------------------------------------------------------------------

ALNUM = string.ascii_letters + string.digits
_body = st.text(ALNUM, min_size=36, max_size=44)

SHAPED = st.one_of(
    _body.map(lambda b: "hf_" + b[:34]),
    _body.map(lambda b: "ghp_" + b[:36]),
    _body.map(lambda b: "sk-proj-" + b),
    _body.map(lambda b: "sk-ant-api03-" + b),
    _body.map(lambda b: "glpat-" + b[:20]),
    _body.map(lambda b: "sk_live_" + b[:24]),
    st.text(string.ascii_uppercase + string.digits, min_size=16, max_size=16).map(
        lambda b: "AKIA" + b
    ),
    _body.map(lambda b: "xoxb-1234-5678-" + b[:24]),
    st.tuples(_body, _body).map(lambda p: f"eyJ{p[0][:20]}.eyJ{p[1][:20]}.{p[0][20:]}"),
)
# Anything at all, under a name or in a place that says it is a secret.
ANY_SECRET = st.text(ALNUM + "+/=_.~!%^*-", min_size=10, max_size=40).filter(
    lambda s: not s.startswith(("-", "=")) and s.strip("*") and MASK not in s
)

NAMED_LINES = [
    "export HF_TOKEN={s}",
    "DB_PASSWORD={s} python train.py",
    "--api-key {s} --tp 8",
    "--hf-token={s}",
    '{{"api_key": "{s}", "tp": 8}}',
    "Args(api_key='{s}', tp_size=8)",
    "Authorization: Bearer {s}",
    "password: {s}",
    "api_key:\n    {s}\n",
    'token = "{s}"',
    "https://user:{q}@db.internal:5432/x",
    "curl -u admin:{s} https://h",
    "Pwd={s};Uid=sa",
    "GET /v1/models?token={s}&page=2",
    "['--openai-api-key', '{s}']",
    "machine h login u password {s}",
    '{{"token": {{"value": "{s}"}}}}',
    "secret={s}",
    "AccountKey={s};EndpointSuffix=x",
]
COMMAND_LINES = frozenset(
    {
        "DB_PASSWORD={s} python train.py",
        "--api-key {s} --tp 8",
        "--hf-token={s}",
        "curl -u admin:{s} https://h",
        "secret={s}",
    }
)
SHAPE_LINES = [
    "INFO worker 3 using {s} for the hub",
    "[rank2]: auth failed with {s}",
    "thread {s}",
    "client = Client('{s}')",
    "loaded key {s} from env",
    "{s}",
]


@settings(max_examples=400, deadline=None)
@given(secret=ANY_SECRET, template=st.sampled_from(NAMED_LINES))
def test_generated_secret_under_a_sensitive_name_never_survives(secret: str, template: str) -> None:
    # a password in a URL is percent-encoded ("/" would end the host part)
    secret = quote(secret, safe="") if "{q}" in template else secret
    line = template.format(s=secret, q=secret)
    assert secret not in redact_text(line)
    assert secret not in " ".join(redact_argv(["sh", "-c", line]))
    if template in COMMAND_LINES:
        assert secret not in " ".join(redact_argv(line.split(" ")))


@settings(max_examples=400, deadline=None)
@given(secret=SHAPED, template=st.sampled_from(SHAPE_LINES + NAMED_LINES))
def test_generated_secret_of_a_known_shape_never_survives_anywhere(
    secret: str, template: str
) -> None:
    line = template.format(s=secret, q=secret)
    body = secret[-16:]
    assert body not in redact_text(line)
    assert body not in str(redact_obj({"name": line, "argv": line.split(" ")}))


# --------------------------------------------------------------------------------------
# Ordinary diagnostic text stays as it is
# --------------------------------------------------------------------------------------

_hex = st.text("0123456789abcdef", min_size=8, max_size=16)
BENIGN = st.one_of(
    _hex.map(
        lambda h: f"NCCL INFO comm 0x{h} rank 3 nRanks 8 nNodes 1 localRanks 8 - Init COMPLETE"
    ),
    st.text("0123456789abcdef", min_size=40, max_size=40).map(lambda h: f"commit {h} (HEAD)"),
    st.tuples(st.integers(1, 4_194_304), st.integers(0, 7)).map(
        lambda p: f"PID {p[0]} rank {p[1]} state S wchan futex_wait_queue"
    ),
    st.tuples(st.integers(1, 65536), st.integers(1, 65536)).map(
        lambda p: f"tensor shape [{p[0]}, {p[1]}] dtype torch.bfloat16 device cuda:0"
    ),
    st.tuples(st.integers(1, 255), st.integers(1, 65535)).map(
        lambda p: f"MASTER_ADDR=10.0.0.{p[0]} MASTER_PORT={p[1]} listening on 0.0.0.0:{p[1]}"
    ),
    st.integers(1, 64).map(lambda n: f"python -m sglang.launch_server --tp-size {n} --port 30000"),
    st.integers(1, 64).map(
        lambda n: f"--max-num-batched-tokens {n * 1024} --tokenizer-path /m/tok"
    ),
    _hex.map(
        lambda h: f"/home/alice/.cache/huggingface/hub/models--meta/snapshots/{h}/config.json"
    ),
    st.integers(1, 99).map(lambda n: f'File "/opt/venv/lib/auth.py", line {n}, in check_auth'),
    st.integers(0, 9).map(lambda n: f"ssh://git@github.com/org/repo.git PWD=/home/alice/run{n}"),
    st.integers(0, 9).map(lambda n: f"docker run --user 1000:1000 -v /data:/data img:{n}"),
    _hex.map(lambda h: f"sha256:{h}{h}  model-0000{len(h) % 9}-of-00008.safetensors"),
)


@settings(max_examples=300, deadline=None)
@given(line=BENIGN)
def test_ordinary_diagnostic_text_is_not_masked(line: str) -> None:
    assert redact_text(line) == line
    assert redact_argv(line.split(" ")) == line.split(" ")
