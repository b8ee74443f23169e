"""The operation key and target of ONE simple command's argv: what the hook, ``cairn-turn``
and the agent-loop benchmark all report, so a lesson learned from one is found by the
others (SPEC section 4).

``operation(["uv", "pip", "install", "-r", "requirements.txt"])`` →
``("uv:pip-install", "requirements.txt")``. The rules, in order:

1. ``VAR=value`` assignments are skipped; the program is the first word's basename;
   ``python -m X`` is program X.
2. Programs with subcommands (``SUBCOMMANDS``) add their first word that is not an
   option (``pip install`` → ``pip:install``); where that word is a group (``uv pip``,
   ``docker compose``, ``gh pr``) its next word joins it with a dash
   (``gh:pr-list``). A program whose verbs are a closed set (``VERBS``: ``ruff``) takes
   the word as a verb only when it is one of them (``ruff src`` has no verb). Build
   tools (``make``, ``just``) name the recipe as their verb: ``make proto-test`` →
   ``make:proto-test`` on the project.
3. Flags that change behaviour are part of the operation, sorted so their order does
   not matter: ``pytest --cov --cov-report html`` → ``pytest --cov --cov-report=html``.
   Flags that only change how much is printed (``-q``, ``-v``, ``--color``) are not;
   options whose value is what the command acts on (``pip -r FILE``, ``curl -o FILE``,
   ``make -C DIR``) give the target, and options whose value is content (``git
   commit -m MSG``) are dropped with it.
4. The target is the last word that is neither an option nor an option's value; for a
   test runner that is its path argument (a node id ``a.py::test_x`` is its file).
   No target → the project, ``.``.

The option tables are what this module knows: an option it does not know that takes
a separate value is read as a flag and its value as a word (a known limit).
"""

from __future__ import annotations

import os
import re
import shlex

PROJECT = "."

SUBCOMMANDS: dict[str, set[str]] = {
    "pip": set(),
    "pip3": set(),
    "pipx": set(),
    "uv": {"pip", "tool", "python", "cache", "self"},
    "npm": {"run", "cache"},
    "pnpm": {"run"},
    "yarn": {"run", "workspace"},
    "git": {"stash", "remote", "submodule", "worktree", "config", "lfs"},
    "git-lfs": set(),
    "cargo": set(),
    "go": {"mod"},
    "make": set(),
    "just": set(),
    "docker": {"compose", "container", "image", "network", "volume", "buildx"},
    "docker-compose": set(),
    "podman": {"compose", "container", "image"},
    "poetry": {"run", "env"},
    "gh": {"*"},
    "kubectl": set(),
    "helm": set(),
    "terraform": set(),
    "brew": set(),
    "apt": set(),
    "apt-get": set(),
    "conda": {"env"},
    "ruff": set(),
    "coverage": set(),
    "tox": set(),
    "dotenv": set(),
    "direnv": set(),
}
# Programs whose verbs are a closed set: another first word is an argument.
VERBS: dict[str, set[str]] = {
    "ruff": {"check", "format", "rule", "config", "linter", "clean", "server", "version"},
    "tox": {"run", "r", "list", "l", "devenv", "config", "exec", "legacy", "depends"},
}
# Build tools: the recipe is the verb and the project is what they act on.
BUILD_TOOLS = {"make", "just", "ninja", "rake", "task"}
TEST_RUNNERS = {"pytest", "py.test", "jest", "vitest", "mocha", "rspec", "phpunit"}

# Options that only change what is printed: never part of the operation.
PRESENTATION = {
    "-q", "-qq", "-qqq", "-v", "-vv", "-vvv", "--quiet", "--verbose", "-s", "--no-header",
    "--color", "--no-color", "--progress", "--no-progress", "--silent",
}  # fmt: skip
# ... and those of them that take a separate value (dropped with it).
PRESENTATION_VALUE = {"--tb", "--log-level", "--durations", "-n", "--numprocesses"}
# Options whose value is what the command acts on: the value is the target.
TARGET_OPTIONS: dict[str, set[str]] = {
    "pip": {"-r", "--requirement", "-e", "--editable"},
    "pip3": {"-r", "--requirement", "-e", "--editable"},
    "uv": {"-r", "--requirement", "-e", "--editable"},
    "curl": {"-o", "--output"},
    "wget": {"-O", "--output-document"},
    "make": {"-C", "--directory"},
    "git": {"-C"},
    "npm": {"--prefix"},
}
# ... of which these change behaviour too, so the flag stays in the operation.
TARGET_FLAGS_KEPT = {"-e", "--editable"}
# Options whose value is content (a message, a title): dropped with their value.
CONTENT_OPTIONS: dict[str, set[str]] = {
    "git": {"-m", "--message", "-F", "--file", "--author"},
    "gh": {"--title", "-t", "--body", "-b", "--body-file", "-F", "--notes", "-n"},
}
# Options that take a separate value which changes behaviour: kept as ``--opt=value``.
VALUE_OPTIONS: dict[str, set[str]] = {
    "pytest": {
        "-k", "-m", "-p", "-c", "-o", "--ds", "--cov-report", "--cov-config", "--rootdir",
        "--ignore", "--deselect", "--maxfail", "--import-mode", "--confcutdir",
    },
    "gh": {"--state", "-s", "--repo", "-R", "--label", "-l", "--base", "-B", "--head", "-H"},
    "coverage": {"-m", "--rcfile", "--source"},
    "tox": {"-e", "-c"},
    "docker": {"-p", "--profile", "--project-name"},
    "uv": {"-p", "--python", "-i", "--index-url"},
    "pip": {"-i", "--index-url", "-c", "--constraint"},
    "npm": {"-w", "--workspace"},
    "cargo": {"-p", "--package", "--features"},
}  # fmt: skip
ASSIGNMENT = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*=")


def operation(argv: list[str]) -> tuple[str, str]:
    """``(operation_key, target)`` of one simple command's argv (rules in the module
    docstring); ``("bash", ".")`` for an empty one."""
    words = list(argv)
    while words and ASSIGNMENT.match(words[0]):
        words = words[1:]
    if not words:
        return "bash", PROJECT
    program = os.path.basename(words[0])
    rest = words[1:]
    if re.fullmatch(r"python[0-9.]*", program) and rest[:1] == ["-m"] and len(rest) > 1:
        program, rest = rest[1], rest[2:]
    key = program
    if program in BUILD_TOOLS:
        return _with_flags(program, program, rest, build=True)
    verbs = VERBS.get(program)
    if program in SUBCOMMANDS and rest and not rest[0].startswith("-"):
        if verbs is None or rest[0] in verbs:
            sub, rest = rest[0], rest[1:]
            groups = SUBCOMMANDS[program]
            if ("*" in groups or sub in groups) and rest and not rest[0].startswith("-"):
                sub, rest = f"{sub}-{rest[0]}", rest[1:]
            key = f"{program}:{sub}"
    return _with_flags(key, program, rest, build=False)


def _with_flags(key: str, program: str, rest: list[str], *, build: bool) -> tuple[str, str]:
    flags: list[str] = []
    words: list[str] = []
    target_from_option = ""
    target_opts = TARGET_OPTIONS.get(program, set())
    content_opts = CONTENT_OPTIONS.get(program, set())
    value_opts = VALUE_OPTIONS.get(program, set())
    i = 0
    while i < len(rest):
        word = rest[i]
        nxt = rest[i + 1] if i + 1 < len(rest) else None
        if word == "--":
            words.extend(rest[i + 1 :])
            break
        if not word.startswith("-") or word == "-":
            words.append(word)
            i += 1
            continue
        name, eq, value = word.partition("=")
        takes = name in target_opts or name in content_opts or name in value_opts
        if not takes and (name in PRESENTATION or name in PRESENTATION_VALUE):
            i += 1 if eq or name not in PRESENTATION_VALUE or nxt is None else 2
            continue
        if takes and not eq and nxt is not None:
            value, i = nxt, i + 2
        else:
            i += 1
        if name in target_opts and (eq or takes):
            target_from_option = value
            if name in TARGET_FLAGS_KEPT:
                flags.append(name)
        elif name in content_opts:
            continue
        elif name in value_opts and value:
            flags.append(f"{name}={value}")
        else:
            flags.append(word)
    target = target_from_option or (words[-1] if words else "")
    if build:
        # a build tool's first word is its recipe, the verb; it acts on the project
        key = f"{key}:{words[0]}" if words else key
        target = target_from_option
    if program in TEST_RUNNERS:
        target = target.split("::", 1)[0]
    if flags:
        key = f"{key} {' '.join(sorted(dict.fromkeys(flags)))}"
    return key, target_normalize(target)


def target_normalize(target: str) -> str:
    """``./src/`` → ``src``; nothing → the project (``.``)."""
    target = target.strip()
    while target.startswith("./") and len(target) > 2:
        target = target[2:]
    if len(target) > 1:
        target = target.rstrip("/") or "/"
    return target or PROJECT


def program_of(key: str) -> str:
    """``uv:pip-install -e`` → ``uv``: the program an operation key runs."""
    return key.removeprefix("bash:").split(" ", 1)[0].split(":", 1)[0]


def first_simple_command(command: str) -> list[str]:
    """The argv of the first simple command of a command line, until a shell splitter
    (``cairn_client.shell``, bashlex) hands over simple commands: the words up to the
    first ``|``, ``||``, ``&&``, ``;`` or ``&``, without redirections and their files
    (``pytest -q | tail -3`` → ``["pytest", "-q"]``). A line that cannot be read is
    split on whitespace."""
    try:
        lexer = shlex.shlex(command, posix=True, punctuation_chars=True)
        lexer.whitespace_split = True
        tokens = list(lexer)
    except ValueError:
        return command.split()
    argv: list[str] = []
    i = 0
    while i < len(tokens):
        token = tokens[i]
        if token and set(token) <= set("();<>|&"):
            if token in ("|", "||", "&&", ";", "&", "(", ")", ";;", "|&"):
                break
            i += 2  # a redirection: its file (or descriptor) is not an argument
            continue
        redirect = i + 1 < len(tokens) and tokens[i + 1] and set(tokens[i + 1]) <= set("<>&")
        if not (token.isdigit() and redirect):  # the 2 of 2>&1 is the redirection's
            argv.append(token)
        i += 1
    if argv and argv[-1] == "$":  # the start of a $(...) cut at its parenthesis
        argv.pop()
    return argv
