"""Create the pgvector extension, or stop with a message that says how to fix it.

The squashed history starts here: 0001-0003 replace the 38 migrations (14 of them
merges) written before, so a new install runs three and a database at
0025_outcome_fk_indexes_covered upgrades without a change.
"""

from django.db import migrations


def create_vector_extension(apps, schema_editor):
    from cairn.health import PGVECTOR_MISSING

    with schema_editor.connection.cursor() as cursor:
        cursor.execute("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'")
        if cursor.fetchone() is None:
            db = schema_editor.connection.settings_dict
            where = f"{db.get('HOST') or 'local socket'}:{db.get('PORT') or 5432}/{db.get('NAME')}"
            raise RuntimeError(PGVECTOR_MISSING.format(where=where))
        cursor.execute("CREATE EXTENSION IF NOT EXISTS vector")


class Migration(migrations.Migration):
    initial = True
    replaces = [
        ("memory", "0001_pgvector"),
    ]
    dependencies = []
    operations = [
        migrations.RunPython(create_vector_extension, migrations.RunPython.noop, atomic=True),
    ]
