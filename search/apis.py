"""The run API: thin views over search.services (writes) and search.selectors (reads).

A run another user may not see answers 404, exactly like a run that does not exist.
Share-link views (/api/shared/<token>/...) need no login and only read. Query parameters
are read through optiml_web.params (a bad one is a 400 naming it), bodies are limited by
optiml_web.limits, and the error answers are documented by optiml_web.schema.
"""

from __future__ import annotations

from django.conf import settings
from django.http import FileResponse, Http404
from django.urls import reverse
from drf_spectacular.types import OpenApiTypes
from drf_spectacular.utils import OpenApiParameter, OpenApiResponse, extend_schema
from rest_framework import permissions, status
from rest_framework.exceptions import PermissionDenied, ValidationError
from rest_framework.request import Request
from rest_framework.response import Response
from rest_framework.views import APIView

from accounts.apis import team_of_request
from optiml_web import params
from optiml_web.limits import MAX_NAME_CHARS
from optiml_web.schema import ErrorSerializer
from profiling import selectors as gate_selectors
from profiling import services as gate_services
from profiling.harness import declared
from profiling.harness import tasks as task_registry
from profiling.harness.candidate import CandidateError
from profiling.harness.expr import ExpressionError
from search import control_services, inspector, selectors, services, sharing_services, writing_jobs
from search.importing import TrajectoryError, parse_trajectory
from search.models import Run
from search.serializers import (
    EventSerializer,
    KernelWriteSerializer,
    NodeDetailSerializer,
    NodeRowSerializer,
    RunCreatedSerializer,
    RunCreateSerializer,
    RunDetailSerializer,
    RunSerializer,
    ShareCreatedSerializer,
    SharedRunSerializer,
    ShareSerializer,
    SourceSerializer,
    WritingJobSerializer,
)
from search.throttles import RunCreateThrottle, RunImportThrottle, import_slots

AFTER = OpenApiParameter("after", int, description="the last seq the client has (default 0)")
TEAM = OpenApiParameter("team", int, description="a team id")


def _visible_run(request: Request, run_id: int) -> Run:
    run = selectors.run_visible(user=request.user, run_id=run_id)
    if run is None:
        raise Http404("no such run")
    return run


def _controlled_run(request: Request, run_id: int) -> Run:
    run = _visible_run(request, run_id)
    if not selectors.run_controllable_by(run=run, user=request.user):
        raise PermissionDenied("only the run's creator or an admin of its team may do this")
    return run


def _shareable_run(request: Request, run_id: int) -> Run:
    run = _visible_run(request, run_id)
    if not selectors.run_shareable_by(run=run, user=request.user):
        raise PermissionDenied("only the run's creator or an admin of its team may share it")
    return run


def _shared_run(token: str) -> Run:
    run = selectors.run_for_share_token(token=token)
    if run is None:
        raise Http404("no such link, or it was revoked")
    return run


def _after(request: Request) -> int:
    return params.query_int(request.query_params, "after", default=0)


def _node(run: Run, node_id: int):
    node = selectors.run_node(run=run, node_id=node_id)
    if node is None:
        raise Http404("no such node in this run")
    return node


def _events(run: Run, after: int) -> list[dict]:
    return [{"seq": e.seq, "kind": e.kind, "data": e.data}
            for e in selectors.run_events_after(run=run, seq=after)]


def _report(run: Run, node) -> FileResponse:
    path = inspector.ncu_report_path(run=run, node=node)
    if path is None:
        raise Http404("this node has no Nsight Compute report here")
    return FileResponse(path.open("rb"), as_attachment=True, filename=path.name,
                        content_type="application/octet-stream")


class SourceListApi(APIView):
    @extend_schema(responses=SourceSerializer(many=True))
    def get(self, request: Request) -> Response:
        """Proposal sources a new run may use besides its judge (as configured), each with
        what a person should know before choosing it (the skills source: its cards)."""
        return Response([{"name": source.name, "note": source.note() if hasattr(source, "note") else ""}
                         for source in services.configured_sources()])


class RunListApi(APIView):
    throttle_classes = [RunCreateThrottle]  # POST only: reading the list is not limited

    @extend_schema(responses=RunSerializer(many=True), parameters=[
        OpenApiParameter("task", str), OpenApiParameter("status", str, enum=Run.Status.values),
        OpenApiParameter("mine", bool, description="true (or 1): only runs I made"), TEAM])
    def get(self, request: Request) -> Response:
        query = request.query_params
        runs = selectors.run_list(user=request.user,
                                  task=params.query_text(query, "task", max_length=MAX_NAME_CHARS),
                                  status=params.query_choice(query, "status", Run.Status.values),
                                  mine=params.query_bool(query, "mine"), team=params.query_int(query, "team"))
        return Response(RunSerializer(runs, many=True).data)

    @extend_schema(request=RunCreateSerializer, responses={201: RunCreatedSerializer})
    def post(self, request: Request) -> Response:
        form = RunCreateSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        data = form.validated_data
        team = team_of_request(request, data.get("team"))
        notice = None
        _check_declared_task_visible(request, data["task"])
        job = None
        if data.get("writing_job") is not None:
            try:
                job = writing_jobs.writing_job_for_run(user=request.user, job_id=data["writing_job"],
                                                       task_name=data["task"])
            except services.RunError as error:
                raise ValidationError({"writing_job": [str(error)]}) from None
        if data.get("source") is None and job is not None:
            source, plan = job.written["source"], job.written["plan"]
        elif data.get("source") is None:
            spec = _task_spec(request, data["task"])
            if not spec.naive_source:
                raise ValidationError({"source": [
                    f"the task {spec.name} has no naive kernel to start from: paste your kernel "
                    "(and a launch plan: the task's starting plan is a template)"]})
            source, plan = spec.naive_source, spec.naive_plan
            notice = (f"no kernel given: the search starts from the {spec.name} task's naive kernel "
                      "(POST /api/kernels/write/, the page's 'Write the kernel from the intent', "
                      "has the configured LLM draft one to review first)")
        else:
            source, plan = data["source"], data["plan"]
        try:
            run = services.run_launch(
                task_name=data["task"], source=source, plan=plan, budget=data["budget"],
                judge=data["judge"], seed=data["seed"], user=request.user, team=team,
                intent=data.get("intent", "") or (job.intent if job else ""),
                source_names=data.get("sources"), screen=data["screen"], parallel=data["parallel"],
                writing_job=job, evaluator=data["evaluator"])
        except task_registry.UnknownTask:
            raise _unknown_task(request, data["task"]) from None
        except CandidateError as error:
            raise ValidationError({_candidate_field(error): [str(error)]}) from None
        except ExpressionError as error:  # a grid, block or argument expression that does not parse
            raise ValidationError({"plan": [f"launch plan: {error}"]}) from None
        except services.RunError as error:
            raise ValidationError({error.field or "non_field_errors": [str(error)]}) from None
        context = {"request": request, "notice": notice}
        return Response(RunCreatedSerializer(run, context=context).data, status=status.HTTP_201_CREATED)


class KernelWriteApi(APIView):
    """Queue a first kernel written from an intent by OptiML-G's experts (search/generation/),
    or by the LLM judge's model when none are configured, checked up to nvcc and repaired
    with the compiler's messages, for the person to review in the editor before starting
    a run. Writing takes minutes, so it is a job (search/writing_jobs.py): this answers 202
    with the job at once, and its url says how it goes. What can be checked at once (the
    task, the intent, that somebody is configured to write) is a 400 here."""

    @extend_schema(request=KernelWriteSerializer, responses={202: OpenApiResponse(
        WritingJobSerializer, description="queued: read its url until it is done or failed")})
    def post(self, request: Request) -> Response:
        form = KernelWriteSerializer(data=request.data)
        form.is_valid(raise_exception=True)
        data = form.validated_data
        _check_declared_task_visible(request, data["task"])
        try:
            job = writing_jobs.writing_job_create(task_name=data["task"], intent=data["intent"],
                                                  user=request.user)
        except task_registry.UnknownTask:
            raise _unknown_task(request, data["task"]) from None
        except services.RunError as error:
            raise ValidationError({error.field or "non_field_errors": [str(error)]}) from None
        return Response(_writing_job(job), status=status.HTTP_202_ACCEPTED)


class KernelWriteJobApi(APIView):
    """A writing job of yours: its status, the attempts so far (who wrote, who contributed,
    where each stopped) and, once done, the kernel and plan; failed, the reason. Anybody
    else's answers 404."""

    @extend_schema(responses=WritingJobSerializer)
    def get(self, request: Request, job_id: int) -> Response:
        job = writing_jobs.writing_job_visible(user=request.user, job_id=job_id)
        if job is None:
            raise Http404("no such writing job")
        if writing_jobs.writing_jobs_expire(stale_after_s=settings.OPTIML_WRITING_STALE_S, job_id=job.pk):
            job.refresh_from_db()  # its worker died, and the beat has not said so yet
        return Response(_writing_job(job))


def _writing_job(job) -> dict:
    attempts = [{"round": a.round, "writer": a.writer, "experts": a.experts, "stage": a.stage,
                 "passed": a.passed, "message": a.message[:2000]}
                for a in writing_jobs.writing_job_attempts(job=job)]
    return WritingJobSerializer({
        "id": job.pk, "url": reverse("api-kernel-write-job", args=[job.pk]), "task": job.task,
        "intent": job.intent, "status": job.status, "message": job.message,
        "stale_after_s": settings.OPTIML_WRITING_STALE_S, "attempts": attempts, "written": job.written,
        "created": job.created, "updated": job.updated}).data


def _task_spec(request: Request, name: str):
    try:
        return gate_services.task_spec(name=name)
    except task_registry.UnknownTask:
        raise _unknown_task(request, name) from None


def _unknown_task(request: Request, name: str) -> ValidationError:
    # The registry's own message names every task, other people's declared ones included.
    known = [spec.name for spec in gate_selectors.task_specs_visible_to(user=request.user)]
    return ValidationError({"task": [f"unknown task {name!r}; known tasks: {', '.join(known)}"]})


def _check_declared_task_visible(request: Request, name: str) -> None:
    # Somebody else's declared task answers like one that does not exist.
    if not declared.is_declared_name(name):
        return
    if gate_selectors.declared_task_visible(user=request.user, name=name) is None:
        raise ValidationError({"task": [f"unknown task {name!r}: not declared by you or your teams"]})


def _candidate_field(error: CandidateError) -> str:
    # The harness names the field in its message; only the source's own check is about the
    # source, everything else is about the launch plan.
    return "source" if "'source'" in str(error) and "plan" not in str(error) else "plan"




class RunCompareApi(APIView):
    """Two runs you may see, side by side: ?a=<run id>&b=<run id>."""

    @extend_schema(parameters=[OpenApiParameter("a", int, required=True),
                               OpenApiParameter("b", int, required=True)],
                   responses={200: OpenApiTypes.OBJECT, 404: ErrorSerializer})
    def get(self, request: Request) -> Response:
        ids = [params.query_int(request.query_params, name) for name in ("a", "b")]
        for name, value in zip(("a", "b"), ids, strict=True):
            if value is None:
                raise ValidationError({name: ["give the id of a run to compare"]})
        a, b = (_visible_run(request, run_id) for run_id in ids)
        return Response(selectors.run_comparison(a=a, b=b))


class RunDetailApi(APIView):
    @extend_schema(responses=RunDetailSerializer)
    def get(self, request: Request, run_id: int) -> Response:
        run = _visible_run(request, run_id)
        return Response(RunDetailSerializer(run, context={"request": request}).data)


class RunNodesApi(APIView):
    @extend_schema(responses=NodeRowSerializer(many=True))
    def get(self, request: Request, run_id: int) -> Response:
        run = _visible_run(request, run_id)
        return Response([inspector.node_row(node) for node in selectors.run_nodes(run=run)])


class RunNodeApi(APIView):
    @extend_schema(responses=NodeDetailSerializer)
    def get(self, request: Request, run_id: int, node_id: int) -> Response:
        run = _visible_run(request, run_id)
        node = _node(run, node_id)
        url = reverse("api-run-node", args=[run.pk, node.node_id])
        return Response(inspector.node_detail(run=run, node=node, url=url))


class RunNodeReportApi(APIView):
    @extend_schema(responses={(200, "application/octet-stream"): OpenApiTypes.BINARY})
    def get(self, request: Request, run_id: int, node_id: int) -> FileResponse:
        run = _visible_run(request, run_id)
        return _report(run, _node(run, node_id))


class RunControlApi(APIView):
    """POST /pause/, /resume/ or /stop/ (the URL names the action)."""

    control: str = ""  # set by the URL: pause, resume or stop

    @extend_schema(request=None, responses={200: RunDetailSerializer, 409: ErrorSerializer})
    def post(self, request: Request, run_id: int) -> Response:
        run = _controlled_run(request, run_id)
        try:
            run = control_services.run_control(run_id=run.pk, action=self.control, user=request.user)
        except services.RunError as error:
            return Response({"detail": str(error)}, status=status.HTTP_409_CONFLICT)
        run = selectors.run_visible(user=request.user, run_id=run.pk)
        return Response(RunDetailSerializer(run, context={"request": request}).data)


class RunEventsApi(APIView):
    @extend_schema(responses=EventSerializer(many=True), parameters=[AFTER])
    def get(self, request: Request, run_id: int) -> Response:
        return Response(_events(_visible_run(request, run_id), _after(request)))


class RunSharesApi(APIView):
    @extend_schema(responses={200: ShareSerializer(many=True), 403: ErrorSerializer})
    def get(self, request: Request, run_id: int) -> Response:
        run = _shareable_run(request, run_id)
        return Response(ShareSerializer(selectors.share_list(run=run), many=True).data)

    @extend_schema(request=None, responses={201: ShareCreatedSerializer})
    def post(self, request: Request, run_id: int) -> Response:
        run = _shareable_run(request, run_id)
        link, token = sharing_services.share_create(run=run, user=request.user)
        return Response({"id": link.pk, "token": token, "url": f"/share/{token}/"},
                        status=status.HTTP_201_CREATED)


class RunShareApi(APIView):
    @extend_schema(responses={204: None})
    def delete(self, request: Request, run_id: int, share_id: int) -> Response:
        run = _shareable_run(request, run_id)
        if not sharing_services.share_revoke(run=run, share_id=share_id):
            raise Http404("no such open link for this run")
        return Response(status=status.HTTP_204_NO_CONTENT)


class RunExportApi(APIView):
    @extend_schema(responses=OpenApiTypes.OBJECT)
    def get(self, request: Request, run_id: int) -> Response:
        run = _visible_run(request, run_id)
        filename = f"optiml-run-{run.pk}-{run.task.name}.json"
        return Response(selectors.run_trajectory(run=run),
                        headers={"Content-Disposition": f'attachment; filename="{filename}"'})


class RunImportApi(APIView):
    throttle_classes = [RunImportThrottle]

    @property
    def max_body_bytes(self) -> int:
        # The one endpoint whose body may be larger than DATA_UPLOAD_MAX_MEMORY_SIZE.
        return settings.OPTIML_MAX_IMPORT_BYTES

    @extend_schema(request=OpenApiTypes.OBJECT, responses={
        201: RunDetailSerializer,
        503: OpenApiResponse(ErrorSerializer, description="the server is reading as many imports as it "
                             "reads at once; try again after Retry-After seconds")},
        parameters=[OpenApiParameter("team", int, description="share the import with a team")])
    def post(self, request: Request) -> Response:
        team = team_of_request(request, params.query_int(request.query_params, "team"))
        # Only tasks this user may use: another team's private task is "unknown".
        usable = selectors.task_names_usable_by(user=request.user)
        # The body is first read (request.data) inside the slot, and checked and written there.
        with import_slots.held(at_once=settings.OPTIML_IMPORTS_AT_ONCE, wait_s=settings.OPTIML_IMPORT_WAIT_S):
            try:
                trajectory = parse_trajectory(request.data, tasks=usable)
            except TrajectoryError as error:
                raise ValidationError({error.field: [error.message]}) from None
            run = sharing_services.run_import(trajectory=trajectory, user=request.user, team=team)
        run = selectors.run_visible(user=request.user, run_id=run.pk)
        return Response(RunDetailSerializer(run, context={"request": request}).data,
                        status=status.HTTP_201_CREATED)


# -- read-only, by share link -----------------------------------------------------------


class SharedApi(APIView):
    authentication_classes: list = []  # no session, no CSRF: the token is the key
    permission_classes = [permissions.AllowAny]


class SharedRunApi(SharedApi):
    @extend_schema(responses=SharedRunSerializer)
    def get(self, request: Request, token: str) -> Response:
        run = _shared_run(token)
        return Response({"run": RunDetailSerializer(run, context={"request": request}).data,
                         "nodes": [inspector.node_row(node) for node in selectors.run_nodes(run=run)]})


class SharedNodeApi(SharedApi):
    @extend_schema(responses=NodeDetailSerializer)
    def get(self, request: Request, token: str, node_id: int) -> Response:
        run = _shared_run(token)
        node = _node(run, node_id)
        url = reverse("api-shared-node", args=[token, node.node_id])
        return Response(inspector.node_detail(run=run, node=node, url=url))


class SharedNodeReportApi(SharedApi):
    @extend_schema(responses={(200, "application/octet-stream"): OpenApiTypes.BINARY})
    def get(self, request: Request, token: str, node_id: int) -> FileResponse:
        run = _shared_run(token)
        return _report(run, _node(run, node_id))


class SharedEventsApi(SharedApi):
    @extend_schema(responses=EventSerializer(many=True), parameters=[AFTER])
    def get(self, request: Request, token: str) -> Response:
        return Response(_events(_shared_run(token), _after(request)))
