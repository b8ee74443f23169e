"""Outcome's agent and workspace keep their foreign keys but lose their own indexes:
the unique (agent, outcome_id) and the (workspace, ...) indexes lead with them, and
every index costs every outcome's insert.

Only the indexes are dropped (Django's AlterField would also drop and re-add both
foreign keys, re-checking every outcome row under lock).
"""

import django.db.models.deletion
from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("memory", "0024_vectors_inline"),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            database_operations=[
                migrations.RunSQL(
                    'DROP INDEX IF EXISTS "memory_outcome_agent_id_6d241fa4"',
                    'CREATE INDEX IF NOT EXISTS "memory_outcome_agent_id_6d241fa4" '
                    'ON "memory_outcome" ("agent_id")',
                ),
                migrations.RunSQL(
                    'DROP INDEX IF EXISTS "memory_outcome_workspace_id_d5fa19c5"',
                    'CREATE INDEX IF NOT EXISTS "memory_outcome_workspace_id_d5fa19c5" '
                    'ON "memory_outcome" ("workspace_id")',
                ),
            ],
            state_operations=[
                migrations.AlterField(
                    model_name="outcome",
                    name="agent",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="outcomes",
                        to="memory.agent",
                    ),
                ),
                migrations.AlterField(
                    model_name="outcome",
                    name="workspace",
                    field=models.ForeignKey(
                        db_index=False,
                        on_delete=django.db.models.deletion.CASCADE,
                        related_name="outcomes",
                        to="memory.workspace",
                    ),
                ),
            ],
        ),
    ]
