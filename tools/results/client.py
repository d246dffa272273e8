"""The read API over HTTP, for ``python -m tools.results --api``: SigV4-signed GETs that never follow a redirect
with the signature.

- Every API request is signed with botocore's SigV4 (service ``execute-api``, the caller's credentials) on an
  ``AWSRequest`` and sent by ``urllib.request`` as signed (same URL, same headers).
- Redirects are **not** followed by urllib: its default handler copies the request's headers, the
  ``Authorization`` among them, to the new request. A ``302`` (rows offloaded to S3) is answered here by a
  fresh, unsigned ``GET`` of its ``Location`` (a presigned S3 URL carries its own signature), whose body is the
  rows as a JSON array; the result's metadata comes from the 302's ``X-Job``, ``X-Slot``, ``X-Generation``,
  ``X-Fencing-Token`` and ``X-Query-Execution-Id`` headers.
- Errors: an RFC 9457 problem document (or API Gateway's own ``{"message"}``) is a :class:`ReadError` carrying
  its detail; 4xx exits 1, 429 and 5xx exit 3, as does a connection failure or timeout.
"""

from __future__ import annotations

import json
import re
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Mapping
from dataclasses import dataclass
from email.message import Message
from typing import Any

from botocore.auth import SigV4Auth
from botocore.awsrequest import AWSRequest

from tools.cli.exit_status import ExitStatus

JSON = "application/json"
CSV = "text/csv"
SERVICE = "execute-api"
DEFAULT_TIMEOUT_S = 30.0
#: Exit statuses: the request was refused (4xx: bad parameter, unknown job or slot, not acceptable, forbidden).
EXIT_REFUSED = ExitStatus.FAILED
#: Bad usage (argparse, or a setting the command cannot do without).
EXIT_USAGE = ExitStatus.USAGE
#: The service failed or could not be reached (5xx, 429, connection refused, timeout).
EXIT_UNAVAILABLE = ExitStatus.UNAVAILABLE
_EXECUTE_API_HOST = re.compile(r"^[a-z0-9]+\.execute-api\.([a-z0-9-]+)\.amazonaws\.com(?:\.cn)?$")
_METADATA_HEADERS = ("X-Job", "X-Slot", "X-Generation", "X-Fencing-Token", "X-Query-Execution-Id")
_MAX_DETAIL = 300


class ReadError(Exception):
    """A read failed; ``exit_status`` is the command's exit status, the message its one line."""

    def __init__(self, message: str, exit_status: int = EXIT_REFUSED) -> None:
        super().__init__(message)
        self.message = message
        self.exit_status = exit_status


def exit_status_of(http_status: int) -> int:
    """A failed answer's exit status: 1 for 4xx (the request is wrong), 3 for 429 and 5xx (retry later)."""
    return EXIT_UNAVAILABLE if http_status == 429 or http_status >= 500 else EXIT_REFUSED


def problem_line(status: int | None, detail: str, parameter: str | None = None) -> str:
    """One line for a failed read: ``detail`` (prefixed with ``parameter`` unless it names it already)."""
    text = " ".join(detail.split())[:_MAX_DETAIL] or "no detail"
    if parameter and not text.startswith(f"{parameter}:"):
        text = f"{parameter}: {text}"
    return f"{text} (HTTP {status})" if status is not None else text


def region_from_url(url: str) -> str | None:
    """The region of an ``execute-api`` endpoint's host (``abc123.execute-api.eu-west-1.amazonaws.com``)."""
    host = (urllib.parse.urlsplit(url).hostname or "").lower()
    match = _EXECUTE_API_HOST.match(host)
    return match.group(1) if match else None


class _NoRedirect(urllib.request.HTTPRedirectHandler):
    """Answers every redirect with "do not follow": urllib then raises ``HTTPError`` with the 3xx response."""

    def redirect_request(self, *args: Any, **kwargs: Any) -> None:
        return None


@dataclass(frozen=True)
class Answer:
    """One HTTP answer: ``status``, ``headers`` (case-insensitive) and the raw ``body``."""

    status: int
    headers: Message
    body: bytes

    def header(self, name: str) -> str | None:
        value = self.headers.get(name)
        return None if value is None else str(value)

    def json(self) -> Any:
        try:
            return json.loads(self.body)
        except ValueError as exc:
            raise ReadError(f"the API answered {self.status} with a body that is not JSON", EXIT_UNAVAILABLE) from exc


class ApiClient:
    """The read API at ``base_url`` (the stack's ``ReadApiUrl``), requests signed for ``region`` with
    ``credentials`` (botocore credentials: ``access_key``, ``secret_key``, ``token``; refreshable ones are
    frozen per request)."""

    def __init__(
        self,
        base_url: str,
        *,
        credentials: Any,
        region: str,
        timeout_s: float = DEFAULT_TIMEOUT_S,
    ) -> None:
        parts = urllib.parse.urlsplit(base_url)
        if parts.scheme not in ("https", "http") or not parts.netloc:
            raise ReadError(f"--api {base_url!r}: expected an https:// URL (the stack's ReadApiUrl)", EXIT_USAGE)
        self.base_url = base_url.rstrip("/")
        self.credentials = credentials
        self.region = region
        self.timeout_s = timeout_s
        self._opener = urllib.request.build_opener(_NoRedirect)

    # --- transport -------------------------------------------------------------------------------------
    def url(self, path: str, query: Mapping[str, Any] | None = None) -> str:
        """The URL of ``path`` (already percent-encoded) with ``query`` (``None`` values left out)."""
        pairs = [(k, str(v)) for k, v in (query or {}).items() if v is not None]
        text = urllib.parse.urlencode(pairs, quote_via=urllib.parse.quote)
        return f"{self.base_url}{path}" + (f"?{text}" if text else "")

    def signed_headers(self, url: str, accept: str) -> dict[str, str]:
        """The headers of a signed ``GET url``: ``Accept``, ``X-Amz-Date``, ``Authorization`` (and
        ``X-Amz-Security-Token`` with temporary credentials)."""
        credentials = self.credentials
        if hasattr(credentials, "get_frozen_credentials"):
            credentials = credentials.get_frozen_credentials()
        request = AWSRequest(method="GET", url=url, headers={"Accept": accept})
        SigV4Auth(credentials, SERVICE, self.region).add_auth(request)
        return dict(request.headers.items())

    def _send(self, request: urllib.request.Request, what: str) -> Answer:
        try:
            with self._opener.open(request, timeout=self.timeout_s) as response:
                return Answer(response.status, response.headers, response.read())
        except urllib.error.HTTPError as error:  # 3xx (not followed), 4xx, 5xx: an answer all the same
            with error:
                return Answer(error.code, error.headers, error.read())
        except (urllib.error.URLError, OSError) as exc:
            reason = getattr(exc, "reason", exc)
            raise ReadError(f"cannot reach {what}: {reason}", EXIT_UNAVAILABLE) from exc

    def get(self, path: str, query: Mapping[str, Any] | None = None, *, accept: str = JSON) -> Answer:
        """A signed ``GET`` of ``path``; a redirect is returned as it is (never followed).

        :raises ReadError: the API answered an error (its problem's detail) or could not be reached.
        """
        url = self.url(path, query)
        request = urllib.request.Request(url, headers=self.signed_headers(url, accept), method="GET")
        answer = self._send(request, urllib.parse.urlsplit(url).netloc)
        if answer.status >= 400:
            raise self._error(answer)
        if answer.status not in (200, 302):
            raise ReadError(f"unexpected answer HTTP {answer.status} from {path}", EXIT_UNAVAILABLE)
        return answer

    def fetch_unsigned(self, location: str) -> Any:
        """``GET location`` (a presigned S3 URL) with a fresh request: no ``Authorization``, no AWS headers;
        returns its JSON body. Only ``https`` and ``http`` URLs are fetched."""
        if urllib.parse.urlsplit(location).scheme not in ("https", "http"):
            raise ReadError(f"the API redirected to {location[:80]!r}, which is not an https URL", EXIT_UNAVAILABLE)
        request = urllib.request.Request(location, headers={"Accept": JSON}, method="GET")
        answer = self._send(request, urllib.parse.urlsplit(location).netloc)
        if answer.status != 200:
            detail = _s3_error(answer.body) or answer.body[:_MAX_DETAIL].decode("utf-8", "replace")
            raise ReadError(
                problem_line(answer.status, f"could not fetch the offloaded rows: {detail}"),
                exit_status_of(answer.status),
            )
        return answer.json()

    def _error(self, answer: Answer) -> ReadError:
        detail, parameter = "", None
        try:
            document = json.loads(answer.body)
        except ValueError:
            document = None
        if isinstance(document, dict):
            detail = str(document.get("detail") or document.get("message") or document.get("title") or "")
            parameter = document.get("parameter") if isinstance(document.get("parameter"), str) else None
        if not detail:
            detail = answer.body[:_MAX_DETAIL].decode("utf-8", "replace") or "no detail"
        return ReadError(problem_line(answer.status, detail, parameter), exit_status_of(answer.status))

    # --- the routes ------------------------------------------------------------------------------------
    def jobs(self, *, csv: bool = False) -> Any:
        """``GET /jobs``: the ``{"jobs": [...]}`` document, or (``csv``) the CSV text."""
        answer = self.get("/jobs", accept=CSV if csv else JSON)
        return answer.body.decode("utf-8") if csv else answer.json()

    def result(self, job: str, slot: str | None = None, generation: int | None = None, *, csv: bool = False) -> Any:
        """A result (``slot=None``: the latest): the API's JSON document, or (``csv``) CSV text when the API
        answers with it. Offloaded rows (302) are fetched from the presigned URL without the signature and
        combined with the redirect's metadata headers (:func:`redirected_document`): a document, also when
        ``csv`` (the caller converts it)."""
        path = f"/jobs/{_segment(job)}/results/" + ("latest" if slot is None else _segment(slot))
        query = {"generation": generation} if generation is not None else None
        answer = self.get(path, query, accept=CSV if csv else JSON)
        if answer.status == 302:
            location = answer.header("Location")
            if not location:
                raise ReadError("the API redirected without a Location", EXIT_UNAVAILABLE)
            rows = self.fetch_unsigned(urllib.parse.urljoin(self.url(path), location))
            return redirected_document(answer.headers, rows)
        return answer.body.decode("utf-8") if csv else answer.json()

    def slots(
        self,
        job: str,
        *,
        since: str | None = None,
        until: str | None = None,
        status: str | None = None,
        limit: int | None = None,
        next_token: str | None = None,
        csv: bool = False,
    ) -> tuple[Any, str | None]:
        """One history page: (the page document, or CSV text; its ``next_token``)."""
        query = {"from": since, "to": until, "status": status, "limit": limit, "next_token": next_token}
        answer = self.get(f"/jobs/{_segment(job)}/slots", query, accept=CSV if csv else JSON)
        if csv:
            return answer.body.decode("utf-8"), answer.header("X-Next-Token") or None
        page = answer.json()
        token = page.get("next_token") if isinstance(page, dict) else None
        return page, token if isinstance(token, str) else None


def redirected_document(headers: Message, rows: Any) -> dict[str, Any]:
    """The result document of an offloaded result: the 302's metadata headers and the rows it pointed to.

    The redirect carries no columns, statistics, window or commit time: ``columns`` are the rows' keys in order
    of appearance with ``type`` null; ``statistics``, ``committed_at_ms`` and the window are null.
    """
    if not isinstance(rows, list) or not all(isinstance(row, dict) for row in rows):
        raise ReadError("the offloaded rows are not a JSON array of objects", EXIT_UNAVAILABLE)
    missing = [name for name in _METADATA_HEADERS if headers.get(name) is None]
    if missing:
        raise ReadError(f"the API's redirect lacks {', '.join(missing)}", EXIT_UNAVAILABLE)
    names: dict[str, None] = {}
    for row in rows:
        names.update(dict.fromkeys(row))
    return {
        "job": str(headers["X-Job"]),
        "slot": str(headers["X-Slot"]),
        "generation": _int(headers["X-Generation"], "X-Generation"),
        "fencing_token": _int(headers["X-Fencing-Token"], "X-Fencing-Token"),
        "query_execution_id": str(headers["X-Query-Execution-Id"]),
        "committed_at_ms": None,
        "window": {"start": None, "end": None},
        "statistics": None,
        "row_count": len(rows),
        "columns": [{"name": name, "type": None} for name in names],
        "rows": rows,
    }


def _int(value: Any, name: str) -> int:
    try:
        return int(str(value))
    except ValueError as exc:
        raise ReadError(f"the API's redirect has a malformed {name}: {str(value)[:40]!r}", EXIT_UNAVAILABLE) from exc


def _segment(value: str) -> str:
    """One path segment, percent-encoded (``:`` and ``/`` included): the API decodes it."""
    return urllib.parse.quote(value, safe="")


def _s3_error(body: bytes) -> str | None:
    """``Code: Message`` of an S3 XML error body (e.g. an expired presigned URL), if it is one."""
    text = body[:4096].decode("utf-8", "replace")
    code = re.search(r"<Code>([^<]{1,100})</Code>", text)
    message = re.search(r"<Message>([^<]{1,200})</Message>", text)
    if not code:
        return None
    return f"{code.group(1)}: {message.group(1)}" if message else code.group(1)
