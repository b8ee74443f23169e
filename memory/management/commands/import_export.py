"""manage.py import_export FILE WORKSPACE [--create-workspace]: load an export into an
empty workspace, with a progress bar on stderr and a report on stdout."""

from __future__ import annotations

import sys
from pathlib import Path

from django.core.management.base import BaseCommand, CommandError
from django.db import transaction
from tqdm import tqdm

from cairn.errors import ApplicationError
from memory.core.actors import Actor
from memory.identity.services import workspace_get_or_create
from memory.models import Workspace
from memory.privacy.imports import export_import, import_check


class Command(BaseCommand):
    help = (
        "Load a Cairn export file (made by `manage.py export` or the Export page, JSON or "
        "JSON Lines) into WORKSPACE, which must exist and hold no learned data yet. Every id "
        "is renumbered, references included; a reference whose target is not in the file "
        "(an export of one agent, project or skill) is dropped and counted. Everything "
        "happens in one transaction: on any error nothing is imported. Prints a report: "
        "rows per table, references remapped and dropped."
    )

    def add_arguments(self, parser):
        parser.add_argument("file", help="the export file (.json or .jsonl)")
        parser.add_argument("workspace", help="the workspace to fill (its short name)")
        parser.add_argument(
            "--create-workspace",
            action="store_true",
            help="create WORKSPACE if it does not exist (otherwise a mistyped name is refused)",
        )

    def handle(self, *args, file, workspace, create_workspace, **options):
        path = Path(file)
        if not path.is_file():
            raise CommandError(f"No such file: {file}")
        ws = Workspace.objects.filter(name=workspace).first()
        if ws is None and not create_workspace:
            raise CommandError(
                f"No workspace named {workspace!r}. Check the name, or add --create-workspace "
                "to create it."
            )
        bar = tqdm(total=0, unit="rows", desc="import", file=sys.stderr, disable=None)

        def progress(done: int, total: int) -> None:
            bar.total = total
            bar.n = done
            bar.refresh()

        try:
            import_check(path=path)  # refuse a wrong file before creating anything
            with transaction.atomic():  # a failed import leaves no new workspace behind
                created = ws is None
                if created:
                    ws = workspace_get_or_create(name=workspace)
                report = export_import(
                    workspace=ws,
                    path=path,
                    actor=Actor.system("shell"),
                    progress=progress,
                )
        except ApplicationError as exc:
            raise CommandError(exc.message) from exc
        finally:
            bar.close()
        if created:
            self.stdout.write(f"Created workspace {ws.name!r}.")
        for line in report.lines():
            self.stdout.write(line)
