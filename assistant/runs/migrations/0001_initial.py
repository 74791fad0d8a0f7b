"""The models Conversation, Message, Run and Step (from ``chat``) and Lease (from ``workers``) move here.

State only: their tables (``chat_conversation``, ``chat_message``, ``chat_run``, ``chat_step``,
``workers_lease``) and rows stay as they are, each model naming its table (``db_table``). The old
apps then drop the models from their state (``chat.0004``, ``workers.0002``) and the scheduled
tasks' executions point at ``runs.Run`` (``schedules.0002``). The content types follow the models,
so that permissions and admin history stay attached to them.
"""

import uuid

import django.db.models.deletion
from django.conf import settings
from django.db import migrations, models

MOVED = {"conversation": "chat", "run": "chat", "message": "chat", "step": "chat", "lease": "workers"}


def _move_content_types(apps, schema_editor, forward=True):
    ContentType = apps.get_model("contenttypes", "ContentType")
    db = schema_editor.connection.alias
    for model, old in MOVED.items():
        source, target = (old, "runs") if forward else ("runs", old)
        if ContentType.objects.using(db).filter(app_label=target, model=model).exists():
            continue  # already there (created by an earlier migrate): the old one stays, unused
        ContentType.objects.using(db).filter(app_label=source, model=model).update(app_label=target)


def move_content_types(apps, schema_editor):
    _move_content_types(apps, schema_editor, forward=True)


def restore_content_types(apps, schema_editor):
    _move_content_types(apps, schema_editor, forward=False)


class Migration(migrations.Migration):

    initial = True

    dependencies = [
        ("chat", "0003_conversation_deleted"),
        ("workers", "0001_initial"),
        ("orgs", "0004_api_keys"),
        ("contenttypes", "0002_remove_content_type_name"),
        migrations.swappable_dependency(settings.AUTH_USER_MODEL),
    ]

    operations = [
        migrations.SeparateDatabaseAndState(
            state_operations=[
                migrations.CreateModel(
                    name="Conversation",
                    fields=[
                        ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                        ("title", models.CharField(max_length=200)),
                        ("created", models.DateTimeField(auto_now_add=True)),
                        ("updated", models.DateTimeField(auto_now=True)),
                        ("deleted", models.DateTimeField(blank=True, null=True)),
                        ("organisation", models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name="conversations", to="orgs.organisation")),
                        ("user", models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name="conversations", to=settings.AUTH_USER_MODEL)),
                    ],
                    options={
                        "db_table": "chat_conversation",
                        "ordering": ["-updated"],
                    },
                ),
                migrations.CreateModel(
                    name="Run",
                    fields=[
                        ("id", models.UUIDField(default=uuid.uuid4, editable=False, primary_key=True, serialize=False)),
                        ("model", models.CharField(max_length=100)),
                        ("level", models.CharField(blank=True, max_length=20)),
                        ("resources", models.JSONField(default=list)),
                        ("category", models.CharField(blank=True, max_length=100)),
                        ("status", models.CharField(choices=[("running", "running"), ("ok", "ok"), ("stopped", "stopped"), ("error", "error")], default="running", max_length=10)),
                        ("stop_requested", models.BooleanField(default=False)),
                        ("answer", models.TextField(blank=True)),
                        ("error", models.TextField(blank=True)),
                        ("rounds", models.PositiveIntegerField(default=0)),
                        ("sources", models.JSONField(default=list)),
                        ("usage", models.JSONField(default=dict)),
                        ("cost_eur", models.FloatField(default=0.0)),
                        ("created", models.DateTimeField(auto_now_add=True)),
                        ("finished", models.DateTimeField(blank=True, null=True)),
                        ("api_key", models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name="runs", to="orgs.apikey")),
                        ("conversation", models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name="runs", to="runs.conversation")),
                        ("organisation", models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name="runs", to="orgs.organisation")),
                        ("user", models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name="runs", to=settings.AUTH_USER_MODEL)),
                    ],
                    options={
                        "db_table": "chat_run",
                        "ordering": ["created"],
                    },
                ),
                migrations.CreateModel(
                    name="Message",
                    fields=[
                        ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                        ("role", models.CharField(choices=[("user", "user"), ("assistant", "assistant")], max_length=10)),
                        ("content", models.TextField()),
                        ("created", models.DateTimeField(auto_now_add=True)),
                        ("conversation", models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name="messages", to="runs.conversation")),
                        ("run", models.ForeignKey(blank=True, null=True, on_delete=django.db.models.deletion.SET_NULL, related_name="messages", to="runs.run")),
                    ],
                    options={
                        "db_table": "chat_message",
                        "ordering": ["created", "pk"],
                    },
                ),
                migrations.CreateModel(
                    name="Step",
                    fields=[
                        ("id", models.BigAutoField(auto_created=True, primary_key=True, serialize=False, verbose_name="ID")),
                        ("seq", models.PositiveIntegerField()),
                        ("kind", models.CharField(max_length=30)),
                        ("agent_id", models.CharField(blank=True, max_length=40)),
                        ("data", models.JSONField()),
                        ("created", models.DateTimeField(auto_now_add=True)),
                        ("run", models.ForeignKey(on_delete=django.db.models.deletion.CASCADE, related_name="steps", to="runs.run")),
                    ],
                    options={
                        "db_table": "chat_step",
                        "ordering": ["seq"],
                        "constraints": [models.UniqueConstraint(fields=("run", "seq"), name="one_step_per_seq")],
                    },
                ),
                migrations.CreateModel(
                    name="Lease",
                    fields=[
                        ("run", models.OneToOneField(on_delete=django.db.models.deletion.CASCADE, primary_key=True, related_name="lease", serialize=False, to="runs.run")),
                        ("executor", models.CharField(help_text="host:pid of the process executing the run", max_length=200)),
                        ("claimed", models.DateTimeField(auto_now_add=True)),
                        ("heartbeat", models.DateTimeField(db_index=True)),
                    ],
                    options={
                        "db_table": "workers_lease",
                    },
                ),
            ],
            database_operations=[],
        ),
        migrations.RunPython(move_content_types, restore_content_types),
    ]
