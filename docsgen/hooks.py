"""MkDocs hooks (mkdocs.yml ``hooks:``): generated pages and the snippet markers.

Generated at every build, never committed, so they cannot fall behind the code:
``reference/api.md`` (the OpenAPI schema), ``reference/configuration.md`` (the
settings), ``reference/commands.md`` (the commands' ``--help``), and the current
benchmark results and charts from ``bench/results/`` under ``benchmarks/results/``.
"""

from __future__ import annotations

import re
import sys
from pathlib import Path

from mkdocs.structure.files import File, Files

ROOT = Path(__file__).resolve().parent.parent
if str(ROOT) not in sys.path:  # mkdocs loads this file by path
    sys.path.insert(0, str(ROOT))

from docsgen import commands_page, openapi_page, settings_table  # noqa: E402
from docsgen.snippets import MARKER_LINE  # noqa: E402

BENCH_RESULTS = ROOT / "bench" / "results"


def on_files(files: Files, config) -> Files:
    pages = {
        "reference/api.md": openapi_page.markdown(openapi_page.schema()),
        "reference/configuration.md": settings_table.markdown(),
        "reference/commands.md": commands_page.markdown(commands_page.helps()),
    }
    for uri, content in pages.items():
        files.append(File.generated(config, uri, content=content))
    for path in sorted(BENCH_RESULTS.glob("*.svg")):
        files.append(
            File.generated(config, f"benchmarks/results/{path.name}", abs_src_path=str(path))
        )
    for path in sorted(BENCH_RESULTS.glob("*.md")):
        title = f"# Current result: {path.stem}\n\n"
        note = (
            f"As `bench/bench_*.py` wrote it to `bench/results/{path.name}` "
            "(earlier runs are in the repository's history).\n\n"
        )
        files.append(
            File.generated(
                config, f"benchmarks/results/{path.name}", content=title + note + path.read_text()
            )
        )
    return files


def on_page_markdown(markdown: str, page, config, files) -> str:
    """Snippet markers are for the snippet test, not the reader: drop their lines."""
    return re.sub(MARKER_LINE, "", markdown, flags=re.M)
