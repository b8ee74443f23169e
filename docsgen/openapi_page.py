"""The API reference page, rendered from the OpenAPI schema drf-spectacular builds.

The schema comes from ``manage.py spectacular`` run with placeholder database and
broker addresses: building it imports the settings and the URL conf but never
connects, so the docs build needs no running service (and starts no embedded one).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
METHODS = ("get", "post", "put", "patch", "delete")
#: Settings read at import need values; nothing listens at these addresses.
OFFLINE_ENV = {
    "DATABASE_URL": "postgres://docs@127.0.0.1:9/docs",
    "REDIS_URL": "redis://127.0.0.1:9/0",
    "SECRET_KEY": "docs-build-only",
    "DJANGO_SETTINGS_MODULE": "cairn.settings",
    "COLUMNS": "88",  # --help wraps to the page, the same on every machine
}


def offline_env() -> dict[str, str]:
    return {**os.environ, **OFFLINE_ENV}


def schema() -> dict:
    with tempfile.TemporaryDirectory() as tmp:
        out = Path(tmp) / "schema.json"
        subprocess.run(
            [
                sys.executable,
                "manage.py",
                "spectacular",
                "--format",
                "openapi-json",
                "--file",
                str(out),
            ],
            cwd=ROOT,
            env=offline_env(),
            check=True,
            capture_output=True,
            timeout=120,
        )
        return json.loads(out.read_text())


def _ref_name(node: dict | None) -> str:
    if not node:
        return ""
    if "$ref" in node:
        return node["$ref"].rsplit("/", 1)[-1]
    if node.get("type") == "array":
        return f"list of {_ref_name(node.get('items')) or node['items'].get('type', 'items')}"
    return node.get("type", "object")


def _ref_link(node: dict | None) -> str:
    """The type of ``node``, a link to its schema below when it is one (anchors are
    checked by the strict build)."""
    if not node:
        return ""
    if "$ref" in node:
        name = node["$ref"].rsplit("/", 1)[-1]
        return f"[`{name}`](#{name.lower()})"
    if node.get("type") == "array" and "$ref" in (node.get("items") or {}):
        return f"list of {_ref_link(node['items'])}"
    return f"`{_ref_name(node)}`"


def _cell(text: str) -> str:
    return " ".join(str(text).split()).replace("|", "\\|")


def markdown(spec: dict) -> str:
    info = spec.get("info", {})
    lines = [
        "# API reference",
        "",
        _cell(info.get("description", "")),
        "",
        f"OpenAPI {spec.get('openapi', '3')}, API version {info.get('version', '')}. A running",
        "server serves the same schema at `/api/v1/schema/` and interactive docs at",
        "`/api/v1/docs/`. Errors always have the shape",
        '`{"error": {"code": "...", "message": "...", "fields": {"field": ["why"]}}}`',
        "and a 4xx status.",
        "",
    ]
    by_tag: dict[str, list[tuple[str, str, dict]]] = {}
    for path, item in spec.get("paths", {}).items():
        for method in METHODS:
            if method in item:
                op = item[method]
                by_tag.setdefault((op.get("tags") or ["other"])[0], []).append((path, method, op))
    for tag in sorted(by_tag):
        lines += [f"## {tag}", ""]
        for path, method, op in by_tag[tag]:
            lines += [f"### `{method.upper()} {path}`", ""]
            if op.get("summary"):
                lines += [_cell(op["summary"]), ""]
            if op.get("description"):
                lines += [op["description"].strip(), ""]
            params = op.get("parameters") or []
            if params:
                lines += [
                    "| parameter | in | required | type | description |",
                    "| --- | --- | --- | --- | --- |",
                ]
                for p in params:
                    lines.append(
                        f"| `{p['name']}` | {p.get('in', '')} | {'yes' if p.get('required') else 'no'} "
                        f"| {_ref_name(p.get('schema'))} | {_cell(p.get('description', ''))} |"
                    )
                lines.append("")
            body = (op.get("requestBody") or {}).get("content", {})
            if body:
                kind, media = next(iter(body.items()))
                lines += [f"Request body ({kind}): {_ref_link(media.get('schema'))}", ""]
            responses = op.get("responses") or {}
            if responses:
                lines += ["| status | body | description |", "| --- | --- | --- |"]
                for status, resp in responses.items():
                    content = resp.get("content") or {}
                    shape = _ref_link(next(iter(content.values())).get("schema")) if content else ""
                    lines.append(f"| {status} | {shape} | {_cell(resp.get('description', ''))} |")
                lines.append("")
    schemas = spec.get("components", {}).get("schemas", {})
    if schemas:
        lines += ["## Schemas", ""]
        for name in sorted(schemas):
            node = schemas[name]
            lines += [f"### {name}", ""]
            if node.get("description"):
                lines += [_cell(node["description"]), ""]
            props = node.get("properties") or {}
            if node.get("enum"):
                lines += [
                    "One of: " + ", ".join(f"`{v}`" for v in node["enum"] if v is not None),
                    "",
                ]
            if props:
                required = set(node.get("required") or [])
                lines += ["| field | type | required | description |", "| --- | --- | --- | --- |"]
                for field, prop in props.items():
                    kind = (
                        _ref_name(prop)
                        if "$ref" in prop or prop.get("type")
                        else _ref_name((prop.get("allOf") or prop.get("oneOf") or [{}])[0])
                    )
                    flags = " (read-only)" if prop.get("readOnly") else ""
                    lines.append(
                        f"| `{field}` | {kind}{flags} | {'yes' if field in required else 'no'} "
                        f"| {_cell(prop.get('description', ''))} |"
                    )
                lines.append("")
    return "\n".join(lines) + "\n"
