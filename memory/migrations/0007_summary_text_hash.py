import hashlib

from django.db import migrations, models


def hash_texts(apps, schema_editor):
    """Store the hash of every summary's text; each is re-indexed only if it differs from the
    hash it was indexed with."""
    Summary = apps.get_model("memory", "Summary")
    batch = []
    for summary in Summary.objects.only("pk", "text").iterator(chunk_size=2000):
        summary.text_hash = hashlib.sha256(summary.text.encode()).hexdigest()
        batch.append(summary)
        if len(batch) >= 2000:
            Summary.objects.bulk_update(batch, ["text_hash"])
            batch = []
    Summary.objects.bulk_update(batch, ["text_hash"])


class Migration(migrations.Migration):
    dependencies = [
        ("memory", "0006_tuning_quotes"),
    ]

    operations = [
        migrations.AddField(
            model_name="summary",
            name="text_hash",
            field=models.CharField(blank=True, max_length=64),
        ),
        migrations.RunPython(hash_texts, migrations.RunPython.noop),
    ]
