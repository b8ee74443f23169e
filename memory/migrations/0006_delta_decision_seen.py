from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [("memory", "0005_delta_proposals")]

    operations = [
        migrations.AddField(
            model_name="skilldelta",
            name="decision_seen",
            field=models.JSONField(blank=True, default=dict),
        ),
    ]
