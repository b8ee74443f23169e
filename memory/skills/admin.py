"""Django admin for skills and learned deltas: inspection plus the consent actions.

The review UI will call the same services; until it exists, reviewers (workspace
members with the reviewer or admin role) can approve here.
"""

from django.contrib import admin, messages

from cairn.errors import ApplicationError
from memory.core.actors import Actor
from memory.models import (
    AgentTool,
    FeedbackSample,
    LearnedFact,
    Membership,
    OrphanNotice,
    Role,
    Skill,
    SkillDelta,
    SkillVersion,
)
from memory.skills.consent import (
    delta_approve,
    delta_confirm_quarantined,
    delta_reapprove,
    delta_reject,
    delta_revert,
)


def _reviewed_workspaces(request) -> list[int]:
    if not request.user.is_authenticated:  # the admin's own login page
        return []
    return list(
        Membership.objects.filter(
            user=request.user, role__in=[Role.REVIEWER, Role.ADMIN]
        ).values_list("workspace_id", flat=True)
    )


class ReadOnlyAdmin(admin.ModelAdmin):
    """Visible to workspace reviewers/admins (Django staff), scoped to their workspaces."""

    workspace_path = "workspace_id"

    def has_module_permission(self, request):
        return request.user.is_superuser or bool(_reviewed_workspaces(request))

    def has_view_permission(self, request, obj=None):
        return self.has_module_permission(request)

    def get_list_filter(self, request):
        """Workspace filters offer only the workspaces whose rows this user may see
        (Django's default lists every workspace's name)."""
        filters = super().get_list_filter(request)
        if request.user.is_superuser:
            return filters
        return [
            (name, admin.RelatedOnlyFieldListFilter)
            if isinstance(name, str) and name.split("__")[-1] == "workspace"
            else name
            for name in filters
        ]

    def get_queryset(self, request):
        queryset = super().get_queryset(request)
        if request.user.is_superuser:
            return queryset
        return queryset.filter(**{f"{self.workspace_path}__in": _reviewed_workspaces(request)})

    def has_add_permission(self, request):
        return False

    def has_change_permission(self, request, obj=None):
        return False

    def has_delete_permission(self, request, obj=None):
        return False


@admin.register(Skill)
class SkillAdmin(ReadOnlyAdmin):
    list_display = ["name", "workspace", "current_version", "created_at"]
    list_filter = ["workspace"]
    search_fields = ["name"]


@admin.register(SkillVersion)
class SkillVersionAdmin(ReadOnlyAdmin):
    workspace_path = "skill__workspace_id"
    list_display = ["skill", "version", "body_digest", "created_at"]
    list_filter = ["skill__workspace"]


@admin.register(SkillDelta)
class SkillDeltaAdmin(ReadOnlyAdmin):
    list_display = [
        "id",
        "skill",
        "agent",
        "kind",
        "anchor_section",
        "status",
        "trust",
        "provenance_source",
        "stale",
        "retrieval_only",
        "created_at",
    ]
    list_filter = ["status", "kind", "trust", "workspace"]
    exclude = ["trigger_embedding", "payload_embedding"]
    actions = ["approve", "confirm_quarantined", "reject", "revert", "reapprove"]

    def _each(self, request, queryset, service, reason):
        for delta in queryset:
            try:
                service(delta=delta, actor=Actor.for_user(request.user), reason=reason)
            except ApplicationError as exc:
                self.message_user(request, f"Delta {delta.pk}: {exc.message}", messages.ERROR)
            else:
                self.message_user(request, f"Delta {delta.pk}: done.")

    @admin.action(description="Approve staged deltas (applies from the next session)")
    def approve(self, request, queryset):
        self._each(request, queryset, delta_approve, "approved in the admin")

    @admin.action(description="Confirm quarantined deltas (untrusted: check each one)")
    def confirm_quarantined(self, request, queryset):
        self._each(
            request, queryset, delta_confirm_quarantined, "confirmed in the admin after review"
        )

    @admin.action(description="Reject (archive) pending deltas")
    def reject(self, request, queryset):
        self._each(request, queryset, delta_reject, "rejected in the admin")

    @admin.action(description="Revert (archive) active deltas")
    def revert(self, request, queryset):
        self._each(request, queryset, delta_revert, "reverted in the admin")

    @admin.action(description="Re-approve orphaned deltas onto the current version")
    def reapprove(self, request, queryset):
        try:
            result = delta_reapprove(
                deltas=list(queryset),
                actor=Actor.for_user(request.user),
                reason="re-approved in the admin",
            )
        except ApplicationError as exc:
            self.message_user(request, exc.message, messages.ERROR)
            return
        self.message_user(request, f"Re-approval: {result}")


@admin.register(OrphanNotice)
class OrphanNoticeAdmin(ReadOnlyAdmin):
    list_display = ["skill", "version", "count", "created_at", "seen_at"]


@admin.register(LearnedFact)
class LearnedFactAdmin(ReadOnlyAdmin):
    list_display = ["namespace", "key", "scope", "workspace", "superseded_by", "created_at"]
    list_filter = ["workspace", "namespace"]


@admin.register(AgentTool)
class AgentToolAdmin(ReadOnlyAdmin):
    list_display = ["agent", "name", "mutating", "needs_confirmation", "reads_facts"]
    list_filter = ["workspace"]


@admin.register(FeedbackSample)
class FeedbackSampleAdmin(ReadOnlyAdmin):
    list_display = ["scope", "action_type", "positive", "agent", "created_at"]
    list_filter = ["workspace", "positive"]
