"""What each event says: ids, kinds, states and links, never text anyone wrote (nor
a name an agent chose, such as a skill's: a receiver follows the link to read it).

Each domain calls one of these from the service where the thing happens; the
delivery rows join the caller's transaction and are sent when it commits.
"""

from __future__ import annotations

from memory.models import WebhookEvent
from memory.webhooks.services import absolute_url, webhook_event


def delta_event(*, delta, event: str, decision: str = "", decided_by: str = "") -> int:
    """``delta.staged`` / ``delta.quarantined`` / ``delta.decided`` for one delta."""

    def data() -> dict:
        body = {
            "delta": {
                "id": delta.pk,
                "kind": delta.kind,
                "status": delta.status,
                "trust": delta.trust,
                "skill_id": delta.skill_id,
                "agent_id": delta.agent_id,
                "url": absolute_url("reviews:deltas_detail", delta.pk, workspace=delta.workspace),
            }
        }
        if event == WebhookEvent.DELTA_DECIDED:
            body["decision"] = decision
            body["decided_by"] = decided_by
        else:
            queue = "reviews:staged" if event == WebhookEvent.DELTA_STAGED else "reviews:quarantine"
            body["queue_url"] = absolute_url(queue, workspace=delta.workspace)
        return body

    return webhook_event(workspace=delta.workspace, event=event, data=data)


def lesson_retired_event(*, lesson, retired_by: str) -> int:
    data = lambda: {  # noqa: E731
        "lesson": {
            "id": lesson.pk,
            "retired_by": retired_by,
            "url": absolute_url("reviews:lessons_detail", lesson.pk, workspace=lesson.workspace),
        }
    }
    return webhook_event(workspace=lesson.workspace, event=WebhookEvent.LESSON_RETIRED, data=data)


def erasure_completed_event(*, receipt) -> int:
    data = lambda: {  # noqa: E731
        "erasure": {
            "id": receipt.pk,
            "status": receipt.status,
            "rows": sum((receipt.counts or {}).values()),
            "url": absolute_url("reviews:erasures_detail", receipt.pk, workspace=receipt.workspace),
        }
    }
    return webhook_event(
        workspace=receipt.workspace, event=WebhookEvent.ERASURE_COMPLETED, data=data
    )
