"""The configuration table, read from the source of cairn/settings.py and tuning.py.

Every environment variable the settings read (through ``cairn.env``'s helpers or
``os.environ``) is a row: its name, its default as written in the source, and its
description from ``docsgen/settings.yaml``. A setting without a description is an
error (``tests/test_docs.py`` fails on it), so the table never falls behind the code.
"""

from __future__ import annotations

import ast
from dataclasses import dataclass
from pathlib import Path

import yaml

ROOT = Path(__file__).resolve().parent.parent
SOURCES = (
    ROOT / "cairn" / "settings.py",
    ROOT / "cairn" / "tuning.py",
    ROOT / "cairn" / "embedded.py",
)
DESCRIPTIONS = Path(__file__).resolve().parent / "settings.yaml"
_HELPERS = {"envbool", "envint", "envfloat", "envstr"}


@dataclass(frozen=True)
class Setting:
    name: str
    default: str
    source: str  # file it is read in, relative to the checkout


def _is_os_environ(node: ast.AST) -> bool:
    return (
        isinstance(node, ast.Attribute)
        and node.attr == "environ"
        and isinstance(node.value, ast.Name)
        and node.value.id == "os"
    )


def _default_text(node: ast.AST | None, source: str) -> str:
    if node is None:
        return ""
    try:
        value = ast.literal_eval(node)
    except ValueError:
        text = ast.get_source_segment(source, node) or ""
        try:  # arithmetic such as 6 * 3600 reads better as its value
            value = eval(compile(ast.Expression(node), "<default>", "eval"), {"__builtins__": {}})  # noqa: S307
        except Exception:  # noqa: BLE001 — an f-string or a name: show the source
            return text
    if isinstance(value, bool):
        return "1" if value else "0"
    return str(value)


def settings_read(path: Path) -> list[Setting]:
    """Every environment variable read in ``path``, in source order, first read wins."""
    source = path.read_text()
    found: dict[str, tuple[tuple[int, int], Setting]] = {}
    rel = str(path.relative_to(ROOT))
    for node in ast.walk(ast.parse(source)):
        name, default = None, None
        if isinstance(node, ast.Call) and node.args:
            first = node.args[0]
            if not (isinstance(first, ast.Constant) and isinstance(first.value, str)):
                continue
            func = node.func
            if isinstance(func, ast.Name) and func.id in _HELPERS:
                name = first.value
                default = node.args[1] if len(node.args) > 1 else None
            elif (
                isinstance(func, ast.Attribute)
                and func.attr == "get"
                and _is_os_environ(func.value)
            ):
                name = first.value
                default = node.args[1] if len(node.args) > 1 else None
        elif isinstance(node, ast.Subscript) and _is_os_environ(node.value):
            key = node.slice
            if isinstance(key, ast.Constant) and isinstance(key.value, str):
                name = key.value
        if name:
            at = (node.lineno, node.col_offset)
            if name not in found or at < found[name][0]:
                found[name] = (at, Setting(name, _default_text(default, source), rel))
    return [setting for _, setting in sorted(found.values(), key=lambda pair: pair[0])]


def all_settings() -> list[Setting]:
    seen: dict[str, Setting] = {}
    for path in SOURCES:
        for setting in settings_read(path):
            seen.setdefault(setting.name, setting)
    return list(seen.values())


def descriptions() -> dict[str, dict]:
    raw = yaml.safe_load(DESCRIPTIONS.read_text()) or {}
    return {name: (v if isinstance(v, dict) else {"description": v}) for name, v in raw.items()}


def undescribed() -> list[str]:
    """Settings read in the source that settings.yaml does not describe."""
    known = descriptions()
    return [s.name for s in all_settings() if not (known.get(s.name) or {}).get("description")]


def markdown() -> str:
    known = descriptions()
    missing = undescribed()
    if missing:
        raise ValueError(f"docsgen/settings.yaml describes none of: {', '.join(missing)}")
    rows = [
        "# Configuration",
        "",
        "Cairn is configured by environment variables only; with none set you get the",
        "embedded default (PostgreSQL with pgvector and Valkey started from Python",
        "packages, data under `var/`). An unset or empty variable takes its default.",
        "This table is generated from the source of `cairn/settings.py`,",
        "`cairn/tuning.py` and `cairn/embedded.py`, so it lists every variable they read.",
        "",
        "| variable | default | what it does |",
        "| --- | --- | --- |",
    ]
    for setting in all_settings():
        entry = known[setting.name]
        default = entry.get("default", setting.default)
        shown = (
            f"`{default}`"
            if default not in ("", None) and not default.startswith("*")
            else (default or "*(empty)*")
        )
        text = " ".join(str(entry["description"]).split()).replace("|", "\\|")
        rows.append(f"| `{setting.name}` | {shown} | {text} |")
    extra = {k: v for k, v in known.items() if v.get("read_by")}
    if extra:
        rows += [
            "",
            "Read by the start scripts rather than the settings:",
            "",
            "| variable | default | what it does |",
            "| --- | --- | --- |",
        ]
        for name, entry in extra.items():
            text = " ".join(str(entry["description"]).split()).replace("|", "\\|")
            rows.append(
                f"| `{name}` | `{entry.get('default', '')}` | {text} (`{entry['read_by']}`) |"
            )
    return "\n".join(rows) + "\n"


def stale() -> list[str]:
    """Descriptions of settings no source reads any more (read_by entries aside)."""
    read = {s.name for s in all_settings()}
    return [n for n, v in descriptions().items() if n not in read and not v.get("read_by")]
