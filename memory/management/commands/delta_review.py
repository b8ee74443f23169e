"""Review learned deltas from the shell until the review UI lands (it will call the same services)."""

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError

from cairn.errors import ApplicationError
from memory.core.actors import Actor
from memory.models import SkillDelta, Workspace
from memory.skills.consent import (
    delta_approve,
    delta_confirm_quarantined,
    delta_reapprove,
    delta_reject,
    delta_revert,
)

ACTIONS = {
    "approve": delta_approve,
    "confirm": delta_confirm_quarantined,
    "reject": delta_reject,
    "revert": delta_revert,
}


class Command(BaseCommand):
    help = (
        "List or review learned skill deltas (changes agents proposed to a skill) from the "
        "shell, as the review UI does. `list WORKSPACE [--status staged]` prints one line per "
        "delta (id, status, skill#section, kind, agent, provenance, payload). "
        "`approve|confirm|reject|revert|reapprove ID [ID ...] --user USERNAME --reason TEXT` "
        "acts as that reviewer or admin, audited under their name."
    )

    def add_arguments(self, parser):
        parser.add_argument(
            "action",
            choices=["list", "reapprove", *ACTIONS],
            help="list, or what to do with the deltas: approve a staged one, confirm a "
            "quarantined one, reject, revert an active one, reapprove stale ones",
        )
        parser.add_argument("targets", nargs="+", help="a workspace name for list, else delta ids")
        parser.add_argument("--user", help="the reviewing user (reviewer or admin)")
        parser.add_argument("--reason", default="", help="why, kept in the audit log")
        parser.add_argument(
            "--status", help="list only deltas with this status (staged, quarantined, active, …)"
        )

    def handle(self, *args, action, targets, user, reason, status, **options):
        if action == "list":
            return self._list(targets[0], status)
        if not user:
            raise CommandError("--user is required to review a delta.")
        person = get_user_model().objects.filter(username=user).first()
        if person is None:
            raise CommandError(f"No user {user!r}.")
        try:
            ids = [int(t) for t in targets]
        except ValueError as exc:
            raise CommandError("Delta ids are integers.") from exc
        deltas = list(SkillDelta.objects.select_related("workspace").filter(pk__in=ids))
        if len(deltas) != len(set(ids)):
            raise CommandError("Unknown delta id.")
        try:
            if action == "reapprove":
                result = delta_reapprove(deltas=deltas, actor=Actor.for_user(person), reason=reason)
                self.stdout.write(str(result))
                return
            for delta in deltas:
                changed = ACTIONS[action](delta=delta, actor=Actor.for_user(person), reason=reason)
                self.stdout.write(f"delta {changed.pk}: {changed.status}")
        except ApplicationError as exc:
            raise CommandError(exc.message) from exc

    def _list(self, workspace_name: str, status: str | None):
        workspace = Workspace.objects.filter(name=workspace_name).first()
        if workspace is None:
            raise CommandError(f"No workspace {workspace_name!r}.")
        deltas = SkillDelta.objects.filter(workspace=workspace).select_related("skill", "agent")
        if status:
            deltas = deltas.filter(status=status)
        for d in deltas.order_by("id"):
            flags = " stale" if d.stale else ""
            findings = f" findings={[f['rule'] for f in d.findings]}" if d.findings else ""
            self.stdout.write(
                f"{d.pk}\t{d.status}{flags}\t{d.skill.name}#{d.anchor_section}\t{d.kind}\t"
                f"{d.agent.name}\t{d.provenance_source}{findings}\t{d.payload}"
            )
