"""The one secret redactor: applied before anything is stored, shown or written.

hangscope reports end up pasted into public GitHub issues, so every env var, argv element,
thread name, cmdline string and log line goes through this module first. It keeps the
*name* of a secret visible and masks only its *value* with ``MASK`` (``"***"``), so a
reader still sees that ``HF_TOKEN`` was set or that ``--api-key`` was passed.

Pure functions, no I/O. Regexes are compiled at import; key-name checks and short texts are
memoised, because the same env values and argv come back for each of up to 64 ranks.

Why one file: one redactor. Names, argv, env and free text share the rules and their order
below, so a secret that one path masks no other path lets through; the tables below are the
rules, read in one place.

API
---
``MASK``                    the replacement text, ``"***"``
``is_sensitive_key(name)``  is this env var / flag / dict key / header name a secret's name?
``redact_env(env)``         dict: values of sensitive keys masked, every other value redact_text'ed
``redact_argv(argv)``       list: ``--flag VALUE`` / ``--flag=VALUE`` / ``KEY=VALUE`` masked,
                            then ``redact_text`` on each element
``redact_text(text)``       free text: the rules below, in this order
``redact_obj(obj)``         dicts / lists / tuples, recursively (sensitive dict key: every
                            scalar under it masked; list of strings: ``redact_argv``)

Sensitive names (``is_sensitive_key``)
--------------------------------------
The name is split into upper-case words (``-``, ``.``, spaces and camelCase become ``_``):
``x-api-key``, ``apiKey`` and ``API_KEY`` are the same name. Then, in order:

=========================================  ======================================  ======
rule                                       example                                 result
=========================================  ======================================  ======
known secret names                         ``HF_TOKEN``, ``SENTRY_DSN``            secret
on/off switch: first word DISABLE,         ``--enable-auth``,                      not
ENABLE, NO, SKIP or ALLOW                  ``--allow-credentials``
last word names a place, not a value:      ``HF_TOKEN_PATH``, ``--ssl-keyfile``,   not
ends in FILE PATH DIR SOCK URL URI         ``SSH_AUTH_SOCK``, ``DATABASE_URL``
ENDPOINT (a URL's password: text rules)
last word KEY, PASS, PW, DSN or SIG        ``KAGGLE_KEY``, ``--key``, ``DB_PASS``  secret
... but not PUBLIC_KEY, CACHE_KEY ...      ``SSH_PUBLIC_KEY``, ``cache_key``       not
contains TOKEN SECRET PASSWORD PASSWD      ``GITHUB_TOKEN``, ``x-api-key``,        secret
PASSPHRASE PWD API_KEY ACCESS_KEY          ``PGPASSWORD``, ``Authorization``,
PRIVATE_KEY SESSION_KEY CREDENTIAL CREDS   ``X-Amz-Signature``, ``Cookie``
AUTH SIGNATURE COOKIE BEARER
... after blanking these harmless words:
TOKENIZ* (tokenizer, detokenize)           ``--tokenizer-path``,                   not
                                           ``TOKENIZERS_PARALLELISM``
count word ... TOKENS (max, num, total,    ``--max-total-tokens``,                 not
new, batched, prefill, prompt, draft ...)  ``--max-num-batched-tokens``
... unless a word between names a          ``VALID_API_TOKENS``,                   secret
credential (api, auth, access, bot ...)    ``EXTRA_AUTH_TOKENS``
one special token (bos, eos, pad, image,   ``eos_token_id``,                       not
first, inter ...) + _TOKEN(S)              ``--bucket-time-to-first-token``
TOKEN(S) + _ID(S), _TYPE, _MAP, _RATIO,    ``token_type_ids``,                     not
_PER, _THRESHOLD ...                       ``--speculative-token-map``
AUTHOR, AUTHORITY (not AUTHORIZATION)      ``GIT_AUTHOR_NAME``, ``XAUTHORITY``     not
=========================================  ======================================  ======

``PWD`` / ``OLDPWD`` *with a path value* (``PWD=/home/x``) are the shell's directories and are
kept; any other ``PWD``/``Pwd=`` (ODBC, ``--pwd``) is a password.

Text rules (``redact_text``), applied in this order
----------------------------------------------------
==========================  ======================================  ===============================
what                        example                                 result
==========================  ======================================  ===============================
PEM private key block       ``-----BEGIN RSA PRIVATE KEY-----``     BEGIN / END lines kept, the
(to END, or to the end of   ``MIIE...``                             body in between ``***``
a cut-off text; or the      ``-----END RSA PRIVATE KEY-----``
base64 lines before an END
whose BEGIN was cut off)
credentials in a URL        ``postgres://app:s3cr@t@db:5432/x``     ``postgres://app:***@db:5432/x``
a token as a URL's user     ``https://<40 hex>@github.com/o/r``     ``https://***@github.com/o/r``
(long, or letters+digits)   (``git@``, ``postgres@`` are kept)
USER:PW@host, no scheme     ``ras:pw@10.0.0.1:28028``               ``ras:***@10.0.0.1:28028``
-u/--user USER:PW           ``curl -u admin:pw``                    ``curl -u admin:***``
                            (``--user 1000:1000``, a UID:GID, kept)
program password flags      ``sshpass -p pw``, ``mysql -ppw``,      ``-p***``, ``-a ***``
                            ``redis-cli -a pw``
.netrc                      ``machine h login u password pw``       ``password ***``
Cookie header (to EOL)      ``Cookie: sid=abc; csrftoken=def``      ``Cookie: ***``
KEY=VALUE, sensitive KEY    ``HF_TOKEN=abc``                        ``HF_TOKEN=***``
KEY: VALUE                  ``password: abc``                       ``password: ***``
quoted key and value        ``{"api_key": "a b"}``                  ``{"api_key": "***"}``
repr / kwargs               ``Args(api_key='x', tp=8)``             ``Args(api_key='***', tp=8)``
URL query parameter         ``/v1/x?token=abc&page=2``              ``/v1/x?token=***``
cut-off quoted value        ``token="abc def`` (no closing quote)   ``token="***``
literals are kept           ``api_key=None``, ``token: null``       unchanged
comma list of values        ``VALID_API_TOKENS=a,b``                ``VALID_API_TOKENS=***``
value on the lines below    ``api_key:`` / ``    VALUE`` (YAML,     every value indented under
(key ends its line)         ``token: |`` blocks)                    the key masked
nested object               ``{"token": {"value": "x"}}``           ``{"token": {"value": "***"}}``
Authorization header        ``Authorization: Bearer abc``           ``Authorization: Bearer ***``
sensitive flag in a string  ``--api-key abc --token=def``           ``--api-key *** --token=***``
(a value may start with     ``--api-key -abc123XYZ``                ``--api-key ***``
"-" unless it looks like
an option: --x, -v, -vvv)
printed argv list           ``['--hf-token', 'abc']``               ``['--hf-token', '***']``
bearer token anywhere       ``bearer eyJ0eXAiOiJKV1Qi``             ``bearer ***``
HuggingFace token           ``hf_`` + 30+ alnum                     ``hf_***``
OpenAI key                  ``sk-`` / ``sk-proj-`` + 20+            ``sk-***`` / ``sk-proj-***``
Anthropic key               ``sk-ant-api03-`` + 20+                 ``sk-ant-***``
GitHub token                ``ghp_`` ``gho_`` ``ghu_`` ``ghs_``     ``ghp_***`` ...
                            ``ghr_`` + 30+ alnum
GitHub fine-grained PAT     ``github_pat_`` + 22+                   ``github_pat_***``
GitLab / NGC / PyPI token   ``glpat-...`` ``nvapi-...`` ``pypi-...``  ``glpat-***`` ...
Stripe / npm / Slack app    ``sk_live_...`` ``whsec_...`` ``npm_...``  ``sk_live_***`` ...
                            ``xapp-1-...``
AWS access key id           ``AKIA`` / ``ASIA`` + 16 [A-Z0-9]       ``AKIA***`` / ``ASIA***``
Slack token                 ``xoxb-123-456-abc``                    ``xoxb-***``
Slack webhook               ``https://hooks.slack.com/services/T/B/x``  ``.../services/***``
JSON Web Token              ``eyJhbGciOi.eyJzdWIi.SflKxw``          ``eyJ***``
Google API key              ``AIza`` + 35                           ``AIza***``
wandb API key               ``wandb login`` + 40 hex digits         ``wandb login ***``
(40 hex on a wandb line)
==========================  ======================================  ===============================

A value that is already ``***`` is left as it is, so ``redact_text`` is idempotent.
Empty values stay empty (``HF_TOKEN=`` says the token is *unset*, which is no secret).

Known limits: a secret of no known shape, under a name that says nothing (``MY_VAR=abc``),
cannot be told from any other value. A password in a URL must be percent-encoded as URLs
require ("/" ends the user part). A short user name as a URL's only credential
(``https://abc@host``) is taken for a name. A boolean flag with a sensitive name (``--use-auth``)
followed by a positional argument gets that argument masked. ``redact_obj`` masks the value
of any key named ``signature``, so run it on collected data, not on hangscope's own
analysis output (``Group.signature`` is a stack signature).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from functools import lru_cache
from typing import Any

from hangscope.redact.context import (
    _BARE_CREDENTIALS,
    _LITERALS,
    _NETRC_LINE,
    _PASSWORD_PROGRAMS,
    _PEM_PRIVATE_KEY,
    _QUOTED,
    _SCHEMES,
    _URL_CREDENTIALS,
    _URL_USER,
    _USER_PASS,
    _USER_PASS_FLAGS,
    _YAML_BLOCK_STARTS,
    MASK,
    _brace_end,
    _line_indent,
    _mask_cut_pem_bodies,
    _mask_nested,
    _mask_netrc_line,
    _mask_program_passwords,
    _mask_quoted,
    _mask_url_user,
    _mask_user_pass,
    _mask_user_pass_value,
    _mask_yaml_block,
    _program_kind,
)

__all__ = [
    "MASK",
    "is_sensitive_key",
    "redact_argv",
    "redact_env",
    "redact_obj",
    "redact_text",
]


# --------------------------------------------------------------------------------------
# Sensitive names
# --------------------------------------------------------------------------------------

KNOWN_SECRET_NAMES = frozenset({
    "HF_TOKEN", "HUGGING_FACE_HUB_TOKEN", "HUGGINGFACE_TOKEN", "HUGGINGFACEHUB_API_TOKEN",
    "OPENAI_API_KEY", "ANTHROPIC_API_KEY", "AZURE_OPENAI_API_KEY", "AZURE_OPENAI_KEY",
    "AWS_SECRET_ACCESS_KEY", "AWS_SESSION_TOKEN", "AWS_ACCESS_KEY_ID",
    "WANDB_API_KEY", "GITHUB_TOKEN", "GH_TOKEN", "NGC_API_KEY", "NGC_CLI_API_KEY",
    "KAGGLE_KEY", "SENTRY_DSN", "VAULT_TOKEN", "COHERE_API_KEY", "MISTRAL_API_KEY",
})

#: The shell's current and previous directory: ``PWD=/home/x`` is no secret, but ODBC's
#: ``Pwd=`` and ``--pwd`` are, so only these exact names *with a path value* are kept.
_SHELL_DIRS = frozenset({"PWD", "OLDPWD"})


def _is_shell_dir(name: str, value: str) -> bool:
    """``PWD=/home/x``: the shell's directory, kept; ``Pwd=abc`` (ODBC) is a password."""
    return name in _SHELL_DIRS and value.startswith(("/", "~"))

#: Every sensitive name contains one of these (lower case): a text without any of them has
#: no sensitive KEY=VALUE or --flag, and those two rules are skipped.
_NAME_HINTS = (
    "tok", "secret", "pass", "pw", "key", "auth", "cred", "sig", "cookie", "dsn", "bearer",
)

#: A first word that makes the name an on/off switch, not a place for a secret.
_SWITCH_WORDS = frozenset({"DISABLE", "ENABLE", "NO", "SKIP", "ALLOW"})

#: A last word ending like this names where a secret lives (a path, a URL), not the secret.
_PLACE_SUFFIXES = ("FILE", "PATH", "DIR", "SOCK", "URL", "URI", "ENDPOINT")

#: A last word that is a secret on its own: KAGGLE_KEY, --key, DB_PASS, DB_PW, SENTRY_DSN.
_SECRET_LAST_WORDS = frozenset({"KEY", "PASS", "PW", "DSN", "SIG"})

_SENSITIVE_PART = re.compile(
    r"TOKEN|SECRET|PASSWORD|PASSWD|PASSPHRASE|PWD|API_?KEY|ACCESS_?KEY|PRIVATE_?KEY"
    r"|SESSION_?KEY|CREDENTIAL|CREDS|AUTH|SIGNATURE|COOKIE|BEARER|KEY_DATA"  # kube client-key-data
)

# Words that count LLM tokens: "MAX_NUM_BATCHED_TOKENS" is a number, not a credential.
_COUNT_WORDS = (
    "MAX|MIN|NUM|N|TOTAL|NEW|BATCHED|PREFILL|DECODE|INPUT|OUTPUT|PROMPT|COMPLETION|CONTEXT"
    "|GENERATED|GENERATION|GEN|DRAFT|SPECULATIVE|EXTRA|SPECIAL|STOP|ADDED|CACHED|LOOKAHEAD"
    "|SKIP|BAD|RETURN|CHUNK|CHUNKED|MASKED|IMAGE|VISION|AUDIO|VIDEO|MM|RESERVED|PADDED|PAD"
    "|PENDING|RUNNING|ALLOWED|IGNORE|IGNORED|EXPECTED|COMPUTED|PROCESSED|REASONING|THINKING"
    "|VALID|TARGET|COLLECT|SEEN|FULL|LONG|SHORT"
)
# Words between a count word and TOKENS that make them credentials again:
# VALID_API_TOKENS, EXTRA_AUTH_TOKENS, ALLOWED_ACCESS_TOKENS, MAX_BOT_TOKENS.
_CREDENTIAL_WORDS = (
    "API|AUTH[A-Z0-9]*|OAUTH[A-Z0-9]*|ACCESS|SECRET|SESSION|BEARER|REFRESH|BOT|PERSONAL"
    "|CLIENT|USER|SERVICE|DEPLOY|APP|ID|JWT|HF|GH|GITHUB|GITLAB|SLACK|CI|REGISTRY|ADMIN"
)
# Words naming one special token of a vocabulary: "eos_token_id", "time_to_first_token".
_SPECIAL_TOKEN_WORDS = (
    "BOS|EOS|PAD|UNK|SEP|CLS|MASK|START|END|STOP|IMAGE|VIDEO|AUDIO|SPECIAL|ADDED|THINK"
    "|FIRST|LAST|NEXT|INTER|EACH|PER"
)
# What a TOKEN word describes when it is a unit of text: "token_type_ids", "tokens_per_s".
_TOKEN_ATTR_WORDS = (
    "IDS?|TYPES?|MAP|LEN|LENGTH|COUNTS?|BUDGET|LIMIT|USAGE|LOGPROBS?|PER|LEVEL|INDEX"
    "|THRESHOLD|RATIO|SIZE|HISTOGRAM|BUCKETS?|LATENCY|RATE|STATS|DETAILS"
)
# Keys that are not secret although their last word is KEY.
_PUBLIC_KEY_WORDS = (
    "PUBLIC|SORT|CACHE|PRIMARY|FOREIGN|PARTITION|HASH|DICT|LOOKUP|GROUP|STATE|RNG|PRNG"
    "|RANDOM|SEED|SHARD|INDEX|QUERY|ROUTING|METRIC|LOG|HOST|MAP|UNIQUE|COMPOSITE|LABEL"
)

_BENIGN_PART = re.compile(
    r"TOKENI[SZ]"                                             # tokenizer, detokenize
    r"|AUTHOR(?!I[SZ])"                                       # author, authority; not authorize
    rf"|(?<=_)(?:{_COUNT_WORDS})(?:_(?!(?:{_CREDENTIAL_WORDS})_)[A-Z0-9]+)*?_TOKENS(?=_)"
    rf"|(?<=_)(?:{_SPECIAL_TOKEN_WORDS})_TOKENS?(?=_)"        # eos_token, first_token
    rf"|(?<=_)TOKENS?_(?:{_TOKEN_ATTR_WORDS})(?=_)"           # token_type_ids, tokens_per_s
    rf"|(?<=_)(?:{_PUBLIC_KEY_WORDS})_KEY(?=_)"               # public_key, cache_key
)

_MAX_NAME_LEN = 200

_CAMEL_ACRONYM = re.compile(r"([A-Z]+)([A-Z][a-z])")
_CAMEL_WORD = re.compile(r"([a-z])([A-Z])|([0-9])([A-Z][a-z])")
_NOT_ALNUM = re.compile(r"[^A-Za-z0-9]+")


def _normalize(name: str) -> str:
    """``--x-apiKey`` -> ``X_API_KEY``: upper-case words joined by one ``_``."""
    name = _CAMEL_ACRONYM.sub(r"\1_\2", name)
    name = _CAMEL_WORD.sub(lambda m: "_".join(g for g in m.groups() if g), name)
    return _NOT_ALNUM.sub("_", name).strip("_").upper()


@lru_cache(maxsize=8192)
def is_sensitive_key(name: str) -> bool:
    """Whether ``name`` (an env var, a flag, a dict key, a header) names a secret.

    Case, separators and camelCase do not matter; leading dashes of a flag are ignored.
    See the module docstring for the rules and their exceptions.
    """
    if len(name) > _MAX_NAME_LEN:  # not a real name: no exceptions, only the plain parts
        return _SENSITIVE_PART.search(_NOT_ALNUM.sub("_", name).upper()) is not None
    norm = _normalize(name)
    if not norm:
        return False
    if norm in KNOWN_SECRET_NAMES:
        return True
    words = norm.split("_")
    if len(words) > 1 and words[0] in _SWITCH_WORDS:
        return False
    if words[-1].endswith(_PLACE_SUFFIXES):
        return False
    blanked = _BENIGN_PART.sub("#", f"_{norm}_")
    last = blanked.rstrip("_").rsplit("_", 1)[-1]
    if last in _SECRET_LAST_WORDS:
        return True
    return _SENSITIVE_PART.search(blanked) is not None


# --------------------------------------------------------------------------------------
# Free text
# --------------------------------------------------------------------------------------

_COOKIE_HEADER = re.compile(
    r"(?<![\w*-])((?:set-)?cookie[ \t]*:[ \t]*)(?![\"'\s])([^\r\n\"']*[^\s\"'])",
    re.IGNORECASE,
)

# The look-behinds below also refuse "*": a start that only became possible because an
# earlier pass wrote "***" there would make a second pass differ from the first.
#
# KEY=VALUE / KEY: VALUE / "key": "value" / ['KEY'] = 'value'. Only the key is matched
# here; the value is parsed by _KV_VALUE when the key turns out to be sensitive, so the
# value of a harmless key is still scanned for secrets.
_KV_KEY = re.compile(
    r"(?<![\w.\-:*])(?<!://)(?P<kq>[\"']?)(?P<key>[A-Za-z_][\w.\-]*)(?P=kq)\]?"
    r"[ \t]*(?:=(?!=)|:(?!:))[ \t]*"
)
_WORD = r"[^\s,;)\]}\"'<>]+"
_KV_VALUE = re.compile(
    r"(?P<dq>\"(?:[^\"\\\n]|\\.)*\")"
    r"|(?P<sq>'(?:[^'\\\n]|\\.)*')"
    r"|(?P<oq>[\"'])(?P<open>[^\n]*)"
    r"|(?P<lst>\[[^\[\](){}\n]*\])"
    rf"|(?:(?P<scheme>(?i:{_SCHEMES}))(?P<ws>[ \t]+))?"
    # a word; one that ends in "=" or ":", or is followed by one, is itself the name of the
    # value after it (KEY=HF_TOKEN='x', KEY=HF_TOKEN = x), so that value goes with it
    # HF_TOKENS=a,b: a comma list goes with it, up to a chunk that is another KEY=VALUE
    rf"(?P<uval>(?![\[{{(]){_WORD}(?:,(?=[^\s,;)\]}}\"'<>=:]+(?![^\s,;)\]}}\"'<>])){_WORD})*"
    rf"(?:(?:(?<=[=:])|[ \t]*(?:=(?!=)|:(?!:)))[ \t]*(?:{_QUOTED}|[\"'][^\n]*|{_WORD}))?)"
)
# "(auth.py:55)" in a stack is a file and a line number, not "auth.py: ***".
_SOURCE_FILE = re.compile(r"\.(?:py|pyx|pyi|c|cc|cpp|cxx|h|hh|hpp|cu|cuh|rs|go|js|ts|java|jl|sh)\Z")

# --flag VALUE / --flag=VALUE / '--flag', 'VALUE' in a command string or a printed list.
_FLAG = re.compile(r"(?<![\w.\-/*])(?P<q>[\"']?)(?P<flag>--?[A-Za-z][\w.\-]*)")
_FLAG_VALUE_EQ = re.compile(
    rf"=(?P<v>(?P<qv>{_QUOTED})|(?P<oq>[\"'])[^\n]*|[^\s\"']+)"
)
# A value may start with "-" (``--api-key -abc123...``) when it is not shaped like an option:
# not "--x", not a short cluster of up to 4 letters ("-v", "-vvv"); "-1" is a number.
_NOT_AN_OPTION = r"(?!--)(?!-(?!\d)[^\s\"',\]]{0,4}(?![^\s\"',\]]))"
_FLAG_VALUE_SPACE = re.compile(
    rf"[ \t]+(?P<v>(?P<qv>{_QUOTED})|(?P<oq>[\"'])[^\n]*|{_NOT_AN_OPTION}[^\s\"']+)"
)
_FLAG_VALUE_LIST = re.compile(
    rf"(?P<q>[\"'])[ \t]*,[ \t]*[\"'](?P<v>{_NOT_AN_OPTION}[^\"'\n]+)"
)

_BEARER = re.compile(
    r"\b(bearer[ \t]+)"
    r"(?=[A-Za-z0-9._~+/=-]*\d|[A-Za-z0-9._~+/=-]{16})"
    r"[A-Za-z0-9._~+/=-]{8,}",
    re.IGNORECASE,
)

# Known token shapes: (literal needles, pattern, replacement). The pattern only runs when
# a needle is in the text; group 1 is the recognisable prefix that is kept.
_SHAPES: tuple[tuple[tuple[str, ...], re.Pattern[str], str], ...] = (
    (("hf_",), re.compile(r"\b(hf_)[A-Za-z0-9]{30,}"), r"\1***"),
    (("sk-",), re.compile(r"\b(sk-(?:ant-|proj-|svcacct-|admin-)?)[A-Za-z0-9_-]{20,}"), r"\1***"),
    (("ghp_", "gho_", "ghu_", "ghs_", "ghr_"), re.compile(r"\b(gh[pousr]_)[A-Za-z0-9]{30,}"),
     r"\1***"),
    (("github_pat_",), re.compile(r"\b(github_pat_)[A-Za-z0-9_]{22,}"), r"\1***"),
    (("glpat-", "gldt-", "glrt-", "glptt-", "glcbt-", "gloas-", "glsoat-"),
     re.compile(r"\b(gl(?:pat|dt|rt|ptt|cbt|oas|soat)-)[A-Za-z0-9_-]{20,}"), r"\1***"),
    (("sk_", "rk_"), re.compile(r"\b([sr]k_(?:live|test)_)[A-Za-z0-9]{16,}"), r"\1***"),
    (("whsec_",), re.compile(r"\b(whsec_)[A-Za-z0-9+/=]{20,}"), r"\1***"),
    (("npm_",), re.compile(r"\b(npm_)[A-Za-z0-9]{36}\b"), r"\1***"),
    (("xapp-",), re.compile(r"\b(xapp-)[0-9]-[A-Za-z0-9-]{10,}"), r"\1***"),
    (("nvapi-",), re.compile(r"\b(nvapi-)[A-Za-z0-9_-]{20,}"), r"\1***"),
    (("pypi-",), re.compile(r"\b(pypi-)[A-Za-z0-9_-]{50,}"), r"\1***"),
    (("AKIA", "ASIA", "ABIA", "ACCA"), re.compile(r"\b(AKIA|ASIA|ABIA|ACCA)[A-Z0-9]{16}\b"),
     r"\1***"),
    (("xox",), re.compile(r"\b(xox[abeprs]-)[A-Za-z0-9-]{10,}"), r"\1***"),
    (("hooks.slack.com",), re.compile(r"(https://hooks\.slack\.com/services/)[A-Za-z0-9/_-]+"),
     r"\1***"),
    (("eyJ",),
     re.compile(r"(?<![A-Za-z0-9_*-])(eyJ)[A-Za-z0-9_-]{8,}\.[A-Za-z0-9_-]{4,}\.[A-Za-z0-9_-]*"),
     r"\1***"),
    (("AIza",), re.compile(r"\b(AIza)[A-Za-z0-9_-]{35,}"), r"\1***"),
)

_WANDB_LINE = re.compile(r"^[^\n]*wandb[^\n]*", re.IGNORECASE | re.MULTILINE)
_HEX40 = re.compile(r"(?<![A-Za-z0-9])[0-9a-f]{40}(?![A-Za-z0-9])")


def _masked_kv_value(key: str, v: re.Match[str]) -> str:
    """The replacement for one parsed value of a sensitive key."""
    auth = "AUTH" in key.upper()
    if v.group("dq") is not None:
        return _mask_quoted(v.group("dq"), auth)
    if v.group("sq") is not None:
        return _mask_quoted(v.group("sq"), auth)
    if v.group("oq") is not None:
        return v.group("oq") + (MASK if v.group("open") else "")
    if v.group("lst") is not None:  # vLLM's api_key=['sk-...']: a flat list
        return v.group("lst") if v.group("lst") == "[]" else f"[{MASK}]"
    uval = v.group("uval")
    scheme = v.group("scheme")
    if scheme is None:
        return uval if uval in _LITERALS else MASK
    if auth:  # Authorization: Bearer <credential>
        return f"{scheme}{v.group('ws')}{MASK}"
    # "password: basic abc": the value is "basic"; what follows is other text.
    return f"{MASK}{v.group('ws')}{uval}"


def _is_label(text: str, m: re.Match[str]) -> bool:
    """``#token: 42`` (SGLang's counters) and ``auth.py:55`` (a stack frame) name no secret."""
    if ":" not in text[m.end("key"):m.end()]:
        return False
    if not text[m.end():m.end() + 1].isdigit():
        return False
    return text[m.start() - 1:m.start()] == "#" or _SOURCE_FILE.search(m.group("key")) is not None


#: What to put in at one key match: (start, end, replacement), or None to leave it.
_Edit = Callable[[str, re.Match[str]], tuple[int, int, str] | None]


def _splice(text: str, key: re.Pattern[str], resume: str | int, edit: _Edit) -> str:
    """Find each ``key`` in ``text`` and put in what ``edit`` says there; a match left alone
    resumes the search at its group ``resume``, an edit after what it replaced."""
    parts: list[str] = []
    last = pos = 0
    while (m := key.search(text, pos)) is not None:
        pos = m.end(resume)
        change = edit(text, m)
        if change is None:
            continue
        start, end, replacement = change
        parts += (text[last:start], replacement)
        last = pos = end
    if not parts:
        return text
    parts.append(text[last:])
    return "".join(parts)


def _kv_edit(text: str, m: re.Match[str]) -> tuple[int, int, str] | None:
    """``key: value``, ``key=value`` and their JSON / YAML forms: the value masked."""
    if not is_sensitive_key(m.group("key")) or _is_label(text, m):
        return None
    if text.startswith("{", m.end()):  # {"token": {"value": "..."}}: all of it
        end = _brace_end(text, m.end())
        return m.end(), end, _mask_nested(text[m.end():end])
    eol = text.find("\n", m.end())
    if (eol >= 0 and ":" in text[m.end("key"):m.end()]
            and text[m.end():eol].strip() in _YAML_BLOCK_STARTS):
        # api_key:\n    VALUE -- the value is on the lines indented below the key
        end, block = _mask_yaml_block(text, _line_indent(text, m.start()), eol + 1)
        return eol + 1, end, block
    v = _KV_VALUE.match(text, m.end())
    if v is None or (m.group("key") in _SHELL_DIRS and _is_shell_dir(
            m.group("key"), v.group(0))):
        return None
    return v.start(), v.end(), _masked_kv_value(m.group("key"), v)


def _redact_kv(text: str) -> str:
    return _splice(text, _KV_KEY, "key", _kv_edit)


def _masked_flag_value(v: re.Match[str]) -> str:
    groups = v.groupdict()
    if groups.get("qv") is not None:
        return _mask_quoted(groups["qv"], False)
    if groups.get("oq") is not None:  # a quote that is never closed: the rest of the line
        return groups["oq"] + (MASK if len(v.group("v")) > 1 else "")
    return MASK


def _flag_edit(text: str, m: re.Match[str]) -> tuple[int, int, str] | None:
    """``--flag VALUE``, ``--flag=VALUE`` and ``"--flag", "VALUE"``: the value masked."""
    if not is_sensitive_key(m.group("flag")):
        return None
    end = m.end()
    v = _FLAG_VALUE_EQ.match(text, end) or _FLAG_VALUE_SPACE.match(text, end)
    if v is None and m.group("q"):
        v = _FLAG_VALUE_LIST.match(text, end)
        if v is not None and v.group("q") != m.group("q"):
            v = None
    if v is None:
        return None
    return v.start("v"), v.end("v"), _masked_flag_value(v)


def _redact_flags(text: str) -> str:
    return _splice(text, _FLAG, 0, _flag_edit)


def _mask_wandb_line(m: re.Match[str]) -> str:
    return _HEX40.sub(MASK, m.group(0))


def _redact_text(text: str) -> str:
    if "PRIVATE KEY" in text:
        text = _PEM_PRIVATE_KEY.sub(lambda m: f"{m.group(1)}{MASK}{m.group(3)}", text)
        text = _mask_cut_pem_bodies(text)
    if "://" in text:
        text = _URL_CREDENTIALS.sub(rf"\1{MASK}@", text)
        text = _URL_USER.sub(_mask_url_user, text)
    if "@" in text:
        text = _BARE_CREDENTIALS.sub(rf"\1{MASK}@", text)
    lower = text.lower()
    if "-u" in text or "-U" in text:
        text = _USER_PASS.sub(_mask_user_pass, text)
    if "sshpass" in lower or "redis-cli" in lower or "mysql" in lower or "mariadb" in lower:
        text = _PASSWORD_PROGRAMS.sub(_mask_program_passwords, text)
    if "machine" in lower and "pass" in lower:
        text = _NETRC_LINE.sub(_mask_netrc_line, text)
    if "cookie" in lower:
        text = _COOKIE_HEADER.sub(rf"\1{MASK}", text)
    if any(hint in lower for hint in _NAME_HINTS):
        if "=" in text or ":" in text:
            text = _redact_kv(text)
        if "-" in text:
            text = _redact_flags(text)
    if "bearer" in lower:
        text = _BEARER.sub(rf"\1{MASK}", text)
    for needles, pattern, replacement in _SHAPES:
        if any(needle in text for needle in needles):
            text = pattern.sub(replacement, text)
    if "wandb" in lower:
        text = _WANDB_LINE.sub(_mask_wandb_line, text)
    return text


_redact_text_cached = lru_cache(maxsize=16384)(_redact_text)
_CACHE_MAX_LEN = 4096


def redact_text(text: str) -> str:
    """Mask secrets in free text: log lines, thread names, cmdline strings, messages.

    Idempotent: ``redact_text(redact_text(t)) == redact_text(t)``.
    """
    if not text:
        return text
    if len(text) <= _CACHE_MAX_LEN:
        return _redact_text_cached(text)
    return _redact_text(text)


# --------------------------------------------------------------------------------------
# Structured input
# --------------------------------------------------------------------------------------

def redact_env(env: Mapping[str, str]) -> dict[str, str]:
    """A copy of ``env``: values of sensitive names masked, every other value redact_text'ed.

    Names are kept. An empty value stays empty (it says the variable is unset).
    """
    out: dict[str, str] = {}
    for key, value in env.items():
        if not isinstance(value, str):
            out[key] = value
        elif value and is_sensitive_key(key) and not _is_shell_dir(key, value):
            out[key] = MASK
        else:
            out[key] = redact_text(value)
    return out


_ARGV_FLAG = re.compile(r"(--?[A-Za-z][\w.\-]*)(?:=(.*))?", re.DOTALL)
_ARGV_ASSIGN = re.compile(r"([A-Za-z_][\w.\-]*)=(.*)", re.DOTALL)
_OPTION_LIKE = re.compile(r"--|-(?!\d)[^\s]{0,4}\Z")


# sshpass -p PW, redis-cli -a PW (separate); sshpass -pPW, mysql -pPW (attached).
_PROGRAM_PASSWORD_ARGS = frozenset({("sshpass", "-p"), ("redis-cli", "-a")})
_PROGRAM_ATTACHED = {"sshpass": "-p", "mysql": "-p"}


def redact_argv(argv: Sequence[str]) -> list[str]:
    """A copy of ``argv`` with secret values masked; flag names and length are kept.

    ``--token X`` (X not itself an option), ``--token=X``, ``HF_TOKEN=X`` and secrets of a
    known shape anywhere. Harmless flags such as ``--tokenizer-path`` or
    ``--max-num-batched-tokens`` are left alone.
    """
    out: list[str] = []
    mask_next = user_pass_next = False
    program: str | None = None
    for arg in argv:
        if mask_next:
            mask_next = False
            if arg and not _OPTION_LIKE.match(arg):
                out.append(MASK)
                continue
        if user_pass_next:  # curl -u admin:PW
            user_pass_next = False
            if not _OPTION_LIKE.match(arg):
                out.append(redact_text(_mask_user_pass_value(arg)))
                continue
        program = _program_kind(arg) or program
        if arg in _USER_PASS_FLAGS:
            user_pass_next = True
        if program is not None and (program, arg) in _PROGRAM_PASSWORD_ARGS:
            out.append(arg)
            mask_next = True
            continue
        if program is not None and _PROGRAM_ATTACHED.get(program, "\0") == arg[:2] and len(arg) > 2:
            out.append(arg[:2] + MASK)
            continue
        m = _ARGV_FLAG.fullmatch(arg)
        if m and is_sensitive_key(m.group(1)):
            if m.group(2) is None:
                out.append(arg)
                mask_next = True
            else:
                out.append(f"{m.group(1)}={MASK}" if m.group(2) else arg)
            continue
        m = _ARGV_ASSIGN.fullmatch(arg)
        if (m and m.group(2) and is_sensitive_key(m.group(1))
                and not _is_shell_dir(m.group(1), m.group(2))):
            out.append(f"{m.group(1)}={MASK}")
            continue
        out.append(redact_text(arg))
    return out


def _mask_all(obj: Any) -> Any:
    """Everything under a sensitive key: scalars masked, structure and None/bools kept."""
    if obj is None or isinstance(obj, bool):
        return obj
    if isinstance(obj, str):
        return MASK if obj else obj
    if isinstance(obj, Mapping):
        return {key: _mask_all(value) for key, value in obj.items()}
    if isinstance(obj, list):
        return [_mask_all(item) for item in obj]
    if isinstance(obj, tuple):
        return tuple(_mask_all(item) for item in obj)
    return MASK


def redact_obj(obj: Any) -> Any:
    """A redacted copy of a JSON-able structure (dicts, lists, tuples, scalars).

    Strings go through ``redact_text`` (dict keys too); a list or tuple of strings goes
    through ``redact_argv`` so ``["--api-key", "X"]`` is caught; under a sensitive dict key
    every scalar is masked (``None`` and booleans kept, containers keep their shape).
    Other objects are returned as they are.
    """
    if isinstance(obj, str):
        return redact_text(obj)
    if isinstance(obj, Mapping):
        out: dict[Any, Any] = {}
        for key, value in obj.items():
            if isinstance(key, str):
                secret = is_sensitive_key(key) and not (
                    isinstance(value, str) and _is_shell_dir(key, value))
                new_value = _mask_all(value) if secret else redact_obj(value)
                out[redact_text(key)] = new_value
            else:
                out[key] = redact_obj(value)
        return out
    if isinstance(obj, (list, tuple)):
        if obj and all(isinstance(item, str) for item in obj):
            items = redact_argv(obj)
        else:
            items = [redact_obj(item) for item in obj]
        return tuple(items) if isinstance(obj, tuple) else items
    return obj
