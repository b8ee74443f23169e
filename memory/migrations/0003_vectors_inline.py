"""Keep embeddings in the row instead of the TOAST table (squashed from
0024_vectors_inline and 0025_outcome_fk_indexes_covered).

pgvector stores a ``vector`` with EXTERNAL storage: a 384-dimension vector is
1.5 kB, so with its text and tsvector a knowledge row passes the 2 kB TOAST
threshold and the vector moves out of line, and every exact distance reads it
through the TOAST index (a batch of 100 items checking 2,300 stored ones took
1,024 ms, 67 ms with the vectors inline). PLAIN keeps them in the row; the other
columns still TOAST when a row grows large.

Outcome's agent and workspace foreign keys have no index of their own (the
models say db_index=False: the unique (agent, outcome_id) and the (workspace, ...)
indexes lead with them, and every index costs every outcome's insert); the two
DROP INDEX IF EXISTS only matter to a database made before 0025, and do nothing
on a new one.
"""

from django.db import migrations

COLUMNS = [
    ("memory_knowledge", "embedding"),
    ("memory_conversationturn", "embedding"),
    ("memory_skilldelta", "trigger_embedding"),
    ("memory_skilldelta", "payload_embedding"),
]


class Migration(migrations.Migration):
    replaces = [
        ("memory", "0024_vectors_inline"),
        ("memory", "0025_outcome_fk_indexes_covered"),
    ]

    dependencies = [("memory", "0002_schema")]

    operations = [
        migrations.RunSQL(
            [f"ALTER TABLE {t} ALTER COLUMN {c} SET STORAGE PLAIN" for t, c in COLUMNS],
            reverse_sql=[
                f"ALTER TABLE {t} ALTER COLUMN {c} SET STORAGE EXTERNAL" for t, c in COLUMNS
            ],
        ),
        migrations.RunSQL(
            [
                'DROP INDEX IF EXISTS "memory_outcome_agent_id_6d241fa4"',
                'DROP INDEX IF EXISTS "memory_outcome_workspace_id_d5fa19c5"',
            ],
            reverse_sql=migrations.RunSQL.noop,
        ),
    ]
