from functools import cached_property
from urllib.parse import urlencode

from django.conf import settings

from memory.core.selectors import job_run_active_count
from memory.identity.selectors import token_active_count
from memory.models import Role
from memory.review.selectors import review_item_open_count
from memory.skills.selectors import delta_queue_counts
from reviews.access import WORKSPACE_PARAM, current_membership


class NavCounts:
    """Counters shown in the nav, each one query, computed only if a template asks.

    The review queues of later issues (staged deltas, quarantine, orphans) add a
    property here and a badge in base.html's nav partial; actions that change a
    queue re-render the nav out of band, so the counters stay right without a reload.
    """

    def __init__(self, workspace):
        self.workspace = workspace

    @cached_property
    def active_tokens(self) -> int:
        return token_active_count(workspace=self.workspace)

    @cached_property
    def active_jobs(self) -> int:
        return job_run_active_count(workspace=self.workspace)

    @cached_property
    def open_contradictions(self) -> int:
        return review_item_open_count(workspace=self.workspace)

    # The three delta queues share one grouped count.
    @cached_property
    def _delta_queues(self) -> dict[str, int]:
        return delta_queue_counts(workspace=self.workspace)

    @property
    def staged_deltas(self) -> int:
        return self._delta_queues["staged"]

    @property
    def quarantined_deltas(self) -> int:
        return self._delta_queues["quarantined"]

    @property
    def orphaned_deltas(self) -> int:
        return self._delta_queues["orphaned"]


def _section(request) -> str:
    """The nav entry to mark current: URL names are ``<section>`` or ``<section>_<verb>``."""
    match = getattr(request, "resolver_match", None)
    return (match.url_name or "").split("_")[0] if match else ""


def workspace(request):
    membership = current_membership(request)
    if membership is None:
        return {"membership": None, "workspace": None, "memberships": [], "nav_section": ""}
    return {
        "membership": membership,
        "workspace": membership.workspace,
        "memberships": request.user.memberships.select_related("workspace").order_by(
            "workspace__name"
        ),
        "can_review": membership.allows(Role.REVIEWER),
        "can_admin": membership.allows(Role.ADMIN),
        "nav_counts": NavCounts(membership.workspace),
        "nav_section": _section(request),
        # Appended to every shareable link (see reviews.access.link_membership).
        "ws_query": "?" + urlencode({WORKSPACE_PARAM: membership.workspace.name}),
        "workspace_switched": getattr(request, "workspace_switched", None),
        "counts_poll_s": settings.CAIRN_UI_COUNTS_POLL_S,
        "docs_url": settings.CAIRN_DOCS_URL.rstrip("/") + "/",
        "site_url": settings.SITE_URL,
    }
