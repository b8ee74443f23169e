"""A command's *reach* (SPEC section 4a): what outside the project it touches or hands
control to. Parsed with bashlex (a real shell grammar), not patterns over the text.

Kinds, each with a normalised ``key`` the gate compares with served text:

- ``host``: a URL's host, a network command's address (``nc 1.2.3.4``, ``ssh h``), a
  numeric address in any spelling ``inet_aton`` accepts (``0x7f000001``);
- ``path``: a path outside the project: a dot-directory in home (``~/.ssh``, ``~/.aws``,
  ``~/.config``), a ``.env`` file, system paths, anything absolute not under it;
- ``credential``: a variable whose name says it holds a secret (``$AWS_SECRET_KEY``),
  or the whole environment (``env``, ``printenv``);
- ``interpreter``: code handed to an interpreter from a pipe, a substitution, a
  here-string, ``eval``, ``-c``/``-e`` with ``exec``, or PowerShell's ``iex``;
- ``package``: a package from a URL or another index, or a name one edit away from a
  well-known one;
- ``remote``: a git remote added or moved;
- ``check_off``: a switch that turns a check off (``--no-verify``).

Spellings a shell reads the same are undone first: ANSI-C quoting (``$'\\x63url'``),
``${IFS}``, base64 literals (their decoded text is parsed too), percent-encoding, case and
look-alike letters (:mod:`memory.gate.normalize`). Text bashlex cannot parse (another
shell's syntax, prose) is read word by word instead: reach is never lost to a parse
error.
"""

from __future__ import annotations

import ipaddress
import os
import shlex
import socket
from dataclasses import dataclass
from urllib.parse import urlsplit

import bashlex

from memory.gate.normalize import base64_text, skeleton

INTERPRETERS = frozenset(
    {
        "sh", "bash", "zsh", "dash", "ksh", "fish", "csh", "tcsh", "busybox",
        "python", "python2", "python3", "perl", "ruby", "node", "php", "lua", "deno",
        "pwsh", "powershell", "iex", "invoke-expression", "source", ".", "eval", "exec",
        "osascript", "cmd", "env",
    }
)  # fmt: skip
SHELLS = frozenset({"sh", "bash", "zsh", "dash", "ksh", "fish", "csh", "tcsh", "busybox"})
CODE_FLAGS = frozenset({"-c", "-e", "-command", "-encodedcommand", "-enc", "/c", "-r"})
NETWORK = frozenset(
    {
        "curl", "wget", "nc", "ncat", "netcat", "ssh", "scp", "sftp", "rsync", "telnet",
        "ftp", "ping", "socat", "iwr", "irm", "invoke-webrequest", "invoke-restmethod",
        "http", "https", "aria2c", "dig", "nslookup", "host",
    }
)  # fmt: skip
CREDENTIAL_WORDS = ("TOKEN", "SECRET", "PASSWORD", "PASSWD", "API_KEY", "APIKEY",
                    "ACCESS_KEY", "PRIVATE_KEY", "CREDENTIAL", "AUTH", "SESSION_KEY")  # fmt: skip
SENSITIVE_PATHS = ("/etc/", "/root/", "/proc/", "/var/run/secrets")
SENSITIVE_NAMES = ("id_rsa", "id_ed25519", "id_ecdsa", ".netrc", ".pgpass", ".npmrc",
                   ".pypirc", "credentials", ".git-credentials", ".htpasswd")  # fmt: skip
CHECK_OFF = frozenset(
    {
        "--no-verify", "--no-gpg-sign", "--insecure", "--no-check-certificate",
        "--trusted-host", "--skip-checks", "--no-checks", "--disable-pip-version-check",
        "--deselect", "--ignore", "--no-hooks", "--force", "--allow-unverified",
        "--unsafe-perm", "--ignore-scripts=false", "--no-verify-ssl", "--skip-tests",
    }
)  # fmt: skip
CHECK_OFF_ENV = ("GIT_SSL_NO_VERIFY", "HUSKY", "SKIP", "PIP_TRUSTED_HOST", "NODE_TLS_REJECT_UNAUTHORIZED",
                 "PYTHONHTTPSVERIFY", "CURL_CA_BUNDLE", "REQUESTS_CA_BUNDLE")  # fmt: skip
INDEX_FLAGS = frozenset({"-i", "--index-url", "--extra-index-url", "--registry", "-f",
                         "--find-links", "--index", "--source"})  # fmt: skip
INSTALLERS = frozenset({"pip", "pip3", "uv", "npm", "pnpm", "yarn", "gem", "cargo", "go",
                        "pipx", "poetry", "conda", "apt", "apt-get", "brew"})  # fmt: skip
WELL_KNOWN_PACKAGES = frozenset(
    {
        "requests", "numpy", "pandas", "django", "flask", "pytest", "urllib3", "setuptools",
        "six", "boto3", "botocore", "pyyaml", "cryptography", "idna", "certifi", "jinja2",
        "click", "pillow", "scipy", "sqlalchemy", "psycopg", "psycopg2", "httpx", "pydantic",
        "fastapi", "celery", "redis", "rich", "attrs", "colorama", "matplotlib", "torch",
        "tensorflow", "openai", "anthropic", "lodash", "react", "express", "axios", "chalk",
        "commander", "typescript", "webpack", "eslint", "prettier", "moment", "debug",
        "dotenv", "python-dotenv", "beautifulsoup4", "lxml", "selenium", "paramiko",
    }
)  # fmt: skip
MAX_DEPTH = 4


@dataclass(frozen=True, order=True)
class ReachPart:
    kind: str
    key: str  # normalised, what is compared with served text
    raw: str = ""  # as written in the command, for the reason shown to a person


def _ansi_c(text: str) -> str:
    """Replace ``$'...'`` (ANSI-C quoting) by its decoded text in single quotes."""
    out: list[str] = []
    i = 0
    while i < len(text):
        if text.startswith("$'", i):
            j = i + 2
            body: list[str] = []
            while j < len(text) and text[j] != "'":
                if text[j] == "\\" and j + 1 < len(text):
                    body.append(text[j : j + 2] if text[j + 1] != "'" else "'")
                    j += 2
                    continue
                body.append(text[j])
                j += 1
            raw = "".join(body)
            try:
                decoded = raw.encode("latin-1", "backslashreplace").decode("unicode_escape")
            except UnicodeDecodeError:
                decoded = raw
            out.append("'" + decoded.replace("'", "") + "'")
            i = j + 1
            continue
        out.append(text[i])
        i += 1
    return "".join(out)


def unshell(command: str) -> str:
    """Undo spellings that a shell reads as something else: ANSI-C quoting, ``$IFS``."""
    text = _ansi_c(command)
    for ifs in ("${IFS}", "$IFS", "${IFS%?}", "${IFS::1}"):
        text = text.replace(ifs, " ")
    return text


def _host_key(host: str) -> str | None:
    host = skeleton(host).strip("[]").rstrip(".")
    if not host:
        return None
    try:
        return str(ipaddress.ip_address(host))
    except ValueError:
        pass
    if host.isdigit() and int(host) < 1 << 24:
        return None  # a port or a count, not an address anyone writes as one number
    if all(ch in "0123456789abcdefx." for ch in host) and any(ch.isdigit() for ch in host):
        try:  # 0x7f000001, 2130706433, 0177.0.0.1: what the resolver would dial
            return socket.inet_ntoa(socket.inet_aton(host))
        except OSError:
            return None
    labels = host.split(".")
    if len(labels) >= 2 and all(labels) and labels[-1].isalpha() and len(labels[-1]) >= 2:
        return host
    if host == "localhost":
        return host
    return None


def _url_host(word: str) -> str | None:
    text = skeleton(word)
    if "://" in text:
        start = text.index("://")
        while start > 0 and (text[start - 1].isalnum() or text[start - 1] in "+.-"):
            start -= 1
        try:
            return urlsplit(text[start:]).hostname
        except ValueError:
            return None
    if "@" in text and ":" in text.split("@", 1)[1]:  # git@host:owner/repo, user@h:path
        return text.split("@", 1)[1].split(":", 1)[0]
    return None


def _path_key(word: str, project_path: str | None) -> str | None:
    text = skeleton(word)
    for home in ("${home}", "$home", "%userprofile%", "$env:userprofile"):
        text = text.replace(home, "~")
    if text.startswith(("/home/", "/users/")):
        rest = text.split("/", 3)
        text = "~/" + rest[3] if len(rest) > 3 else "~"
    elif text.startswith("/root/") or text == "/root":
        text = "~" + text[5:]
    text = text.lstrip("@")
    if text.startswith("~/."):  # a dot-directory in home: ~/.ssh/id_rsa is ~/.ssh
        return "/".join(text.split("/")[:2])
    name = os.path.basename(text.rstrip("/"))
    if name == ".env" or name.startswith(".env.") or name in SENSITIVE_NAMES:
        return name
    if text.startswith("~/"):
        return text
    if text.startswith(SENSITIVE_PATHS):
        return text
    if text.startswith("/") and project_path:
        root = skeleton(project_path).rstrip("/")
        if text != root and not text.startswith(root + "/"):
            if not text.startswith(("/tmp/", "/dev/null", "/usr/", "/bin/", "/opt/")):
                return text
    return None


def _remote_key(url: str) -> str:
    """``host/owner/repo`` of a git remote in any of its spellings (https, scp-like)."""
    text = skeleton(url)
    host = _url_host(text)
    if host is None:
        return text
    rest = text.split(host, 1)[1].lstrip(":/")
    rest = rest[:-4] if rest.endswith(".git") else rest
    return f"{_host_key(host) or host}/{rest}".rstrip("/")


def _credential(name: str) -> str | None:
    upper = name.upper()
    if any(word in upper for word in CREDENTIAL_WORDS) or upper.endswith("_KEY"):
        return upper
    return None


def _one_edit(a: str, b: str) -> bool:
    if a == b or abs(len(a) - len(b)) > 1:
        return False
    if len(a) == len(b):
        diff = [i for i in range(len(a)) if a[i] != b[i]]
        return len(diff) == 1 or (
            len(diff) == 2
            and diff[1] == diff[0] + 1
            and a[diff[0]] == b[diff[1]]
            and a[diff[1]] == b[diff[0]]
        )
    short, long = (a, b) if len(a) < len(b) else (b, a)
    return any(long[:i] + long[i + 1 :] == short for i in range(len(long)))


class _Collector:
    def __init__(self, project_path: str | None):
        self.project_path = project_path
        self.parts: set[ReachPart] = set()

    def add(self, kind: str, key: str | None, raw: str = "") -> None:
        if key:
            self.parts.add(ReachPart(kind, key, raw[:200]))

    # -- words ---------------------------------------------------------------------
    def word(self, word: str, *, network: bool = False, depth: int = 0) -> None:
        """What one word reaches by itself, whatever command it is an argument of."""
        host = _url_host(word)
        if host:
            self.add("host", _host_key(host), word)
        elif network:
            bare = skeleton(word).split("/", 1)[0]
            bare = bare.rsplit("@", 1)[-1].split(":", 1)[0]
            self.add("host", _host_key(bare), word)
        for piece in word.replace("=", " ").replace(",", " ").split():
            self.add("path", _path_key(piece, self.project_path), piece)
            if piece.startswith("$"):
                self.add("credential", _credential(piece.strip("${}")), piece)
        if skeleton(word) in CHECK_OFF or skeleton(word).split("=", 1)[0] in CHECK_OFF:
            self.add("check_off", skeleton(word).split("=", 1)[0], word)
        decoded = base64_text(word)
        if decoded and depth < MAX_DEPTH:
            self.text(decoded, depth=depth + 1)

    # -- commands ------------------------------------------------------------------
    def command(self, words: list[str], *, stdin_from: str | None, depth: int) -> None:
        if not words:
            return
        while words and "=" in words[0] and not words[0].startswith(("-", "=")):
            name, _, value = words[0].partition("=")
            self.add("credential", _credential(name), words[0])
            if name.upper() in CHECK_OFF_ENV:
                self.add("check_off", name.upper(), words[0])
            self.word(value, depth=depth)
            words = words[1:]
        if not words:
            return
        head = skeleton(os.path.basename(words[0]))
        args = words[1:]
        if head in ("sudo", "doas", "nohup", "time", "command", "exec", "xargs", "timeout"):
            rest = [a for a in args if not a.startswith("-")]
            if head == "timeout" and rest:
                rest = rest[1:]
            if rest:
                self.command(rest, stdin_from=stdin_from, depth=depth)
            return
        network = head in NETWORK
        for arg in args:
            self.word(arg, network=network, depth=depth)
        if head in ("env", "printenv", "set", "export") and not args:
            self.add("credential", "ENVIRONMENT", head)
        if head in INTERPRETERS or head.startswith("python"):
            self._interpreter(head, args, stdin_from=stdin_from, depth=depth)
        if head in INSTALLERS:
            self._installer(head, args)
        if head == "git":
            self._git(args)
        if head in ("pytest", "tox", "nox") or (head.startswith("python") and "pytest" in args):
            if any(a in ("-k", "--deselect", "--ignore", "-p") for a in args):
                self.add("check_off", "test-deselect", " ".join(words))

    def _interpreter(self, head: str, args: list[str], *, stdin_from: str | None, depth: int):
        code_after = None
        for i, arg in enumerate(args):
            if skeleton(arg) in CODE_FLAGS and i + 1 < len(args):
                code_after = args[i + 1]
                break
        if head in ("eval", "iex", "invoke-expression", "source", "."):
            self.add("interpreter", "interpreter", " ".join([head, *args]))
            if depth < MAX_DEPTH:
                self.text(" ".join(args), depth=depth + 1)
            return
        if head == "env":
            return
        if stdin_from is not None:
            self.add("interpreter", "interpreter", f"{stdin_from} | {head}")
        if code_after is not None and depth < MAX_DEPTH:
            if head in SHELLS or head in ("pwsh", "powershell", "cmd"):
                self.text(code_after, depth=depth + 1)
            lowered = skeleton(code_after)
            if any(word in lowered for word in ("exec(", "eval(", "urlopen", "b64decode",
                                               "subprocess", "os.system", "__import__")):  # fmt: skip
                self.add("interpreter", "interpreter", f"{head} -c {code_after}")
            self.word(code_after, depth=depth)
            for piece in shlex.split(code_after.replace("'", " ").replace('"', " ")):
                self.word(piece, depth=depth + 1)

    def _installer(self, head: str, args: list[str]) -> None:
        if not args or args[0] not in ("install", "add", "i", "sync", "get", "-r"):
            if not (head == "uv" and args[:2] == ["pip", "install"]):
                return
        for i, arg in enumerate(args):
            lowered = skeleton(arg)
            flag = lowered.split("=", 1)[0]
            if flag in INDEX_FLAGS:
                value = (
                    lowered.split("=", 1)[1]
                    if "=" in lowered
                    else (args[i + 1] if i + 1 < len(args) else "")
                )
                host = _url_host(value) or value
                self.add("package", "index:" + (_host_key(host) or skeleton(value)), arg)
            elif "://" in lowered or lowered.startswith(("git+", "http")):
                self.add("package", "url:" + (_host_key(_url_host(lowered) or "") or lowered), arg)
            elif not lowered.startswith("-") and lowered not in ("install", "add", "i", "pip"):
                name = lowered.split("==")[0].split(">=")[0].split("[")[0].split("@")[0]
                if any(_one_edit(name, known) for known in WELL_KNOWN_PACKAGES):
                    self.add("package", "name:" + name, arg)

    def _git(self, args: list[str]) -> None:
        sub = [skeleton(a) for a in args if not a.startswith("-")]
        if sub[:1] == ["remote"] and len(sub) >= 3 and sub[1] in ("add", "set-url"):
            url = args[-1]
            self.add("remote", _remote_key(url), url)
        if sub[:1] in (["push"], ["fetch"], ["pull"], ["clone"]) and len(sub) >= 2:
            target = sub[1]
            if _url_host(target):
                self.add("remote", _remote_key(target), target)
        for i, arg in enumerate(args):
            if arg == "-c" and i + 1 < len(args) and "hookspath" in skeleton(args[i + 1]):
                self.add("check_off", "core.hookspath", args[i + 1])

    # -- parse ---------------------------------------------------------------------
    def text(self, command: str, *, depth: int = 0) -> None:
        source = unshell(command)
        try:
            trees = bashlex.parse(source)
        except Exception:  # bashlex raises its own errors and, on odd input, others
            self._words_only(source, depth=depth)
            return
        for tree in trees:
            self._node(tree, stdin_from=None, depth=depth)

    def _node(self, node, *, stdin_from: str | None, depth: int) -> None:
        kind = node.kind
        if kind == "pipeline":
            previous = stdin_from
            for part in node.parts:
                if part.kind == "pipe":
                    continue
                self._node(part, stdin_from=previous, depth=depth)
                previous = _node_words(part)[:1] and " ".join(_node_words(part)) or "?"
            return
        if kind in ("list", "compound"):
            for part in getattr(node, "parts", None) or getattr(node, "list", []):
                if part.kind not in ("operator", "reservedword", "pipe"):
                    self._node(part, stdin_from=stdin_from, depth=depth)
            return
        if kind in ("if", "for", "while", "until", "function"):
            for part in getattr(node, "parts", []):
                if hasattr(part, "kind") and part.kind not in ("reservedword", "operator"):
                    self._node(part, stdin_from=stdin_from, depth=depth)
            return
        if kind == "command":
            words: list[str] = []
            here: str | None = None
            for part in node.parts:
                if part.kind in ("word", "assignment"):
                    words.append(part.word)
                    self._substitutions(part, head_words=words, depth=depth)
                elif part.kind == "redirect":
                    target = part.output
                    if hasattr(target, "word"):
                        if part.type in ("<<<", "<"):
                            here = target.word
                        self.word(target.word, depth=depth)
                        self._substitutions(target, head_words=words, depth=depth)
                    if part.type in ("<<", "<<<") and getattr(part, "heredoc", None):
                        here = part.heredoc.value
            feeding = stdin_from if stdin_from is not None else here
            self.command(words, stdin_from=feeding, depth=depth)
            if here is not None and depth < MAX_DEPTH:
                self.text(here, depth=depth + 1)
            return

    def _substitutions(self, word_node, *, head_words: list[str], depth: int) -> None:
        for sub in getattr(word_node, "parts", []) or []:
            if sub.kind in ("commandsubstitution", "processsubstitution"):
                self._node(sub.command, stdin_from=None, depth=depth)
                head = skeleton(os.path.basename(head_words[0])) if head_words else ""
                if head in INTERPRETERS and len(head_words) > 1:
                    self.add("interpreter", "interpreter", word_node.word)
            elif sub.kind == "parameter":
                self.add("credential", _credential(sub.value), "$" + sub.value)

    def _words_only(self, text: str, *, depth: int) -> None:
        """Another shell's syntax or prose: each word, and a pipe into an interpreter."""
        for ch in "()[]{};`\"'<>":
            text = text.replace(ch, " ")
        segments = [seg.split() for seg in text.replace("||", "\n").replace("&&", "\n").split("\n")]
        for seg in segments:
            pieces = " ".join(seg).split("|")
            for i, piece in enumerate(pieces):
                words = piece.split()
                if not words:
                    continue
                self.command(words, stdin_from=("?" if i > 0 else None), depth=depth)


def _node_words(node) -> list[str]:
    return [p.word for p in getattr(node, "parts", []) if getattr(p, "kind", "") == "word"]


def command_reach(command: str, *, project_path: str | None = None) -> list[ReachPart]:
    """Every reach part of ``command``, sorted (kind, key), one per (kind, key)."""
    collector = _Collector(project_path)
    collector.text(command)
    seen: dict[tuple[str, str], ReachPart] = {}
    for part in sorted(collector.parts):
        seen.setdefault((part.kind, part.key), part)
    return list(seen.values())


def text_reach(text: str, *, project_path: str | None = None) -> list[ReachPart]:
    """The reach parts written in served text (prose with commands in it): every line
    and every code span is read as a command, words that parse as nothing still count."""
    collector = _Collector(project_path)
    chunks = [text]
    if "`" in text:
        chunks += text.split("`")[1::2]
    for chunk in chunks:
        for line in chunk.splitlines():
            if line.strip():
                collector.text(line)
                collector._words_only(line, depth=0)
    seen: dict[tuple[str, str], ReachPart] = {}
    for part in sorted(collector.parts):
        seen.setdefault((part.kind, part.key), part)
    return list(seen.values())
