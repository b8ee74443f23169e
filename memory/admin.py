"""The Django admin: identity and operations models (skills in ``skills/admin.py``)."""

from django.contrib import admin

from memory.identity.services import token_revoke
from memory.models import Agent, ApiToken, AuditEvent, JobRun, Membership, Workspace
from memory.skills import admin as skills_admin  # noqa: F401  (registers the skill admins)


class MembershipInline(admin.TabularInline):
    model = Membership
    extra = 0
    autocomplete_fields = ["user"]


@admin.register(Workspace)
class WorkspaceAdmin(admin.ModelAdmin):
    list_display = ["name", "display_name", "is_demo", "created_at"]
    search_fields = ["name", "display_name"]
    inlines = [MembershipInline]


@admin.register(Agent)
class AgentAdmin(admin.ModelAdmin):
    list_display = ["name", "workspace", "created_at"]
    list_filter = ["workspace"]
    search_fields = ["name"]


@admin.register(ApiToken)
class ApiTokenAdmin(admin.ModelAdmin):
    """Tokens are issued with `manage.py create_agent` or the UI: the admin can
    see and revoke them, never read them (only the digest is stored)."""

    list_display = [
        "prefix",
        "agent",
        "workspace",
        "scope",
        "created_at",
        "last_used_at",
        "revoked_at",
    ]
    list_filter = ["workspace", "scope"]
    readonly_fields = [
        "agent",
        "workspace",
        "prefix",
        "digest",
        "scope",
        "created_at",
        "created_by",
        "last_used_at",
    ]
    actions = ["revoke"]

    def has_add_permission(self, request):
        return False

    @admin.action(description="Revoke selected tokens")
    def revoke(self, request, queryset):

        for token in queryset:
            token_revoke(token=token, actor=f"user:{request.user.username}", reason="admin action")


@admin.register(Membership)
class MembershipAdmin(admin.ModelAdmin):
    list_display = ["user", "workspace", "role", "created_at"]
    list_filter = ["workspace", "role"]


@admin.register(JobRun)
class JobRunAdmin(admin.ModelAdmin):
    list_display = ["kind", "workspace", "status", "started_at", "finished_at"]
    list_filter = ["kind", "status"]


@admin.register(AuditEvent)
class AuditEventAdmin(admin.ModelAdmin):
    list_display = ["created_at", "workspace", "actor", "action", "target_type", "target_id"]
    list_filter = ["action", "workspace"]

    def has_change_permission(self, request, obj=None):
        return False


# Each area registers its own admin classes beside its models.
