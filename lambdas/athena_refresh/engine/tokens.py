"""The idempotency token of StartQueryExecution and the checks every engine makes before starting."""

from __future__ import annotations

import hashlib
import json
import logging
import re
from collections.abc import Sequence

logger = logging.getLogger(__name__)

#: ClientRequestToken length bounds (characters), from the StartQueryExecution API reference.
TOKEN_MIN_CHARS = 32
TOKEN_MAX_CHARS = 128

#: QueryExecutionId as the Athena API constrains it (1..128 characters, pattern ``\S+``):
#: https://docs.aws.amazon.com/athena/latest/APIReference/API_GetQueryExecution.html#API_GetQueryExecution_RequestSyntax
QUERY_EXECUTION_ID = re.compile(r"\S{1,128}")
_TOKEN_PREFIX_CHARS = 40
_UNSAFE_TOKEN_CHARS = re.compile(r"[^A-Za-z0-9]+")


def client_request_token(job_name: str, slot_iso: str, attempt: int, *, deployment_id: str) -> str:
    """Deterministic StartQueryExecution ``ClientRequestToken`` for one attempt of one slot of one job of one
    deployment.

    Two starts of the same attempt in the same deployment (a Lambda retry, a botocore retry, a second racer
    that adopts the slot) send the same token and therefore get the same query; a new attempt gets a new
    token and therefore a new query. Athena scopes a token to the account and Region, not to a stack, so
    `deployment_id` keeps two deployments of the same job name (staging and prod in one account) from
    sending the same token for different requests (Athena would answer the second with the first's query,
    or with ``InvalidRequestException`` when the SQL differs). The job passes its lock table's name, which
    is unique per account and Region and shared by every racer of the deployment:
    https://docs.aws.amazon.com/athena/latest/APIReference/API_StartQueryExecution.html#athena-StartQueryExecution-request-ClientRequestToken

    The token is ``<readable prefix>-<sha256 hex>``: the prefix (job, slot, attempt with every run of
    characters outside ``[A-Za-z0-9]`` turned into ``-``, at most 40 characters) is for humans reading
    CloudTrail; the 64-hex-digit SHA-256 of ``json.dumps([deployment_id, job_name, slot_iso, attempt])`` is
    what makes it unique, so a truncated or sanitised prefix can never make two different inputs collide.

    Athena keeps a token for a limited time and answers ``InvalidRequestException`` when the same token
    comes with a different request.

    Parameters
    ----------
    job_name : str
        The job's name (non-empty).
    slot_iso : str
        The schedule slot as an ISO-8601 string (non-empty), exactly as stored with the slot.
    attempt : int
        Query attempt number of that slot (>= 0; the job decides where it starts).
    deployment_id : str
        Identity of the deployment (non-empty), the same for every racer of it: the lock table's name.

    Returns
    -------
    str
        Between 32 and 128 characters (in practice 64..105), ASCII letters, digits and ``-``.

    Raises
    ------
    ValueError
        Empty `job_name`, `slot_iso` or `deployment_id` (or not a str), or a negative or non-int `attempt`.

    Examples
    --------
    >>> t = client_request_token("flights", "2026-11-02T10:00:00Z", 1, deployment_id="prod-locks")
    >>> t.startswith("flights-2026-11-02T10-00-00Z-a1-") and len(t) == 32 + 64
    True
    >>> t != client_request_token("flights", "2026-11-02T10:00:00Z", 1, deployment_id="staging-locks")
    True
    """
    if not job_name or not slot_iso:
        raise ValueError("job_name and slot_iso must be non-empty")
    if not isinstance(deployment_id, str) or not deployment_id:
        raise ValueError(f"deployment_id must be a non-empty str (the lock table's name), got {deployment_id!r}")
    if isinstance(attempt, bool) or not isinstance(attempt, int) or attempt < 0:
        raise ValueError(f"attempt must be an int >= 0, got {attempt!r}")
    digest = hashlib.sha256(json.dumps([deployment_id, job_name, slot_iso, attempt]).encode("utf-8")).hexdigest()
    readable = _UNSAFE_TOKEN_CHARS.sub("-", f"{job_name}-{slot_iso}-a{attempt}").strip("-")
    prefix = readable[:_TOKEN_PREFIX_CHARS].rstrip("-")
    token = f"{prefix}-{digest}" if prefix else digest
    # 64 <= len(token) <= 40 + 1 + 64: always inside Athena's 32..128.
    return token


def check_start_request(client_request_token: str, parameters: Sequence[str]) -> None:
    """Checks every :class:`QueryEngine` makes before starting a query.

    Raises
    ------
    ValueError
        The token is not 32..128 characters (StartQueryExecution's bounds).
    TypeError
        `parameters` is a single str (a common slip that would send one parameter per character).
    """
    if not TOKEN_MIN_CHARS <= len(client_request_token) <= TOKEN_MAX_CHARS:
        raise ValueError(
            f"client_request_token must be {TOKEN_MIN_CHARS}..{TOKEN_MAX_CHARS} characters,"
            f" got {len(client_request_token)}"
        )
    if isinstance(parameters, str):
        raise TypeError("parameters must be a sequence of SQL literal strings, not one str")
