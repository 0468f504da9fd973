from django.db import migrations


def reindex_scenes(apps, schema_editor):
    """The `turns` index now holds each message's passages, not the whole message: every scene
    is embedded again at its room's next catch-up (which also drops its whole-message vectors)."""
    apps.get_model("memory", "Scene").objects.update(indexed_hash="")


class Migration(migrations.Migration):
    dependencies = [
        ("memory", "0007_summary_text_hash"),
    ]

    operations = [
        migrations.RunPython(reindex_scenes, migrations.RunPython.noop),
    ]
