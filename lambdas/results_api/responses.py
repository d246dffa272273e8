"""HTTP semantics of the read API, independent of the router: content negotiation, entity tags, caching,
CSV, problem documents.

- **Representations**: JSON (default) and CSV (``Accept: text/csv``), negotiated with quality values
  (RFC 9110 §12.5.1, https://www.rfc-editor.org/rfc/rfc9110#section-12.5.1); ``Vary: Accept``.
- **ETag** of a result: a strong tag derived from (job, slot, generation, fencing token) and the representation.
  A committed result never changes, so this identity is its version. ``If-None-Match`` is compared weakly
  (RFC 9110 §13.1.2) and answered ``304 Not Modified``.
- **Cache-Control**: ``latest`` and a slot without ``generation`` are ``no-cache``: a cache may keep them but
  revalidates every reuse (``If-None-Match`` with the ETag: a ``304`` while the result is the same), because an
  operator's run (``tools.ops run/rerun/backfill``) commits a new generation at any time, not only at the next
  firing; a cached copy is therefore never reused unchecked (the bound is 0 s). A result named by slot *and*
  generation is immutable; lists (``/jobs``, ``/slots``) are ``no-cache``; a redirect to a presigned URL is
  ``no-store``; errors are ``no-store``. (RFC 9111 §5.2.2.4, https://www.rfc-editor.org/rfc/rfc9111#section-5.2.2.4)
- **CSV**: RFC 4180 (``\\r\\n`` line ends, quoted as needed), a header row of column names; SQL NULL is an
  empty field; nested values are JSON text.
- **Problems**: RFC 9457 ``application/problem+json`` (``type``, ``title``, ``status``, ``detail``, plus
  ``code`` and, when one is to blame, ``parameter``).
"""

from __future__ import annotations

import csv
import hashlib
import io
import json
from collections.abc import Iterable, Mapping, Sequence
from typing import Any

from athena_refresh.stored import StoredResult

from .errors import BadParameterError, NotAcceptableError, ResultsApiError

JSON = "application/json"
CSV = "text/csv"
#: The Content-Type of every CSV answer (RFC 4180's optional ``header`` parameter: the first line names the columns).
CSV_CONTENT_TYPE = "text/csv; charset=utf-8; header=present"
PROBLEM_JSON = "application/problem+json"
REPRESENTATIONS = (JSON, CSV)
#: A result named by slot and generation: it can never change.
IMMUTABLE = "public, max-age=31536000, immutable"
#: Anything a commit can change at any time (``latest``, a slot's newest generation, lists): stored, but revalidated
#: before every reuse.
NO_CACHE = "no-cache"
NO_STORE = "no-store"
MAX_HEADER_LENGTH = 4096


def negotiate(accept: str | None) -> str:
    """The representation (``application/json`` or ``text/csv``) to answer an ``Accept`` header with.

    No header, ``*/*`` or an unparseable one: JSON. Ties go to JSON.

    :raises NotAcceptableError: the header excludes both (e.g. ``Accept: image/png``).
    :raises BadParameterError: (``Accept``) longer than 4096 characters.
    """
    if accept is None or not accept.strip():
        return JSON
    if len(accept) > MAX_HEADER_LENGTH:
        raise BadParameterError("Accept", f"is longer than {MAX_HEADER_LENGTH} characters")
    quality: dict[str, float] = {}
    specificity: dict[str, int] = {}
    readable = False
    for part in accept.split(","):
        media, _, params = part.strip().partition(";")
        media = media.strip().lower()
        kind, slash, subtype = media.partition("/")
        readable = readable or bool(kind and slash and subtype)
        q = 1.0
        for param in params.split(";"):
            name, _, value = param.strip().partition("=")
            if name.strip().lower() == "q":
                try:
                    q = max(0.0, min(1.0, float(value)))
                except ValueError:
                    q = 0.0
        for candidate in REPRESENTATIONS:
            ranges = {candidate: 2, f"{candidate.split('/')[0]}/*": 1, "*/*": 0}
            # the most specific matching range decides (RFC 9110: "text/csv;q=0, */*" excludes CSV)
            if media in ranges and ranges[media] >= specificity.get(candidate, -1):
                quality[candidate], specificity[candidate] = q, ranges[media]
    if not readable:  # not one media range (e.g. "garbage"): as if there were no header
        return JSON
    ranked = sorted(
        (c for c in REPRESENTATIONS if quality.get(c, 0.0) > 0), key=lambda c: (-quality[c], REPRESENTATIONS.index(c))
    )
    if not ranked:
        raise NotAcceptableError(f"Accept {accept[:80]!r} allows none of {', '.join(REPRESENTATIONS)}")
    return ranked[0]


def result_etag(stored: StoredResult, media_type: str, extra: str = "") -> str:
    """The strong entity tag of ``stored`` in ``media_type`` (quoted, as the header carries it); ``extra``: what
    else the response says (``latest``'s freshness), so that the tag changes whenever it does."""
    parts = [stored.job_name, stored.slot_iso, str(stored.generation), str(stored.fencing_token), media_type]
    identity = "\0".join(parts + ([extra] if extra else []))
    return '"' + hashlib.sha256(identity.encode()).hexdigest()[:32] + '"'


def if_none_match(header: str | None, etag: str) -> bool:
    """Whether ``If-None-Match: header`` matches ``etag`` (weak comparison; ``*`` matches any)."""
    if not header:
        return False
    if header.strip() == "*":
        return True
    opaque = etag.removeprefix("W/")
    return any(tag.strip().removeprefix("W/") == opaque for tag in header[:MAX_HEADER_LENGTH].split(","))


def result_document(
    stored: StoredResult, rows: list[dict[str, Any]], freshness: Mapping[str, Any] | None = None
) -> dict[str, Any]:
    """The JSON body of a result: metadata, ``columns`` (name, Athena type) and ``rows`` (objects); ``freshness``
    (``latest`` only: :mod:`results_api.freshness`) when given."""
    extra = {} if freshness is None else {"freshness": dict(freshness)}
    return extra | {
        "job": stored.job_name,
        "slot": stored.slot_iso,
        "generation": stored.generation,
        "fencing_token": stored.fencing_token,
        "query_execution_id": stored.query_execution_id,
        "committed_at_ms": stored.committed_at_ms,
        "window": {"start": stored.window_start, "end": stored.window_end},
        "statistics": stored.statistics,
        "row_count": stored.row_count,
        "estimated_cost_usd": stored.cost["estimated_cost_usd"] if stored.cost else None,
        "cost": stored.cost,
        "columns": stored.columns,
        "rows": rows,
        "assertions_failed": stored.assertions_failed,
    }


def result_headers(stored: StoredResult) -> dict[str, str]:
    """Metadata headers of a result, on every representation (and on the redirect of an offloaded one)."""
    return {
        "X-Job": stored.job_name,
        "X-Slot": stored.slot_iso,
        "X-Generation": str(stored.generation),
        "X-Fencing-Token": str(stored.fencing_token),
        "X-Query-Execution-Id": stored.query_execution_id,
    }


def to_csv(columns: Sequence[str], rows: Iterable[Mapping[str, Any]]) -> str:
    """RFC 4180 text: a header row of ``columns``, then one line per row (NULL: empty; nested: JSON)."""
    buffer = io.StringIO()
    writer = csv.writer(buffer, lineterminator="\r\n")
    writer.writerow(columns)
    for row in rows:
        writer.writerow([_cell(row.get(column)) for column in columns])
    return buffer.getvalue()


def _cell(value: Any) -> Any:
    if value is None:
        return ""
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, (dict, list)):
        return json.dumps(value, separators=(",", ":"))
    return value


def problem(error: ResultsApiError) -> dict[str, Any]:
    """The RFC 9457 problem document of ``error``."""
    document: dict[str, Any] = {
        "type": f"about:blank#{error.code}",
        "title": error.code.replace("_", " "),
        "status": error.status,
        "detail": error.message,
        "code": error.code,
    }
    if isinstance(error, BadParameterError):
        document["parameter"] = error.parameter
    return document
