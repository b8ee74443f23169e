"""`manage.py import_conversations FILE --workspace W --agent A`: bring existing
conversation history in through the same batch path as the API.

FILE is JSON Lines (``-`` reads stdin). Each line is one session::

    {"session_id": "2023-05-08-chat", "context": "personal",
     "turns": [{"role": "user", "content": "...", "turn_index": 0,
                "at": "2023-05-08T13:56:00Z"}, ...]}

``turn_index`` defaults to the turn's position in the line, ``context`` to the
line's (or ``global``). Sessions longer than the batch limit go in chunks. A
session that was imported before is a retry (its turns count as existing); one
with different content for a stored turn stops the import with its line number.
"""

from __future__ import annotations

import json
import sys

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError
from django.utils.dateparse import parse_datetime
from tqdm import tqdm

from cairn.errors import ApplicationError
from memory.identity.services import agent_get_or_create, workspace_get_or_create
from memory.knowledge.conversations import turns_store_many
from memory.models import Channel


def _turns(line_no: int, session: dict) -> list[dict]:
    turns = session.get("turns")
    if not isinstance(turns, list):
        raise CommandError(f"line {line_no}: 'turns' must be a list")
    out = []
    for position, raw in enumerate(turns):
        if not isinstance(raw, dict):
            raise CommandError(f"line {line_no}: turns[{position}] must be an object")
        turn = {
            "role": raw.get("role"),
            "content": raw.get("content"),
            "turn_index": raw.get("turn_index", position),
            "context": raw.get("context") or session.get("context") or "global",
        }
        at = raw.get("at")
        if at is not None:
            parsed = parse_datetime(at) if isinstance(at, str) else None
            if parsed is None:
                raise CommandError(f"line {line_no}: turns[{position}].at is not ISO 8601")
            turn["at"] = parsed
        out.append(turn)
    return out


class Command(BaseCommand):
    help = "Import conversation sessions and turns from a JSON Lines FILE (see the docstring)."

    def add_arguments(self, parser):
        parser.add_argument("file", help="JSON Lines file, or - for stdin")
        parser.add_argument("--workspace", required=True, help="the workspace to import into")
        parser.add_argument("--agent", required=True, help="the agent the turns belong to")
        parser.add_argument("--no-progress", action="store_true", help="no progress bar")

    def handle(self, *args, file, workspace, agent, no_progress, **options):
        try:
            ws = workspace_get_or_create(name=workspace)
            agent_obj = agent_get_or_create(workspace=ws, name=agent)
        except ApplicationError as exc:
            raise CommandError(exc.message) from exc
        stream = sys.stdin if file == "-" else open(file, encoding="utf-8")  # noqa: SIM115
        with stream:
            lines = [line for line in stream if line.strip()]
        chunk = settings.CAIRN_TURN_BATCH_MAX
        sessions = created = existing = 0
        with tqdm(total=len(lines), unit="session", disable=no_progress, file=self.stderr) as bar:
            for line_no, line in enumerate(lines, 1):
                try:
                    session = json.loads(line)
                except json.JSONDecodeError as exc:
                    raise CommandError(f"line {line_no}: not JSON ({exc.msg})") from exc
                if not isinstance(session, dict):
                    raise CommandError(f"line {line_no}: must be a JSON object")
                turns = _turns(line_no, session)
                for start in range(0, len(turns), chunk):
                    try:
                        result = turns_store_many(
                            workspace=ws,
                            agent=agent_obj,
                            session_id=session.get("session_id"),
                            turns=turns[start : start + chunk],
                            # An operator's import: neither the model's word nor the harness.
                            channel=Channel.SYSTEM,
                        )
                    except ApplicationError as exc:
                        fields = "; ".join(f"{k}: {', '.join(v)}" for k, v in exc.fields.items())
                        raise CommandError(
                            f"line {line_no}: {exc.message} ({fields})".replace(
                                "turns[", f"turns[{start}+"
                            )
                            if start
                            else f"line {line_no}: {exc.message} ({fields})"
                        ) from exc
                    created += sum(result.created)
                    existing += len(result.created) - sum(result.created)
                sessions += 1
                bar.update(1)
                bar.set_postfix(turns=created + existing)
        self.stdout.write(
            f"Imported {sessions} session(s): {created} new turn(s), {existing} already stored."
        )
