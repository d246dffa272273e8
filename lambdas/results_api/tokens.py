"""``next_token``: a history page's continuation, opaque to clients, never handed to DynamoDB as given.

DynamoDB's ``LastEvaluatedKey`` of a Query on the history index holds the table key and the index key of the
last item read: ``{"pk": "slot#<job>#<slot>[#g<n>]", "job": <job>, "slot_epoch_s": <epoch>}``. The token carries
only the parts needed to rebuild it (the slot item key and the epoch) and a digest of the query it belongs to
(job, from, to, status). Decoding checks every part: the key must be a history key of *this* job whose slot is
the epoch's, and the digest must match the request's query. So a tampered, truncated, foreign or oversized token
is refused as ``next_token`` (400) and the ``ExclusiveStartKey`` sent to DynamoDB is always one the reader built.

The digest is not a secret MAC: the read role has no key to sign with, and it needs none. A forged token that
passes the checks names a real position in the same job's history, which the caller may read anyway.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
from collections.abc import Mapping
from typing import Any

from slotlock import table
from slotlock.slot import MAX_EPOCH_S, MIN_EPOCH_S, Slot

from .errors import BadParameterError

TOKEN_VERSION = 1
MAX_TOKEN_LENGTH = 512
PARAMETER = "next_token"


def query_digest(job: str, since: Slot | None, until: Slot | None, status: str | None) -> str:
    """A short digest binding a token to one query's selection (``limit`` may change between pages)."""
    text = "\0".join([job, since.iso if since else "", until.iso if until else "", status or ""])
    return hashlib.sha256(text.encode()).hexdigest()[:16]


def encode(last_key: Mapping[str, Any], digest: str) -> str:
    """The token for ``last_key`` (a history Query's ``LastEvaluatedKey``, DynamoDB JSON) of the query ``digest``.

    :raises ValueError: ``last_key`` is not a history index key (a programming error, never the caller's).
    """
    try:
        key = last_key[table.PARTITION_KEY]["S"]
        epoch = int(last_key[table.HISTORY_SORT_KEY]["N"])
    except (KeyError, TypeError, ValueError) as exc:
        raise ValueError(f"not a history index key: {dict(last_key)!r:.200}") from exc
    document = {"v": TOKEN_VERSION, "k": key, "e": epoch, "q": digest}
    raw = json.dumps(document, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def decode(token: str, *, job: str, digest: str) -> dict[str, Any]:
    """The ``ExclusiveStartKey`` (DynamoDB JSON) rebuilt from ``token`` for a query of ``job`` with ``digest``.

    :raises BadParameterError: (``next_token``) the token is malformed, tampered with, or from another query.
    """
    if not token or len(token) > MAX_TOKEN_LENGTH:
        raise BadParameterError(PARAMETER, f"must be 1 to {MAX_TOKEN_LENGTH} characters, as a previous page gave it")
    try:
        raw = base64.urlsafe_b64decode(token + "=" * (-len(token) % 4))
        document = json.loads(raw)
    except (binascii.Error, UnicodeDecodeError, ValueError) as exc:
        raise BadParameterError(PARAMETER, "is not a token this API issued (use the previous page's as is)") from exc
    if not isinstance(document, dict) or set(document) != {"v", "k", "e", "q"} or not _is_version(document["v"]):
        raise BadParameterError(PARAMETER, "is not a token this API issued (use the previous page's as is)")
    key, epoch, token_digest = document["k"], document["e"], document["q"]
    if token_digest != digest:
        raise BadParameterError(PARAMETER, "belongs to another query (job, from, to and status must stay the same)")
    if not isinstance(epoch, int) or isinstance(epoch, bool) or not isinstance(key, str):
        raise BadParameterError(PARAMETER, "is not a token this API issued (use the previous page's as is)")
    if not MIN_EPOCH_S <= epoch < MAX_EPOCH_S or epoch % 60:
        raise BadParameterError(PARAMETER, "names no valid slot (tampered with?)")
    slot = Slot(epoch)
    live = table.slot_key(job, slot.iso)
    if key != live and not _is_generation_key(key, live):
        raise BadParameterError(PARAMETER, "names no history item of this job (tampered with?)")
    return {
        table.PARTITION_KEY: {"S": key},
        table.HISTORY_PARTITION_KEY: {"S": job},
        table.HISTORY_SORT_KEY: {"N": str(epoch)},
    }


def _is_version(value: Any) -> bool:
    # exactly the integer 1: JSON true and 1.0 compare equal to 1 in Python
    return type(value) is int and value == TOKEN_VERSION


def _is_generation_key(key: str, live: str) -> bool:
    prefix = f"{live}#g"
    if not key.startswith(prefix):
        return False
    number = key[len(prefix) :]
    # ASCII digits only: str.isdigit() accepts e.g. "²", which int() then refuses with a ValueError
    if not (number.isascii() and number.isdigit()):
        return False
    return number == str(int(number)) and 2 <= int(number) <= table.MAX_GENERATION
