from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies = [
        ("memory", "0004_memory_panel"),
    ]

    operations = [
        migrations.AddField(
            model_name="roommemory",
            name="backfill_beat_at",
            field=models.DateTimeField(blank=True, null=True),
        ),
        migrations.AlterField(
            model_name="roommemory",
            name="backfill",
            field=models.CharField(
                choices=[
                    ("idle", "Idle"),
                    ("queued", "Queued"),
                    ("running", "Running"),
                    ("cancelled", "Cancelled"),
                    ("done", "Done"),
                ],
                default="idle",
                max_length=10,
            ),
        ),
    ]
