"""Per-workspace full-text statistics (memory/models/textstats.py): the tables, the
statement triggers on memory_knowledge that append deltas, and the counts of the rows
already stored."""

from django.db import migrations, models

# One function for the three statement triggers (PostgreSQL allows transition tables
# on single-event triggers only). A row counts while it is active and not superseded;
# each counted row adds 1 to its workspace's row count ('') and to each of its lexemes.
# An update counts only rows whose workspace, status, supersession, sensitivity or
# text changed (recall's use-count update changes none of them and writes nothing).
TRIGGER_FUNCTION = r"""
CREATE OR REPLACE FUNCTION memory_knowledge_text_delta() RETURNS trigger
LANGUAGE plpgsql AS $fn$
BEGIN
    IF TG_OP = 'INSERT' THEN
        INSERT INTO memory_textstatdelta (workspace_id, lexeme, n, n_sensitive)
        SELECT r.workspace_id, l.lx, count(*), count(*) FILTER (WHERE r.sensitive)
        FROM new_rows r
        CROSS JOIN LATERAL (
            SELECT '' UNION ALL SELECT unnest(tsvector_to_array(r.search_vector))
        ) l(lx)
        WHERE r.status = 'active' AND r.superseded_by_id IS NULL
        GROUP BY 1, 2;
    ELSIF TG_OP = 'DELETE' THEN
        INSERT INTO memory_textstatdelta (workspace_id, lexeme, n, n_sensitive)
        SELECT r.workspace_id, l.lx, -count(*), -count(*) FILTER (WHERE r.sensitive)
        FROM old_rows r
        CROSS JOIN LATERAL (
            SELECT '' UNION ALL SELECT unnest(tsvector_to_array(r.search_vector))
        ) l(lx)
        WHERE r.status = 'active' AND r.superseded_by_id IS NULL
        GROUP BY 1, 2;
    ELSE
        INSERT INTO memory_textstatdelta (workspace_id, lexeme, n, n_sensitive)
        SELECT c.workspace_id, l.lx, sum(c.sign), sum(c.sign * c.sensitive::int)
        FROM (
            SELECT o.workspace_id, o.search_vector, o.sensitive, -1 AS sign
            FROM old_rows o JOIN new_rows w ON w.id = o.id
            WHERE o.status = 'active' AND o.superseded_by_id IS NULL
              AND (o.workspace_id, o.status, o.superseded_by_id, o.sensitive, o.search_vector)
                  IS DISTINCT FROM
                  (w.workspace_id, w.status, w.superseded_by_id, w.sensitive, w.search_vector)
            UNION ALL
            SELECT w.workspace_id, w.search_vector, w.sensitive, 1
            FROM old_rows o JOIN new_rows w ON w.id = o.id
            WHERE w.status = 'active' AND w.superseded_by_id IS NULL
              AND (o.workspace_id, o.status, o.superseded_by_id, o.sensitive, o.search_vector)
                  IS DISTINCT FROM
                  (w.workspace_id, w.status, w.superseded_by_id, w.sensitive, w.search_vector)
        ) c
        CROSS JOIN LATERAL (
            SELECT '' UNION ALL SELECT unnest(tsvector_to_array(c.search_vector))
        ) l(lx)
        GROUP BY 1, 2
        HAVING sum(c.sign) <> 0 OR sum(c.sign * c.sensitive::int) <> 0;
    END IF;
    RETURN NULL;
END
$fn$;

CREATE TRIGGER knowledge_text_delta_insert AFTER INSERT ON memory_knowledge
    REFERENCING NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION memory_knowledge_text_delta();
CREATE TRIGGER knowledge_text_delta_update AFTER UPDATE ON memory_knowledge
    REFERENCING OLD TABLE AS old_rows NEW TABLE AS new_rows
    FOR EACH STATEMENT EXECUTE FUNCTION memory_knowledge_text_delta();
CREATE TRIGGER knowledge_text_delta_delete AFTER DELETE ON memory_knowledge
    REFERENCING OLD TABLE AS old_rows
    FOR EACH STATEMENT EXECUTE FUNCTION memory_knowledge_text_delta();

-- TRUNCATE fires no DELETE trigger: it empties every workspace, so the counts go too.
CREATE OR REPLACE FUNCTION memory_knowledge_text_truncate() RETURNS trigger
LANGUAGE plpgsql AS $fn$
BEGIN
    DELETE FROM memory_textstatdelta;
    DELETE FROM memory_textstat;
    RETURN NULL;
END
$fn$;
CREATE TRIGGER knowledge_text_truncate AFTER TRUNCATE ON memory_knowledge
    FOR EACH STATEMENT EXECUTE FUNCTION memory_knowledge_text_truncate();
"""

DROP_TRIGGERS = """
DROP TRIGGER IF EXISTS knowledge_text_delta_insert ON memory_knowledge;
DROP TRIGGER IF EXISTS knowledge_text_delta_update ON memory_knowledge;
DROP TRIGGER IF EXISTS knowledge_text_delta_delete ON memory_knowledge;
DROP TRIGGER IF EXISTS knowledge_text_truncate ON memory_knowledge;
DROP FUNCTION IF EXISTS memory_knowledge_text_delta();
DROP FUNCTION IF EXISTS memory_knowledge_text_truncate();
"""

# The rows stored before the triggers existed, counted once (the same rule).
BACKFILL = """
INSERT INTO memory_textstat (workspace_id, lexeme, n, n_sensitive)
SELECT k.workspace_id, l.lx, count(*), count(*) FILTER (WHERE k.sensitive)
FROM memory_knowledge k
CROSS JOIN LATERAL (
    SELECT '' UNION ALL SELECT unnest(tsvector_to_array(k.search_vector))
) l(lx)
WHERE k.status = 'active' AND k.superseded_by_id IS NULL
GROUP BY 1, 2;
"""


class Migration(migrations.Migration):
    dependencies = [("memory", "0006_delta_decision_seen")]

    operations = [
        migrations.CreateModel(
            name="TextStat",
            fields=[
                (
                    "id",
                    models.BigAutoField(
                        auto_created=True, primary_key=True, serialize=False, verbose_name="ID"
                    ),
                ),
                ("workspace_id", models.BigIntegerField()),
                ("lexeme", models.TextField(blank=True)),
                ("n", models.BigIntegerField(default=0)),
                ("n_sensitive", models.BigIntegerField(default=0)),
            ],
            options={
                "constraints": [
                    models.UniqueConstraint(
                        fields=("workspace_id", "lexeme"), name="textstat_ws_lexeme"
                    )
                ],
            },
        ),
        migrations.CreateModel(
            name="TextStatDelta",
            fields=[
                ("id", models.BigAutoField(primary_key=True, serialize=False)),
                ("workspace_id", models.BigIntegerField()),
                ("lexeme", models.TextField(blank=True)),
                ("n", models.BigIntegerField(default=0)),
                ("n_sensitive", models.BigIntegerField(default=0)),
            ],
            options={
                "indexes": [
                    models.Index(fields=["workspace_id", "lexeme"], name="textstatdelta_ws_lexeme")
                ],
            },
        ),
        migrations.RunSQL(TRIGGER_FUNCTION, DROP_TRIGGERS),
        migrations.RunSQL(BACKFILL, migrations.RunSQL.noop),
    ]
