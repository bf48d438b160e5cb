"""Secrets that only their context gives away, for ``hangscope.redact``: PEM key bodies, URL
and ``USER:PW@host`` credentials, ``curl -u``/``sshpass -p``/``mysql -p``/``redis-cli -a``,
``.netrc`` lines, YAML values on the lines below their key, and objects nested under a
sensitive key. Pure functions over text; the rules are listed in ``hangscope.redact``.
"""

from __future__ import annotations

import re

MASK = "***"

_SCHEMES = "bearer|basic|token|bot|digest|negotiate"
_QUOTED = r"\"(?:[^\"\\\n]|\\.)*\"|'(?:[^'\\\n]|\\.)*'"
_SCHEME_PREFIX = re.compile(rf"((?i:{_SCHEMES})[ \t]+)(.*)", re.DOTALL)
_LITERALS = frozenset({"None", "null", "nil", "true", "false", "True", "False", "undefined"})


def _mask_quoted(quoted: str, keep_scheme: bool) -> str:
    quote, inner = quoted[0], quoted[1:-1]
    if not inner or inner == MASK:
        return quoted
    if keep_scheme:
        m = _SCHEME_PREFIX.fullmatch(inner)
        if m and m.group(2):
            return f"{quote}{m.group(1)}{MASK}{quote}"
    return f"{quote}{MASK}{quote}"


_PEM_PRIVATE_KEY = re.compile(
    r"(-----BEGIN [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----)"
    r"(.*?)"
    r"(-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----|\Z)",
    re.DOTALL,
)
# The body of a key whose BEGIN line was cut off (a log tail that starts inside the key):
# the base64 lines (real or escaped newlines) right before a lone END line, starting after
# white space, a quote, an escaped newline or the start. The last line break is kept as it
# was, so an escaped one stays escaped. Matched backwards from each END line on the reversed
# text: a forward regex retried at every line start is quadratic (seconds for 64 KiB).
_PEM_END = re.compile(r"-----END [A-Z0-9 ]*PRIVATE KEY(?: BLOCK)?-----")
_PEM_CUT_BODY_REVERSED = re.compile(
    r"(?P<nl>\n\r?|n\\)[ \t]*[A-Za-z0-9+/=]{8,}[ \t]*"
    r"(?:(?:\n\r?|n\\)[ \t]*[A-Za-z0-9+/=]{8,}[ \t]*)*"
    r"(?=[\s\"']|n\\|\Z)"
)


def _mask_cut_pem_bodies(text: str) -> str:
    parts: list[str] = []
    last = 0
    for end in _PEM_END.finditer(text):
        before = text[last:end.start()]
        body = _PEM_CUT_BODY_REVERSED.match(before[::-1])
        if body:
            before = before[:len(before) - body.end()] + MASK + body.group("nl")[::-1]
        parts += (before, end.group())
        last = end.end()
    if not parts:
        return text
    parts.append(text[last:])
    return "".join(parts)

# scheme://user:PASSWORD@host -- the password runs to the last "@" before "/", "?", "#" or
# a space, so an unescaped "@" in it is masked too.
_URL_CREDENTIALS = re.compile(
    r"((?<![A-Za-z0-9+.*-])[A-Za-z][A-Za-z0-9+.-]*://[^\s/?#@:\"'<>]{0,256}:)"
    r"([^\s/?#\"'<>]{1,4096})@"
)

# scheme://USER@host where the user part alone is the credential: a token cloned with
# (https://<token>@github.com/...), a Sentry DSN's public key. Plain names (git@, postgres@,
# x-access-token:) are kept: only a user part that looks like a token is masked. Of any length:
# a cap would leave a longer one whole, and the token shapes masked inside it after would bring
# it under the cap for the next pass (redact_text must be idempotent). The run cannot hold "@"
# or ":", so a lookahead that fails at its end fails at every shorter end too: linear.
_URL_USER = re.compile(
    r"((?<![A-Za-z0-9+.*-])[A-Za-z][A-Za-z0-9+.-]*://)([^\s/?#@:\"'<>]{12,})"
    r"(?=@|:[^\s/?#\"'<>]*@)"
)


# USER:PASSWORD@host without a scheme (NCCL_RAS_ADDR, proxies, rsync/scp-style targets): the
# host must look like one (a dotted name or address, localhost, [IPv6]).
_BARE_CREDENTIALS = re.compile(
    r"(?<![\w.*:/@-])([A-Za-z_][\w.-]{0,63}:)(?!\*\*\*@)([^\s@/:\"'<>]{1,256})@"
    r"(?=[A-Za-z0-9-]+(?:\.[A-Za-z0-9-]+)+|localhost\b|\[[0-9A-Fa-f:]+\])"
)


def _token_like(word: str) -> bool:
    """A word that looks like a generated credential rather than a name."""
    if len(word) >= 20:
        return True
    return any(c.isdigit() for c in word) and any(c.isalpha() for c in word)


def _mask_url_user(m: re.Match[str]) -> str:
    return f"{m.group(1)}{MASK}" if _token_like(m.group(2)) else m.group(0)


# -u / --user USER:PASSWORD (curl, wget, httpie, docker's UID:GID is kept).
_USER_PASS_FLAGS = frozenset({"-u", "-U", "--user", "--proxy-user", "--http-user"})
_USER_PASS = re.compile(
    r"(?<![\w.\-/*])(?P<flag>-u|-U|--user|--proxy-user|--http-user)"
    r"(?P<sep>=|[ \t]+|(?=[^\s\-]))(?P<q>[\"']?)(?P<user>[^\s:\"']*):(?P<pw>[^\s\"']+)"
)


def _mask_user_pass_value(value: str) -> str:
    """``admin:pw`` -> ``admin:***``; ``1000:1000`` (a UID:GID) and ``a:***`` stay."""
    user, sep, pw = value.partition(":")
    if not sep or not pw or pw == MASK or (user.isdigit() and pw.isdigit()):
        return value
    return f"{user}:{MASK}"


def _mask_user_pass(m: re.Match[str]) -> str:
    value = _mask_user_pass_value(f"{m.group('user')}:{m.group('pw')}")
    return f"{m.group('flag')}{m.group('sep')}{m.group('q')}{value}"


# Short flags that carry a password for one program only: sshpass -p PW, redis-cli -a PW,
# mysql -pPW (a lone "-p" makes mysql prompt; the word after it is the database).
_PASSWORD_PROGRAMS = re.compile(
    r"(?<![\w.\-*])(?P<prog>sshpass|redis-cli|mysql[a-z]*|mariadb[a-z-]*)(?=[\s\"'])"
    r"(?P<rest>[^\n;|&]*)"
)
_PROGRAM_PASSWORD_FLAG = {
    "sshpass": re.compile(r"(?<=\s)(-p)([ \t]*)(?!\*\*\*)([^\s\"']+)"),
    "redis-cli": re.compile(r"(?<=\s)(-a)([ \t]+)(?!\*\*\*)([^\s\"']+)"),
    "mysql": re.compile(r"(?<=\s)(-p)()(?!\*\*\*)([^\s\"']+)"),
}


def _program_kind(name: str) -> str | None:
    base = name.rsplit("/", 1)[-1]
    if base in ("sshpass", "redis-cli"):
        return base
    if base.startswith(("mysql", "mariadb")):
        return "mysql"
    return None


def _mask_program_passwords(m: re.Match[str]) -> str:
    kind = _program_kind(m.group("prog"))
    if kind is None:
        return m.group(0)
    rest = _PROGRAM_PASSWORD_FLAG[kind].sub(rf"\1\2{MASK}", m.group("rest"), count=1)
    return m.group("prog") + rest


# .netrc: "machine api.github.com login alice password PW"
# (one line, or "password PW" on a line of its own below the machine line)
_NETRC_LINE = re.compile(
    r"^[^\n]*\bmachine[ \t]+\S+[^\n]*$|^[ \t]*(?:password|passwd)[ \t]+\S+[ \t]*$",
    re.MULTILINE)
_NETRC_PASSWORD = re.compile(r"(?<![\w-])((?:password|passwd)[ \t]+)(?!\*\*\*(?!\S))\S+")


def _mask_netrc_line(m: re.Match[str]) -> str:
    return _NETRC_PASSWORD.sub(rf"\1{MASK}", m.group(0))


# A sensitive key that ends its line (``api_key:``, ``token: |``) has its value on the lines
# indented below it (YAML); every such line's value is masked.
_YAML_BLOCK_STARTS = frozenset({"", "|", ">", "|-", ">-", "|+", ">+"})
_YAML_CHILD = re.compile(
    r"(?P<lead>[ \t]*(?:-[ \t]+)?)"
    r"(?:(?P<key>[\"']?[\w.\-/ ]*[\w\"'][ \t]*:)(?=[ \t]|\Z)[ \t]*)?(?P<val>.*)"
)
_NESTED_LIMIT = 16384


def _line_indent(text: str, at: int) -> int:
    start = text.rfind("\n", 0, at) + 1
    line = text[start:at]
    return len(line) - len(line.lstrip(" \t"))


def _mask_yaml_line(line: str) -> str:
    m = _YAML_CHILD.fullmatch(line)
    if m is None:  # pragma: no cover - the pattern matches every line without "\n"
        return MASK
    val = m.group("val").rstrip()
    if not val or val == MASK or val.startswith("#") or val in _LITERALS:
        return line
    key = f"{m.group('key')} " if m.group("key") else ""
    if val[0] in "\"'" and len(val) > 1 and val[-1] == val[0]:
        return f"{m.group('lead')}{key}{val[0]}{MASK}{val[0]}"
    return f"{m.group('lead')}{key}{MASK}"


def _mask_yaml_block(text: str, indent: int, start: int) -> tuple[int, str]:
    """(end, masked text) of the lines from ``start`` indented deeper than ``indent``."""
    out: list[str] = []
    pos = start
    while pos < len(text):
        eol = text.find("\n", pos)
        end = len(text) if eol < 0 else eol
        line = text[pos:end]
        if line.strip() and len(line) - len(line.lstrip(" \t")) <= indent:
            break
        out.append(_mask_yaml_line(line) if line.strip() else line)
        if eol < 0:
            pos = end
            break
        out.append("\n")
        pos = eol + 1
    return pos, "".join(out)


def _brace_end(text: str, start: int) -> int:
    """The index after the ``}`` that closes the ``{`` at ``start`` (or the line's end)."""
    depth = 0
    quote = ""
    limit = min(len(text), start + _NESTED_LIMIT)
    i = start
    while i < limit:
        ch = text[i]
        if quote:
            if ch == "\\":
                i += 1
            elif ch == quote:
                quote = ""
        elif ch in "\"'":
            quote = ch
        elif ch == "{":
            depth += 1
        elif ch == "}":
            depth -= 1
            if depth == 0:
                return i + 1
        i += 1
    eol = text.find("\n", start)
    return len(text) if eol < 0 else eol


_NESTED_SCALAR = re.compile(
    rf"(?P<q>{_QUOTED})(?P<key>[ \t]*:)?|(?<=:)(?P<ws>[ \t]*)(?P<bare>[^\s,{{}}\[\]\"':]+)"
)


def _mask_nested_scalar(m: re.Match[str]) -> str:
    if m.group("q") is not None:
        if m.group("key"):  # a key of the nested object: kept
            return m.group(0)
        return _mask_quoted(m.group("q"), False)
    bare = m.group("bare")
    return m.group(0) if bare in _LITERALS or bare == MASK else f"{m.group('ws')}{MASK}"


def _mask_nested(block: str) -> str:
    """Every value inside a ``{...}`` under a sensitive key; the nested keys are kept."""
    return _NESTED_SCALAR.sub(_mask_nested_scalar, block)


