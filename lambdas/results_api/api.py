"""The read API: Powertools' ``APIGatewayHttpResolver`` (routing, parameter validation, the OpenAPI document)
over :class:`results_api.reader.ResultsReader`.

Routes (API Gateway HTTP API, payload format 2.0, IAM authorization on every route: the stack's ``ReadApi``):

- ``GET /jobs``: every job with schedule, live lease (held or free), pause, last success, latest slot and freshness
  (as ``latest`` says it; the slot items it reads: ``results_api.freshness.jobs_freshness``);
- ``GET /jobs/{job}/results/latest``: the newest committed result and its freshness (``results_api.freshness``):
  **one** DynamoDB ``BatchGetItem`` across the results and the lock table;
- ``GET /jobs/{job}/results/{slot}[?generation=N]``: one slot's result (default: its newest committed generation);
- ``GET /jobs/{job}/slots?from=&to=&status=&limit=&next_token=``: the history, every generation, newest first,
  one ``Query`` per page (a ``status`` filter may give short pages: DynamoDB applies ``Limit`` before it);
- ``GET /openapi.json``: this API's OpenAPI document (committed as ``docs/openapi.json``).

HTTP semantics (:mod:`results_api.responses`): JSON or CSV by ``Accept``; ``ETag`` from (job, slot, generation,
fencing token) and ``304`` on ``If-None-Match``; ``Cache-Control: no-cache`` on what a commit can change (an
operator's run commits a new generation at any time: every reuse is revalidated), ``immutable`` with
``?generation``; offloaded rows asked as JSON answered ``302`` to a presigned S3 URL (``no-store``) whose object is
the rows as a JSON array (the metadata rides on ``X-*`` headers), asked as CSV read from S3 and answered as CSV
(406 beyond :data:`MAX_CSV_BODY_BYTES`); errors as RFC 9457 problems: 400 naming the parameter, 404 naming the
job or slot, 406, 503 for DynamoDB/S3 failures. Bad input is never a 500.
"""

from __future__ import annotations

import json
from typing import Annotated, Any

from aws_lambda_powertools.event_handler import APIGatewayHttpResolver, Response
from aws_lambda_powertools.event_handler.openapi.exceptions import RequestValidationError
from aws_lambda_powertools.event_handler.openapi.models import APIKey, APIKeyIn
from aws_lambda_powertools.event_handler.openapi.params import Query

from athena_refresh.stored import StoredResult
from slotlock.history import MAX_PAGE_LIMIT, STATUSES

from . import models
from .errors import BadParameterError, NotAcceptableError, ResultsApiError
from .freshness import freshness_headers, freshness_tag, latest_with_freshness
from .reader import DEFAULT_PAGE_LIMIT, ResultsReader
from .responses import (
    CSV,
    CSV_CONTENT_TYPE,
    IMMUTABLE,
    JSON,
    NO_CACHE,
    NO_STORE,
    PROBLEM_JSON,
    if_none_match,
    negotiate,
    problem,
    result_document,
    result_etag,
    result_headers,
    to_csv,
)
from .views import JOB_COLUMNS

TITLE = "Scheduled Athena refresh: read API"
API_VERSION = "1"
DESCRIPTION = (
    "Each job's committed results and slot history. Every route requires IAM (AWS Signature Version 4, service"
    " `execute-api`). JSON by default, CSV with `Accept: text/csv`."
)
SIGV4 = "sigv4"
MAX_SLOT_TEXT = 64
#: The largest CSV body answered: a Lambda function's response payload is at most 6 MB (6,291,456 bytes) for a
#: synchronous invocation, https://docs.aws.amazon.com/lambda/latest/dg/gettingstarted-limits.html; the rest is
#: left to the headers and API Gateway's envelope.
MAX_CSV_BODY_BYTES = 6_000_000
SLOT_COLUMNS = tuple(models.SlotEntry.model_fields)
_PROBLEMS: dict[int, Any] = {
    status: {"description": text, "content": {PROBLEM_JSON: {"model": models.Problem}}}
    for status, text in (
        (400, "a parameter is malformed (named in `parameter`)"),
        (404, "unknown job, or no committed result for the slot"),
        (406, "the Accept header allows neither JSON nor CSV"),
        (503, "DynamoDB or S3 failed; retry later"),
    )
}
_CSV_CONTENT: dict[str, Any] = {CSV: {"schema": {"type": "string", "description": "RFC 4180, header row first"}}}
_RESULT_RESPONSES: dict[int, Any] = {
    200: {
        "description": (
            "the result (ETag; Cache-Control: no-cache, revalidate with If-None-Match, since an operator's run can"
            " commit a new generation at any time; immutable when `generation` is given)"
        ),
        "content": {JSON: {"model": models.Result}, **_CSV_CONTENT},
    },
    302: {
        "description": "JSON asked, rows offloaded to S3: Location is a presigned URL (60 s) of the rows as a JSON"
        " array (a CSV request is answered 200 with the CSV, read from S3 here)"
    },
    304: {"description": "If-None-Match matched the ETag"},
    **_PROBLEMS,
}


def create_app(reader: ResultsReader) -> APIGatewayHttpResolver:
    """The resolver serving ``reader``; ``app.resolve(event, context)`` answers one payload-2.0 event."""
    app = APIGatewayHttpResolver(enable_validation=True)

    def header(name: str) -> str | None:
        """A request header (``name`` in lower case, as payload 2.0 delivers header names), read from the raw event:
        Powertools' ``headers`` property rebuilds a case-insensitive copy on every access."""
        headers = app.current_event.raw_event.get("headers") or {}
        value = headers.get(name)
        if value is None:  # an event built by hand may keep the client's capitalisation
            value = next((v for k, v in headers.items() if isinstance(k, str) and k.lower() == name), None)
        return value if isinstance(value, str) else None

    def accept() -> str:
        return negotiate(header("accept"))

    def json_response(status: int, body: Any, *, cache: str, content_type: str = JSON) -> Response[Any]:
        return Response(
            status_code=status,
            content_type=content_type,
            body=json.dumps(body, separators=(",", ":"), allow_nan=False),
            headers={"Cache-Control": cache, "Vary": "Accept"},
        )

    def serve_result(
        stored: StoredResult, media: str, *, cache: str, freshness: dict[str, Any] | None = None
    ) -> Response[Any]:
        tag = "" if freshness is None else freshness_tag(freshness)
        etag = result_etag(stored, "redirect" if stored.offloaded and media != CSV else media, tag)
        fresh = {} if freshness is None else freshness_headers(freshness)
        headers = {"ETag": etag, "Vary": "Accept", **result_headers(stored), **fresh}
        if if_none_match(header("if-none-match"), etag):
            return Response(status_code=304, body="", headers={**headers, "Cache-Control": cache})
        if stored.offloaded and media != CSV:
            location = reader.presigned_rows_url(stored)
            return Response(
                status_code=302, body="", headers={**headers, "Location": location, "Cache-Control": NO_STORE}
            )
        if media == CSV:  # offloaded rows too: the S3 object is JSON, so they are read and answered as CSV here
            rows = reader.rows(stored) if stored.offloaded else stored.rows or []
            body = to_csv([column["name"] for column in stored.columns], rows)
            if len(body.encode()) > MAX_CSV_BODY_BYTES:
                raise NotAcceptableError(
                    f"the CSV of {stored.job_name} {stored.slot_iso} is {len(body.encode())} bytes, above the"
                    f" {MAX_CSV_BODY_BYTES} a response can carry (Lambda's 6 MB payload quota); ask for JSON"
                    " (Accept: application/json): its rows are served from S3"
                )
            content_type = CSV_CONTENT_TYPE
        else:
            rows = stored.rows or []
            body = json.dumps(result_document(stored, rows, freshness), separators=(",", ":"), allow_nan=False)
            content_type = JSON
        return Response(
            status_code=200, content_type=content_type, body=body, headers={**headers, "Cache-Control": cache}
        )

    @app.get(
        "/jobs",
        summary="Every job: schedule, lease, pause, last success, latest slot, freshness",
        responses={
            200: {"description": "the jobs", "content": {JSON: {"model": models.Jobs}, **_CSV_CONTENT}},
            **_PROBLEMS,
        },
        tags=["jobs"],
    )
    def list_jobs() -> Response[Any]:
        media = accept()
        summaries = reader.jobs()
        if media == CSV:
            body = to_csv(JOB_COLUMNS, [summary.csv_row() for summary in summaries])
            return Response(200, CSV_CONTENT_TYPE, body, {"Cache-Control": NO_CACHE, "Vary": "Accept"})
        return json_response(200, {"jobs": [summary.as_dict() for summary in summaries]}, cache=NO_CACHE)

    @app.get(
        "/jobs/<job>/results/latest",
        summary="The job's newest committed result and its freshness (one BatchGetItem)",
        responses=_RESULT_RESPONSES,
        tags=["results"],
    )
    def latest_result(job: str) -> Response[Any]:
        job, media = _path(job, "job"), accept()  # a 406 costs no read
        stored, freshness = latest_with_freshness(reader, job)  # one BatchGetItem: the result and its freshness
        # A manual generation may replace it at any time, and its freshness changes with the clock: revalidated.
        return serve_result(stored, media, cache=NO_CACHE, freshness=freshness)

    @app.get(
        "/jobs/<job>/results/<slot>",
        summary="One slot's result (default: its newest committed generation)",
        responses=_RESULT_RESPONSES,
        tags=["results"],
    )
    def slot_result(
        job: str,
        slot: str,
        generation: Annotated[
            int | None,
            Query(ge=1, le=1_000_000, description="the generation (1: the live run); default: the newest committed"),
        ] = None,
    ) -> Response[Any]:
        job, slot, media = _path(job, "job"), _path(slot, "slot"), accept()
        stored = reader.result(job, slot, generation)
        cache = IMMUTABLE if generation is not None else NO_CACHE  # the newest generation: may change any time
        return serve_result(stored, media, cache=cache)

    @app.get(
        "/jobs/<job>/slots",
        summary="The slot history, every generation, newest first (one Query per page)",
        description=(
            "A `status` filter is applied by DynamoDB after `limit` items are read, so a filtered page may hold"
            " fewer entries than `limit`, even none, while `next_token` says more may follow."
        ),
        responses={
            200: {"description": "one page", "content": {JSON: {"model": models.SlotsPage}, **_CSV_CONTENT}},
            **_PROBLEMS,
        },
        tags=["history"],
    )
    def list_slots(
        job: str,
        from_: Annotated[
            str | None, Query(alias="from", max_length=MAX_SLOT_TEXT, description="earliest slot, ISO 8601")
        ] = None,
        to: Annotated[str | None, Query(max_length=MAX_SLOT_TEXT, description="latest slot, ISO 8601")] = None,
        status: Annotated[str | None, Query(max_length=16, description=f"one of {', '.join(STATUSES)}")] = None,
        limit: Annotated[
            int, Query(ge=1, le=MAX_PAGE_LIMIT, description="history items read for this page")
        ] = DEFAULT_PAGE_LIMIT,
        next_token: Annotated[
            str | None, Query(max_length=512, description="the previous page's next_token, as given")
        ] = None,
    ) -> Response[Any]:
        job = _path(job, "job")
        media = accept()
        view = reader.history(job, since=from_, until=to, status=status, limit=limit, next_token=next_token)
        if media == CSV:
            headers = {"Cache-Control": NO_CACHE, "Vary": "Accept"}
            if view.next_token:
                headers["X-Next-Token"] = view.next_token
            return Response(200, CSV_CONTENT_TYPE, to_csv(SLOT_COLUMNS, view.entries), headers)
        body = {
            "job": job,
            "slots": view.entries,
            "next_token": view.next_token,
            "limit": view.limit,
            "filters": view.filters,
        }
        return json_response(200, body, cache=NO_CACHE)

    @app.get("/openapi.json", summary="This API's OpenAPI document", tags=["meta"], include_in_schema=False)
    def openapi() -> Response[Any]:
        return Response(200, JSON, openapi_json(app), {"Cache-Control": NO_CACHE})

    @app.exception_handler(ResultsApiError)  # type: ignore[untyped-decorator]  # Powertools' decorator is untyped
    def api_error(error: ResultsApiError) -> Response[Any]:
        return json_response(error.status, problem(error), cache=NO_STORE, content_type=PROBLEM_JSON)

    @app.exception_handler(RequestValidationError)  # type: ignore[untyped-decorator]
    def invalid_request(error: RequestValidationError) -> Response[Any]:
        first = error.errors()[0] if error.errors() else {}
        location = first.get("loc", ())
        parameter = str(location[-1]) if location else "request"
        parameter = "from" if parameter == "from_" else parameter
        response: Response[Any] = api_error(BadParameterError(parameter, str(first.get("msg", "is invalid"))))
        return response

    @app.not_found
    def no_route(_: Exception) -> Response[Any]:
        path = app.current_event.path
        response: Response[Any] = api_error(_unmatched(path))
        return response

    return app


class _NoRoute(ResultsApiError):
    status = 404
    code = "no_route"


def _path(value: str, parameter: str) -> str:
    """A path parameter as the route matched it, bounded. API Gateway HTTP APIs deliver ``rawPath`` already
    percent-decoded (REST APIs and function URLs do not), so it is not decoded again.

    :raises BadParameterError: longer than 1024 characters.
    """
    if len(value) > 1024:
        raise BadParameterError(parameter, f"is {len(value)} characters long")
    return value


def _unmatched(path: str) -> ResultsApiError:
    """Why no route matched ``path``: a job or slot segment with characters no route accepts (a NUL byte, a
    control character) is that parameter's fault (400); anything else is an unknown route (404)."""
    parts = path.strip("/").split("/")
    if parts[0] == "jobs" and len(parts) in (2, 3, 4):
        named = {1: "job", 3: "slot" if len(parts) == 4 and parts[2] == "results" else ""}
        for index, parameter in named.items():
            if parameter and index < len(parts) and not (parts[index].isascii() and parts[index].isprintable()):
                return BadParameterError(
                    parameter, f"{parts[index][:40]!r} contains characters outside printable ASCII"
                )
    return _NoRoute(f"no route GET {path[:120]!r}; see /openapi.json")


def openapi_json(app: APIGatewayHttpResolver) -> str:
    """The OpenAPI document of ``app`` (JSON text, stable key order): served at ``/openapi.json`` and committed as
    ``docs/openapi.json`` (a test keeps the two equal)."""
    document = app.get_openapi_schema(
        title=TITLE,
        version=API_VERSION,
        description=DESCRIPTION,
        security_schemes={
            SIGV4: APIKey.model_validate(
                {
                    "type": "apiKey",
                    "name": "Authorization",
                    "in": APIKeyIn.header,
                    "description": "AWS Signature Version 4 (service execute-api): API Gateway's IAM authorization",
                    "x-amazon-apigateway-authtype": "awsSigv4",
                }
            )
        },
        security=[{SIGV4: []}],
    )
    plain = document.model_dump(mode="json", by_alias=True, exclude_none=True)
    # Powertools documents its own 422 validation answer; this API answers 400 with a Problem instead.
    for operations in plain.get("paths", {}).values():
        for operation in operations.values():
            operation.get("responses", {}).pop("422", None)
    for schema in ("HTTPValidationError", "ValidationError"):
        plain.get("components", {}).get("schemas", {}).pop(schema, None)
    plain.pop("servers", None)
    return json.dumps(plain, indent=2, sort_keys=True) + "\n"
