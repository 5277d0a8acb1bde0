"""Pre-flight (issue 35): the New session form asks, before it creates a run, what the gate
would reject its kernel and launch plan for on the CPU (profiling/harness/preflight.py:
the plan at every size, every GPU's limits, the policy, nvcc, the kernels the plan names).
Nothing is stored and no run is made; a mistake costs a second, not a run that ends
"nothing passed". Where the server has no nvcc, the answer says so and the run may still
start (its compile is then the gate's)."""

from __future__ import annotations

import threading
from concurrent.futures import ThreadPoolExecutor
from concurrent.futures import TimeoutError as WaitedTooLong

from drf_spectacular.utils import extend_schema
from rest_framework import serializers
from rest_framework.exceptions import ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from optiml_web.limits import MAX_NAME_CHARS, plan_error, source_error
from optiml_web.params import TextField
from profiling.harness import preflight
from profiling.harness.candidate import Candidate, CandidateError
from profiling.harness.expr import ExpressionError
from profiling.harness.spec import Task
from search.apis import _candidate_field, _check_declared_task_visible, _task_spec
from search.throttles import RunPreflightThrottle

# How long a request waits for its pre-flight. nvcc takes about 0.5 s on an ordinary kernel
# (relu, softmax, sgemm on two cores, 2026-12-07), but the gate lets it run 60 s to
# preprocess and 120 s to compile, and Django runs sync views on one shared thread under
# ASGI: a template-heavy kernel would hold every other request of the process that long.
# Past this, the compile finishes on its own (a cached result serves the next check) and
# the answer says pre-flight could not compile in time.
PREFLIGHT_WAIT_S = 10.0
COMPILES_AT_ONCE = 2  # per web process; another pre-flight meanwhile is answered at once
_compiles = ThreadPoolExecutor(max_workers=COMPILES_AT_ONCE, thread_name_prefix="preflight")
_slots = threading.BoundedSemaphore(COMPILES_AT_ONCE)


def preflight_in_time(task: Task, candidate: Candidate) -> preflight.Preflight:
    """preflight.preflight, waited for at most PREFLIGHT_WAIT_S. Raises what it raises."""
    if not _slots.acquire(blocking=False):  # the plan's checks take no time: still made
        return preflight.preflight(task, candidate, skip_compile=f"this server is already compiling "
                                   f"{COMPILES_AT_ONCE} other pre-flights")
    try:
        running = _compiles.submit(preflight.preflight, task, candidate)
    except BaseException:
        _slots.release()
        raise
    running.add_done_callback(lambda _: _slots.release())
    try:
        return running.result(timeout=PREFLIGHT_WAIT_S)
    except WaitedTooLong:
        return preflight.Preflight(not_compiled=f"nvcc took longer than {PREFLIGHT_WAIT_S:g} s, "
                                   "so pre-flight stopped waiting")


class PreflightRequestSerializer(serializers.Serializer):
    task = TextField(max_length=MAX_NAME_CHARS, help_text="a task's name (GET /api/tasks/)")
    source = TextField(trim_whitespace=False, help_text="the kernel's CUDA source")
    plan = serializers.JSONField(help_text="its launch plan (an object)")

    def validate_source(self, value: str) -> str:
        if not value.strip():
            raise serializers.ValidationError("the kernel source is empty")
        too_large = source_error(value)
        if too_large:
            raise serializers.ValidationError(too_large)
        return value

    def validate_plan(self, value):
        if not isinstance(value, dict):
            raise serializers.ValidationError("the plan must be a JSON object")
        too_large = plan_error(value)
        if too_large:
            raise serializers.ValidationError(too_large)
        return value


class PreflightFindingSerializer(serializers.Serializer):
    field = serializers.ChoiceField(choices=["source", "plan"], help_text="the form field it is about")
    line = serializers.IntegerField(allow_null=True, help_text="the kernel's line, from 1 (compile errors)")
    message = serializers.CharField()


class PreflightSerializer(serializers.Serializer):
    ok = serializers.BooleanField(help_text="nothing found: a run may start")
    findings = PreflightFindingSerializer(many=True, help_text="what the gate would reject, in its words")
    not_compiled = serializers.CharField(
        allow_blank=True, help_text="why the kernel was not compiled (this server has no nvcc); the plan "
        "and policy were still checked, and a run may start: the gate then compiles it")


class RunPreflightApi(APIView):
    """Check a kernel and its launch plan as the gate would before a GPU, without creating a
    run: 200 with the findings (none: the run may start), 400 for a request that names no
    task you can see or a plan that is not one."""

    throttle_classes = [RunPreflightThrottle]  # nvcc costs the web process seconds

    @extend_schema(request=PreflightRequestSerializer, responses={200: PreflightSerializer})
    def post(self, request: Request) -> Response:
        form = PreflightRequestSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        data = form.validated_data
        _check_declared_task_visible(request, data["task"])
        spec = _task_spec(request, data["task"])
        try:
            candidate = Candidate.from_source_and_plan(data["source"], data["plan"])
            result = preflight_in_time(spec, candidate)
        except CandidateError as error:
            raise ValidationError({_candidate_field(error): [str(error)]}) from None
        except ExpressionError as error:
            raise ValidationError({"plan": [f"launch plan: {error}"]}) from None
        return Response(PreflightSerializer({
            "ok": result.ok, "not_compiled": result.not_compiled,
            "findings": [{"field": f.field, "line": f.line, "message": f.message} for f in result.findings],
        }).data)
