"""The derived-data map's entries for the service around the memory: webhooks (a
person's configuration and what was sent), the action gate's questions and approvals,
and recall's full-text counts. ``memory.privacy.datamap`` lists them in its visiting
order; kept apart only so the map's main module stays one idea a page."""

from __future__ import annotations

from memory.privacy.queries import by, by_agent
from memory.privacy.tables import CONTENT, DERIVED, Table


def service_entries() -> list[Table]:
    return [
        # ---- webhooks (configuration a person typed, and what was sent to it)
        Table(
            "memory.Webhook",
            CONTENT,
            "Where events are POSTed: a URL an admin typed (it can name a person or team) "
            "and the events chosen. Its secret is never stored, only the salt it is "
            "derived from, which export leaves out (an import draws a new one).",
            export="webhooks",
            export_exclude=("salt",),
        ),
        Table(
            "memory.WebhookDelivery",
            DERIVED,
            "Events sent to a webhook: ids, kinds, states and links, no content; they go "
            "with their webhook. Pruned after CAIRN_RETENTION_WEBHOOK_DAYS.",
            workspace_path="webhook__workspace",
            cascades_from=("memory.Webhook",),
        ),
        Table(
            "memory.WebhookAttempt",
            DERIVED,
            "One HTTP request of a delivery: status code, duration, our own error words.",
            workspace_path="delivery__webhook__workspace",
            cascades_from=("memory.WebhookDelivery",),
        ),
        # ---- the action gate (SPEC section 4a)
        Table(
            "memory.ActionCheck",
            CONTENT,
            "A command the action gate asked a person about or denied, with its reasons "
            "and the person's answer. Not exported: an answer is trust given on this "
            "install, and an import must not carry it to another.",
            selectors={
                "agent": by_agent(),
                "project": by("project_digest"),
                "session": by("session_id"),
            },
            quoted=("command", "reasons", "reach"),
        ),
        Table(
            "memory.ActionApproval",
            CONTENT,
            "A reach part (an address, a path, a program) a person approved for one "
            "project. Not exported, for the same reason as the gate's checks.",
            selectors={"project": by("project_digest")},
        ),
        # ---- full-text statistics, kept by triggers on knowledge (migration 0007)
        Table(
            "memory.TextStat",
            DERIVED,
            "Per workspace and word, how many recallable knowledge rows hold it. An erased "
            "row's share leaves by trigger; the job folds the counts, so a word only "
            "erased rows held is deleted, and rewrites the table.",
            workspace_path="workspace_id",
            by_trigger=True,
        ),
        Table(
            "memory.TextStatDelta",
            DERIVED,
            "Changes to those counts not yet folded; the erasure job folds them all.",
            workspace_path="workspace_id",
            by_trigger=True,
        ),
    ]
