"""Shapes of the task API: the tasks a new session may use, and declaring a task.

The input serializer checks JSON types and the definition's size (before the harness runs
its reference, let alone anything is stored); the harness (profiling.harness.declared)
checks meaning, and its DefinitionError is mapped to the same {"field": ["message"]}.
"""

from __future__ import annotations

from drf_spectacular.utils import extend_schema_field
from rest_framework import serializers
from rest_framework.settings import api_settings

from accounts.fields import DisplayTextField
from optiml_web.limits import MAX_DECLARED_TASK_BYTES, json_bytes
from optiml_web.params import MAX_DB_INT, TextChoiceField, TextField, TextRegexField, WholeNumberField
from profiling.harness import declared
from profiling.harness.spec import DISTRIBUTIONS
from profiling.models import DeclaredTask

FORMULA = "a whole number or an expression over the sizes, e.g. \"M * N\" or \"cdiv(n, 2)\""


class TaskSerializer(serializers.Serializer):
    name = serializers.CharField()
    description = serializers.CharField()
    sizes = serializers.DictField(child=serializers.IntegerField())
    vendor_ms = serializers.FloatField(allow_null=True, help_text="the vendor library on the H200")
    naive_source = serializers.CharField(allow_blank=True, help_text="empty for a declared task")
    naive_plan = serializers.JSONField(help_text="for a declared task, a starting plan for your kernel")
    declared = serializers.BooleanField(help_text="defined in the browser (POST /api/tasks/declared/)")


class TensorListSerializer(serializers.ListSerializer):
    """A definition's inputs or outputs: their count bounded (which the schema shows as
    minItems and maxItems), and refused as the harness words it (Parser._tensors), a list
    of messages on the field, not DRF's "Ensure this field has at least 1 elements."."""

    def to_internal_value(self, data):
        if isinstance(data, list) and not self.min_length <= len(data) <= self.max_length:
            raise serializers.ValidationError(
                [f"{self.field_name}: a list of {self.min_length} to {self.max_length} tensors"])
        return super().to_internal_value(data)


@extend_schema_field({"type": "string", "pattern": declared.NAME_PATTERN, "maxLength": 32})
class TensorNameField(TextField):
    """A tensor's name, documented as the harness checks it (definition._identifier), which
    refuses anything else in its own words."""

    def __init__(self, **kwargs) -> None:
        super().__init__(max_length=32, **kwargs)


class TensorDefinitionSerializer(serializers.Serializer):
    class Meta:
        list_serializer_class = TensorListSerializer

    name = TensorNameField()
    dtype = TextChoiceField(choices=declared.DECLARED_DTYPES, default="float32")
    shape = serializers.ListField(child=TextField(max_length=400, help_text=FORMULA),
                                  min_length=1, max_length=declared.MAX_DIMS)
    range = serializers.ListField(child=TextField(max_length=400), required=False,
                                  min_length=2, max_length=2,
                                  help_text="int32 inputs only: values are drawn from lo to hi - 1")


class ToleranceSerializer(serializers.Serializer):
    atol = serializers.FloatField(min_value=0, required=False, help_text="default 1e-4 (float32), 0 (int32)")
    rtol = serializers.FloatField(min_value=0, required=False, help_text="default 1e-4 (float32), 0 (int32)")


@extend_schema_field({
    "type": "object", "minProperties": 1, "maxProperties": declared.MAX_SIZES,
    "propertyNames": {"pattern": declared.NAME_PATTERN},
    "additionalProperties": {"type": "integer", "minimum": 1, "maximum": declared.MAX_SIZE}})
class SizesField(serializers.DictField):
    """A task's full sizes, documented as the harness checks them (definition.Parser._sizes):
    1 to MAX_SIZES names, each an identifier, each size a whole number from 1 to MAX_SIZE."""

    def __init__(self, **kwargs) -> None:
        super().__init__(child=WholeNumberField(), **kwargs)


class DeclaredTaskCreateSerializer(serializers.Serializer):
    # The slug alone: the service names the task for its owner (definition.owned_name).
    name = TextRegexField(
        rf"^(?:{declared.NAME_PREFIX})?{declared.SLUG.pattern}$",
        max_length=len(declared.NAME_PREFIX) + 48, error_messages={"invalid": declared.SLUG_RULE},
        help_text="a slug; the task is called user-<slug>.<your user number>")
    description = DisplayTextField(required=False, allow_blank=True, max_length=declared.MAX_DESCRIPTION)
    sizes = SizesField(help_text="the full (timed) size")
    l0_sizes = serializers.ListField(child=serializers.DictField(child=WholeNumberField()),
                                     required=False, max_length=declared.MAX_L0,
                                     help_text="small sizes checked first; generated if left out")
    inputs = TensorDefinitionSerializer(many=True, min_length=1, max_length=declared.MAX_INPUTS)
    outputs = TensorDefinitionSerializer(many=True, min_length=1, max_length=declared.MAX_OUTPUTS)
    reference = serializers.DictField(child=TextField(max_length=1000),
                                      help_text="output name -> numpy expression, e.g. np.maximum(x, 0)")
    tolerances = serializers.DictField(child=ToleranceSerializer(), required=False,
                                       help_text="per dtype: |out - ref| <= atol + rtol |ref|")
    distributions = serializers.ListField(child=TextChoiceField(choices=DISTRIBUTIONS),
                                          required=False, min_length=1)
    flops = TextField(required=False, max_length=400, help_text=f"{FORMULA}; default 0")
    bytes = TextField(required=False, max_length=400,
                      help_text=f"{FORMULA}; default: inputs read once, outputs written once")
    team = WholeNumberField(required=False, allow_null=True, min_value=0, max_value=MAX_DB_INT,
                                    help_text="share with this team")

    def to_internal_value(self, data):
        size = json_bytes(data)
        if size > MAX_DECLARED_TASK_BYTES:
            raise serializers.ValidationError({api_settings.NON_FIELD_ERRORS_KEY: [
                f"the task definition is {size} bytes of JSON; at most {MAX_DECLARED_TASK_BYTES} are taken"]})
        return super().to_internal_value(data)

    def definition(self) -> dict:
        """The validated data as the harness reads it (without the team)."""
        data = dict(self.validated_data)
        data.pop("team", None)
        data["inputs"] = [dict(item) for item in data["inputs"]]
        data["outputs"] = [dict(item) for item in data["outputs"]]
        if "tolerances" in data:
            data["tolerances"] = {k: dict(v) for k, v in data["tolerances"].items()}
        return data


class DeclaredTaskSerializer(serializers.ModelSerializer):
    owner = serializers.SerializerMethodField()
    description = serializers.SerializerMethodField()
    starting_plan = serializers.SerializerMethodField(help_text="a launch plan to start your kernel from")

    class Meta:
        model = DeclaredTask
        fields = ["name", "description", "definition", "owner", "team", "created", "starting_plan"]
        read_only_fields = fields

    def get_owner(self, task: DeclaredTask) -> str | None:
        return task.owner.username if task.owner else None

    def get_description(self, task: DeclaredTask) -> str:
        return task.definition.get("description", "")

    @extend_schema_field(serializers.JSONField())
    def get_starting_plan(self, task: DeclaredTask) -> dict:
        return declared.task_from_definition(task.definition).naive_plan
