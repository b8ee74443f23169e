"""Per-workspace full-text statistics: BM25's idf without counting on every recall.

``TextStat`` holds, for each workspace, its count of recallable knowledge rows
(active, not superseded; lexeme ``''``) and, for each lexeme, the count of those
rows holding it, each with how many of them are sensitive (recall leaves them out
unless asked). ``TextStatDelta`` is where writes add to it: statement triggers on
``memory_knowledge`` (migration 0007) append one row per workspace and lexeme a
statement changed, never updating a shared row, so concurrent writers never wait
for each other or deadlock on a common word. A read adds the two tables
(memory/knowledge/text_stats.py), so the counts are exact at every snapshot; the
``text_stats_fold`` job only moves deltas into ``TextStat`` to keep the delta
table short.

Neither table has a foreign key on the workspace: a workspace's deletion deletes its
knowledge, whose trigger writes negative deltas after Django's cascade has run; the
fold drops rows that reach zero.
"""

from __future__ import annotations

from django.db import models

__all__ = ["TextStat", "TextStatDelta"]

#: The lexeme under which a workspace's row count is kept (no real lexeme is empty).
ROWS = ""


class TextStat(models.Model):
    workspace_id = models.BigIntegerField()
    lexeme = models.TextField(blank=True)
    n = models.BigIntegerField(default=0)
    n_sensitive = models.BigIntegerField(default=0)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["workspace_id", "lexeme"], name="textstat_ws_lexeme")
        ]

    def __str__(self) -> str:
        return f"{self.workspace_id}:{self.lexeme or '(rows)'} {self.n}"


class TextStatDelta(models.Model):
    id = models.BigAutoField(primary_key=True)
    workspace_id = models.BigIntegerField()
    lexeme = models.TextField(blank=True)
    n = models.BigIntegerField(default=0)
    n_sensitive = models.BigIntegerField(default=0)

    class Meta:
        indexes = [models.Index(fields=["workspace_id", "lexeme"], name="textstatdelta_ws_lexeme")]

    def __str__(self) -> str:
        return f"{self.workspace_id}:{self.lexeme or '(rows)'} {self.n:+d}"
