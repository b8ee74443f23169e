"""Declared checks: the only checks Cairn counts from a Claude Code session.

**A check is what the harness knows ran** (SPEC §4). The model's own test commands
(``pytest -q``, ``exit 0 && pytest``, ``pytest -p no:z#z || true``, ``eval``, a
function, an alias …) are *steps*: the hook names them, keeps their outcome, and never
sends them as checks, whatever their form. The evidence is the project's declared
checks (``test=python -m pytest -q``), which the Stop hook runs itself when a turn
ends, so no form of the model's command line can turn a failure into a pass.

A declared check runs code the model may have written (a ``conftest.py``, a
``Makefile``, a ``package.json`` script), so it runs:

- in a child process whose environment has no ``CAIRN_*`` variable and no variable
  named like a secret (``*TOKEN*``, ``*SECRET*``, ``*KEY*``, ``*PASSWORD*``);
- inside bubblewrap: the whole filesystem read-only but the project, the harness's
  token and state folders replaced by empty ones, a private ``/tmp``, its own network
  namespace (no network at all, so no route to Cairn), its own PID namespace (no
  ``/proc`` of the hook), killed with its parent;
- with a timeout (exit 124 when it runs out).

The parent (the hook) reads the token only after the child has exited.

A run that executed no test is not a passing check: pytest's own report (its
``--junitxml``, written into a folder the harness made and bound in) must show at
least one test that ran and was not skipped; other runners' summaries are read the
same way (``cargo test``, ``go test``, jest/vitest, mocha). A test check whose report
shows no test that ran is kept with ``ran=False``: the server ignores it.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import tempfile
import time
import xml.etree.ElementTree as ET
from dataclasses import dataclass
from pathlib import Path

KINDS = ("test", "lint", "build")
SECRET_NAME = re.compile(r"TOKEN|SECRET|PASSWORD|PASSWD|KEY|CREDENTIAL|AUTH", re.IGNORECASE)
CHECK_TIMEOUT_S = 600.0


@dataclass
class Declared:
    kind: str
    command: str


@dataclass
class CheckRun:
    exit_code: int
    tests_ran: int | None  # tests that ran and were not skipped; None: no report read
    why: str = ""
    output: str = ""

    @property
    def ran(self) -> bool:
        return self.tests_ran is None or self.tests_ran > 0


def parse_declared(declared: str) -> Declared | None:
    kind, _, command = declared.partition("=")
    kind = kind.strip()
    if kind not in KINDS or not command.strip():
        return None
    return Declared(kind=kind, command=command.strip())


def clean_env(env: dict[str, str] | None = None) -> dict[str, str]:
    """The check's environment: the hook's, less every Cairn and secret-like variable."""
    env = dict(os.environ if env is None else env)
    return {
        name: value
        for name, value in env.items()
        if not name.upper().startswith("CAIRN") and not SECRET_NAME.search(name)
    }


def bwrap_argv(
    command: str, *, project: Path, report: Path, hidden: list[Path], home: Path
) -> list[str]:
    """The bubblewrap command line a declared check runs under."""
    bwrap = shutil.which("bwrap")
    if not bwrap:
        raise FileNotFoundError("bwrap")
    argv = [
        bwrap,
        "--ro-bind",
        "/",
        "/",
        "--dev",
        "/dev",
        "--proc",
        "/proc",
        "--tmpfs",
        "/tmp",
        "--unshare-net",
        "--unshare-pid",
        "--unshare-ipc",
        "--die-with-parent",
        "--new-session",
    ]
    for path in hidden:
        if path.exists() and not _under(project, path):
            argv += ["--tmpfs", str(path)]
    argv += ["--bind", str(project), str(project)]
    argv += ["--bind", str(report), str(report)]  # the runner's report, read after exit
    argv += ["--setenv", "HOME", str(home), "--chdir", str(project), "--"]
    argv += ["/bin/sh", "-c", command]
    return argv


def _under(path: Path, root: Path) -> bool:
    return path == root or root in path.parents


def run_confined(
    declared: Declared,
    *,
    project: Path,
    hidden: list[Path],
    timeout: float = CHECK_TIMEOUT_S,
) -> CheckRun:
    """Run one declared check confined; read what the runner itself reported."""
    project = project.resolve()
    home = Path(os.path.expanduser("~"))
    with tempfile.TemporaryDirectory(prefix="cairn-check-") as scratch:
        report = Path(scratch)
        env = clean_env()
        # pytest reads PYTEST_ADDOPTS wherever it is started from (make, npm, tox …).
        env["PYTEST_ADDOPTS"] = (
            f"{env.get('PYTEST_ADDOPTS', '')} --junitxml={report}/junit.xml"
        ).strip()
        try:
            argv = bwrap_argv(
                declared.command, project=project, report=report, hidden=hidden, home=home
            )
        except FileNotFoundError:
            return CheckRun(127, 0, why="bubblewrap (bwrap) is not installed: nothing ran")
        try:
            done = subprocess.run(
                argv,
                cwd=project,
                env=env,
                stdin=subprocess.DEVNULL,
                capture_output=True,
                timeout=timeout,
            )
            code = done.returncode
            output = (done.stdout + done.stderr).decode(errors="replace")
        except subprocess.TimeoutExpired as exc:
            code = 124
            output = ((exc.stdout or b"") + (exc.stderr or b"")).decode(errors="replace")
        except OSError as exc:
            return CheckRun(127, 0, why=f"could not start: {exc}")
        if declared.kind != "test":
            return CheckRun(code, None, output=output[-4000:])
        return verdict(code, junit=report / "junit.xml", output=output)


def verdict(code: int, *, junit: Path, output: str) -> CheckRun:
    """How many tests really ran, from the runner's own report."""
    counts = _junit_counts(junit)
    if counts is None:
        counts = summary_counts(output)
    if counts is None:
        return CheckRun(code, 0, why="no test report: no test is known to have run", output=output)
    ran = counts
    why = "" if ran > 0 else "no test ran (none collected, all skipped or deselected)"
    return CheckRun(code, ran, why=why, output=output[-4000:])


def _junit_counts(path: Path) -> int | None:
    if not path.exists():
        return None
    try:
        root = ET.parse(path).getroot()
    except (ET.ParseError, OSError):
        return 0  # a report that cannot be read proves nothing ran
    suites = [root] if root.tag == "testsuite" else root.findall("testsuite")
    ran = 0
    for suite in suites:
        for case in suite.iter("testcase"):
            if case.find("skipped") is None:
                ran += 1
    return ran


SUMMARIES = [
    # cargo test: "test result: ok. 3 passed; 0 failed; 1 ignored"
    (re.compile(r"test result: \w+\. (\d+) passed; (\d+) failed"), lambda m: int(m[1]) + int(m[2])),
    # jest / vitest: "Tests:       1 failed, 2 passed, 3 total" / "Tests  2 passed (2)"
    (re.compile(r"^\s*Tests:?\s+.*?(\d+) total", re.M), lambda m: int(m[1])),
    (
        re.compile(r"^\s*Tests\s+(?:(\d+) failed \| )?(\d+) passed", re.M),
        lambda m: int(m[1] or 0) + int(m[2]),
    ),
    # mocha: "  2 passing", "  1 failing"
    (re.compile(r"^\s*(\d+) (?:passing|failing)\b", re.M), lambda m: int(m[1])),
]
GO_OK = re.compile(r"^(ok|FAIL|---)\s", re.M)
GO_RUN = re.compile(r"^=== RUN|^(?:--- )?(?:PASS|FAIL): ", re.M)


def summary_counts(output: str) -> int | None:
    """Tests run, from a runner's summary lines; None when none is recognised."""
    total, seen = 0, False
    for pattern, count in SUMMARIES:
        for match in pattern.finditer(output):
            total += count(match)
            seen = True
        if seen:
            return total
    if GO_OK.search(output) or "[no test files]" in output:
        # ``go test`` prints "ok  pkg 0.1s" per package with tests, also when a -run
        # pattern matched none ("testing: warning: no tests to run").
        if "no tests to run" in output:
            return 0
        return sum(1 for line in output.splitlines() if line.startswith(("ok ", "ok\t")))
    return None


def run_declared(
    checks: list[str], *, project: Path, hidden: list[Path], timeout: float, add, warn
) -> None:
    """Run each declared check (``kind=command``) and keep it with ``add(...)``."""
    for raw in checks:
        declared = parse_declared(raw)
        if declared is None:
            warn(f"ignored --check {raw!r}: write it as test=CMD, lint=CMD or build=CMD")
            continue
        started = time.monotonic()
        run = run_confined(declared, project=project, hidden=hidden, timeout=timeout)
        if run.why:
            warn(f"declared check {declared.command!r}: {run.why}")
        add(declared=declared, run=run, duration_s=time.monotonic() - started)


# -- what install proposes


def detect(project: Path) -> list[str]:
    """The project's checks, from its own files: what ``cairn-hook install`` declares."""
    found: list[str] = []
    python = project / ".venv" / "bin" / "python"
    runner = ".venv/bin/python -m pytest -q" if python.exists() else "python -m pytest -q"
    pyproject = project / "pyproject.toml"
    pytest_files = ["pytest.ini", "conftest.py", "tox.ini", "setup.cfg"]
    has_pytest = any((project / name).exists() for name in pytest_files)
    if pyproject.exists() and "pytest" in pyproject.read_text(errors="replace"):
        has_pytest = True
    if not has_pytest:
        has_pytest = any(project.glob("test_*.py")) or any(project.glob("tests/test_*.py"))
    makefile = project / "Makefile"
    make_test = makefile.exists() and re.search(
        r"^test\s*:", makefile.read_text(errors="replace"), re.M
    )
    if make_test:
        found.append("test=make test")
    elif has_pytest:
        found.append(f"test={runner}")
    package = project / "package.json"
    if package.exists():
        import json

        try:
            scripts = json.loads(package.read_text()).get("scripts") or {}
        except (ValueError, AttributeError):
            scripts = {}
        if "test" in scripts and not make_test:
            found.append("test=npm test")
        if "lint" in scripts:
            found.append("lint=npm run lint")
    if (project / "Cargo.toml").exists() and not make_test:
        found.append("test=cargo test")
    if (project / "go.mod").exists() and not make_test:
        found.append("test=go test ./...")
    return found
