"""manage.py import_export FILE WORKSPACE: load an export into an empty workspace."""

from __future__ import annotations

from pathlib import Path

from django.core.management.base import BaseCommand, CommandError

from cairn.errors import ApplicationError
from memory.core.actors import Actor
from memory.identity.services import workspace_get_or_create
from memory.privacy.imports import export_import


class Command(BaseCommand):
    help = "Import a Cairn export (JSON or JSONL) into WORKSPACE, created if missing; it must be empty."

    def add_arguments(self, parser):
        parser.add_argument("file")
        parser.add_argument("workspace")

    def handle(self, *args, file, workspace, **options):
        path = Path(file)
        if not path.is_file():
            raise CommandError(f"No such file: {file}")
        try:
            ws = workspace_get_or_create(name=workspace)
            created = export_import(
                workspace=ws, path=path, actor=Actor(kind="system", label="system:shell")
            )
        except ApplicationError as exc:
            raise CommandError(exc.message) from exc
        summary = ", ".join(f"{name} {n}" for name, n in created.items() if n)
        self.stdout.write(f"Imported into {ws.name}: {summary or 'nothing'}.")
