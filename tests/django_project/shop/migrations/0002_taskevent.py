from typing import ClassVar

from django.db import migrations, models


class Migration(migrations.Migration):
    dependencies: ClassVar[list[tuple[str, str]]] = [("shop", "0001_initial")]
    operations: ClassVar[list[migrations.operations.base.Operation]] = [
        migrations.CreateModel(
            name="TaskEvent",
            fields=[
                ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False)),
                ("result_id", models.CharField(max_length=64)),
                ("signal", models.CharField(max_length=20)),
                ("backend", models.CharField(max_length=64)),
                ("status", models.CharField(max_length=20)),
                ("attempts", models.IntegerField()),
                ("errors", models.JSONField(default=list)),
                ("return_value", models.JSONField(null=True)),
            ],
        ),
    ]
