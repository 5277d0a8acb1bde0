"""A run's search state moves into its node rows (search.state): each RunNode gets its
node's engine state, and Run.state keeps the rest (Search.header()). Also the run's
`parallel` and the node's evaluation hand-off (issued_at, result) of the fan-out."""

from django.db import migrations, models


def nodes_into_rows(apps, schema_editor):
    Run = apps.get_model("search", "Run")
    RunNode = apps.get_model("search", "RunNode")
    for run in Run.objects.all().iterator():
        tree = (run.state or {}).get("tree") or {}
        if "nodes" not in tree:
            continue
        for node in tree["nodes"]:
            RunNode.objects.filter(run=run, node_id=node["id"]).update(
                engine=node, visits=node["visits"], value_sum=node["value_sum"])
        run.state = {**run.state, "tree": {k: v for k, v in tree.items() if k != "nodes"}}
        run.save(update_fields=["state"])


def nodes_back(apps, schema_editor):
    Run = apps.get_model("search", "Run")
    RunNode = apps.get_model("search", "RunNode")
    for run in Run.objects.all().iterator():
        nodes = list(RunNode.objects.filter(run=run).order_by("node_id").values_list("engine", flat=True))
        run.state = {**run.state, "tree": {**run.state.get("tree", {}), "nodes": nodes}}
        run.save(update_fields=["state"])


class Migration(migrations.Migration):

    dependencies = [
        ('search', '0004_screen'),
    ]

    operations = [
        migrations.AddField(model_name='run', name='state_token',
                            field=models.CharField(blank=True, max_length=32)),
        migrations.AddField(model_name='run', name='parallel',
                            field=models.PositiveSmallIntegerField(default=1)),
        migrations.AddField(model_name='runnode', name='engine', field=models.JSONField(default=dict)),
        migrations.AddField(model_name='runnode', name='value_sum', field=models.FloatField(default=0.0)),
        migrations.AddField(model_name='runnode', name='issued_at',
                            field=models.DateTimeField(blank=True, null=True)),
        migrations.AddField(model_name='runnode', name='result',
                            field=models.JSONField(blank=True, null=True)),
        migrations.AddField(model_name='runnode', name='binary',
                            field=models.CharField(blank=True, max_length=64, null=True)),
        migrations.AddIndex(model_name='runnode',
                            index=models.Index(fields=['run', 'state'], name='run_node_state')),
        migrations.AddIndex(model_name='runnode',
                            index=models.Index(fields=['run', 'binary'], name='run_node_binary')),
        migrations.RunPython(nodes_into_rows, nodes_back),
    ]
