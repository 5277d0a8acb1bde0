# Written by hand on 2026-12-07 (issue 35).
#
# An Evaluation is now stored once per (candidate, task, harness version, GPU, settings
# key, evaluator). Rows the gate answered get "gate"; every other row (a recording's
# verdicts, and failures, whose evaluator no row says) gets "legacy", which no evaluator
# has: they are kept for people to look at and never served to a lookup, so a failure
# stored under one recording stops answering for another.

from django.db import migrations, models
from django.db.models import Count

LEGACY_EVALUATOR = "legacy"


def evaluators_from_sources(apps, schema_editor):
    Evaluation = apps.get_model("profiling", "Evaluation")
    Evaluation.objects.filter(source="gate").update(evaluator="gate")


def refuse_if_keys_collide(apps, schema_editor):
    # Going back restores the old key, which cannot hold one kernel's evaluations by two
    # evaluators: say so, rather than fail on the constraint or pick one to throw away.
    Evaluation = apps.get_model("profiling", "Evaluation")
    shared = (Evaluation.objects.values("candidate", "task", "harness_version", "gpu", "settings_key")
              .annotate(rows=Count("pk")).filter(rows__gt=1).count())
    if shared:
        raise RuntimeError(f"{shared} kernels have evaluations by several evaluators; "
                           "delete the ones to drop before migrating profiling back past 0005")


class Migration(migrations.Migration):

    dependencies = [
        ('profiling', '0004_evaluation_lease'),
    ]

    operations = [
        migrations.RemoveConstraint(
            model_name='evaluation',
            name='evaluation_once_per_candidate_task_harness_gpu_settings',
        ),
        migrations.AddField(
            model_name='evaluation',
            name='evaluator',
            field=models.CharField(default=LEGACY_EVALUATOR, max_length=80),
            preserve_default=False,
        ),
        migrations.RunPython(evaluators_from_sources, refuse_if_keys_collide),
        migrations.AddConstraint(
            model_name='evaluation',
            constraint=models.UniqueConstraint(
                fields=('candidate', 'task', 'harness_version', 'gpu', 'settings_key', 'evaluator'),
                name='evaluation_once_per_kernel_harness_gpu_settings_evaluator'),
        ),
    ]
