"""manage.py export WORKSPACE [--agent | --project-remote/--project-path | --skill]
[--format json|jsonl] [-o FILE]: everything learned, with a progress bar on stderr."""

from __future__ import annotations

import sys

from django.core.management.base import BaseCommand, CommandError
from tqdm import tqdm

from cairn.errors import ApplicationError
from memory.core.audit import audit_record
from memory.models import Workspace
from memory.privacy.exports import FORMATS, export_write
from memory.privacy.selection import EXPORT_SELECTORS, selector_parse


class Command(BaseCommand):
    help = (
        "Write everything WORKSPACE learned (or only one agent's, project's or skill's rows) "
        "to a file or standard output, as JSON or JSON Lines, with a progress bar on stderr. "
        "Ids, lineage and evidence links are kept; tokens, embeddings and paths never are. "
        "Load the file into an empty workspace with `manage.py import_export`."
    )

    def add_arguments(self, parser):
        parser.add_argument("workspace", help="the workspace's short name, e.g. default")
        scope = parser.add_mutually_exclusive_group()
        scope.add_argument("--agent", help="only this agent's rows (by name)")
        scope.add_argument("--project-remote", help="only this project (its git remote URL)")
        scope.add_argument("--project-path", help="only this project (its checkout path)")
        scope.add_argument("--skill", help="only this skill, its versions and deltas")
        parser.add_argument(
            "--format",
            choices=FORMATS,
            default="json",
            help="json (one document, default) or jsonl (one record per line, for large sets)",
        )
        parser.add_argument("-o", "--output", help="file to write (default: standard output)")

    def handle(self, *args, workspace, output, **options):
        ws = Workspace.objects.filter(name=workspace).first()
        if ws is None:
            raise CommandError(f"No workspace named {workspace!r}.")
        data = {
            key: options[key]
            for key in ("agent", "project_remote", "project_path", "skill")
            if options.get(key)
        }
        try:
            selector = selector_parse(workspace=ws, data=data, allowed=EXPORT_SELECTORS)
        except ApplicationError as exc:
            raise CommandError(exc.message) from exc
        # The raw stream: Django's OutputWrapper would add a newline after every write.
        out = open(output, "w", encoding="utf-8") if output else self.stdout._out
        bar = tqdm(total=0, unit="rows", desc="export", file=sys.stderr, disable=None)

        def progress(done: int, total: int) -> None:
            bar.total = total
            bar.n = done
            bar.refresh()

        try:
            counts = export_write(
                workspace=ws, selector=selector, out=out, fmt=options["format"], progress=progress
            )
        finally:
            bar.close()
            if output:
                out.close()
        audit_record(
            workspace=ws,
            actor="system:shell",
            action="export.shell",
            target_type="workspace",
            target_id=ws.pk,
            details={"selector": selector.receipt(), "format": options["format"]},
        )
        summary = ", ".join(f"{name} {n}" for name, n in counts.items() if n)
        self.stderr.write(f"Exported {sum(counts.values())} rows ({summary or 'nothing'}).")
