"""Keep embeddings in the row instead of the TOAST table.

pgvector stores a ``vector`` with EXTERNAL storage: a 384-dimension vector is
1.5 kB, so with its text and tsvector a knowledge row passes the 2 kB TOAST
threshold and the vector moves out of line. Every exact distance (the dedup
check of a batch, the exact fallback of a search, the cosine of a text-only
candidate in turn search) then reads it through the TOAST index: a batch of 100
items checking 2,300 stored ones took 1,024 ms, 67 ms with the vectors inline
(EXPLAIN ANALYZE of that statement on the same rows). PLAIN keeps them in the row; the other columns still
TOAST when a row grows large. The UPDATEs rewrite the vectors already stored
(an unchanged value would keep its TOAST pointer), once: 2,300 rows took 0.95 s
here, index upkeep included.
"""

from django.db import migrations

COLUMNS = [
    ("memory_knowledge", "embedding"),
    ("memory_conversationturn", "embedding"),
    ("memory_skilldelta", "trigger_embedding"),
    ("memory_skilldelta", "payload_embedding"),
]


def _forward() -> list[str]:
    sql = [f"ALTER TABLE {t} ALTER COLUMN {c} SET STORAGE PLAIN" for t, c in COLUMNS]
    sql += [f"UPDATE {t} SET {c} = {c}::text::vector WHERE {c} IS NOT NULL" for t, c in COLUMNS]
    return sql


class Migration(migrations.Migration):
    dependencies = [("memory", "0023_merge_20261201_2006")]

    operations = [
        migrations.RunSQL(
            _forward(),
            reverse_sql=[
                f"ALTER TABLE {t} ALTER COLUMN {c} SET STORAGE EXTERNAL" for t, c in COLUMNS
            ],
        )
    ]
