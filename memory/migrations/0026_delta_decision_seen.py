from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("memory", "0025_outcome_fk_indexes_covered")]

    operations = [
        migrations.AddField(
            model_name="skilldelta",
            name="decision_seen",
            field=models.JSONField(blank=True, default=dict),
        ),
    ]
