"""A job's slot history, every generation, newest first: one ``Query`` per page on the history index.

The index (:data:`slotlock.table.HISTORY_INDEX`) is sparse: partition key ``job``, sort key ``slot_epoch_s``,
which only slot (history) items carry together. Reads are **eventually consistent** (a global secondary index
offers nothing else): a record written a moment ago may be missing from a page for a short while
(https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/GSI.html#GSI.Reads).

Order: newest slot first (``ScanIndexForward=False``). The generations of one slot share a sort key, whose
order DynamoDB leaves undefined; each page is sorted by (slot, generation), newest first, so only a slot whose
generations straddle two pages can show them out of order across the page break.

A ``status`` filter is applied by DynamoDB *after* ``Limit`` (a ``FilterExpression``), so a filtered page may
hold fewer records than ``limit``, even none, while ``next_key`` says more may follow
(https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Query.FilterExpression.html).

The ``tools.ops history`` command and the read API serve this module.
"""

from __future__ import annotations

from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from botocore.exceptions import ClientError

from .. import _wire as wire
from .. import codec, table
from .._client import LockTableClient
from .._expressions import (
    FINISHED_AT,
    GENERATION,
    OWNER,
    PK,
    REASON,
    REQUEST_REASON,
    REQUESTED_AT,
    REQUESTED_BY,
    RUN_ID,
    RUN_KIND,
    SLOT_EPOCH,
    STARTED_AT,
    STATUS,
    STATUS_FAILED,
    STATUS_MISSED,
    STATUS_REQUESTED,
    STATUS_RUNNING,
    STATUS_SUCCEEDED,
    TOKEN,
)
from ..errors import CorruptLockItemError, LockConfigurationError
from ..slot import Slot

if TYPE_CHECKING:  # pragma: no cover
    from mypy_boto3_dynamodb.client import DynamoDBClient

STATUSES = (STATUS_REQUESTED, STATUS_RUNNING, STATUS_SUCCEEDED, STATUS_FAILED, STATUS_MISSED)
MAX_PAGE_LIMIT = 1000


@dataclass(frozen=True)
class HistoryRecord:
    """One generation of one slot, as its history item says.

    ``generation``: 1 is the live schedule's run (items written before generations existed have none and
    are generation 1); ``status``: REQUESTED (a manual generation not started yet), RUNNING, SUCCEEDED,
    FAILED or MISSED; ``reason``: why it was MISSED (``too_old``, ``overrun``, ``superseded``, ``paused``, or the
    job's own: ``capacity``, by its holder, or by a newer slot's winner when the slot was given back for it).
    Times are epoch milliseconds (the writer's clock). ``run_kind``/``run_id``/``requested_*``: the operator's
    request of a manual generation (``None`` for the live schedule). ``state``/``summary``/``error``: the JSON
    objects the job recorded (in-flight state, commit summary, failure or miss detail). ``corrupt``: why an
    item could not be decoded (its other fields are what could be read).
    """

    job_name: str
    slot: Slot
    generation: int
    status: str
    reason: str | None = None
    fencing_token: int | None = None
    owner_id: str | None = None
    started_at_ms: int | None = None
    finished_at_ms: int | None = None
    run_kind: str | None = None
    run_id: str | None = None
    requested_by: str | None = None
    requested_at_ms: int | None = None
    request_reason: str | None = None
    state: Mapping[str, Any] = field(default_factory=dict)
    summary: Mapping[str, Any] = field(default_factory=dict)
    error: Mapping[str, Any] = field(default_factory=dict)
    corrupt: str | None = None

    @property
    def duration_ms(self) -> int | None:
        """Start to finish, when both are known."""
        if self.started_at_ms is None or self.finished_at_ms is None:
            return None
        return self.finished_at_ms - self.started_at_ms

    @property
    def committed(self) -> bool:
        """Whether the generation ended with a commit (SUCCEEDED or FAILED)."""
        return self.status in (STATUS_SUCCEEDED, STATUS_FAILED)

    def as_dict(self) -> dict[str, Any]:
        """JSON-safe dict (slot as canonical ISO text, ``duration_ms`` included)."""
        return {
            "job": self.job_name,
            "slot": self.slot.iso,
            "generation": self.generation,
            "status": self.status,
            "reason": self.reason,
            "fencing_token": self.fencing_token,
            "owner_id": self.owner_id,
            "started_at_ms": self.started_at_ms,
            "finished_at_ms": self.finished_at_ms,
            "duration_ms": self.duration_ms,
            "run_kind": self.run_kind,
            "run_id": self.run_id,
            "requested_by": self.requested_by,
            "requested_at_ms": self.requested_at_ms,
            "request_reason": self.request_reason,
            "state": dict(self.state),
            "summary": dict(self.summary),
            "error": dict(self.error),
            "corrupt": self.corrupt,
        }


@dataclass(frozen=True)
class HistoryPage:
    """One page: ``records`` newest first; ``next_key``: the ``ExclusiveStartKey`` of the next page (DynamoDB
    JSON, as ``LastEvaluatedKey`` gave it) or ``None`` on the last page. Callers that hand it to clients must
    encode and authenticate it (never pass a client's key to DynamoDB raw)."""

    records: list[HistoryRecord]
    next_key: dict[str, Any] | None


def decode_record(item: Mapping[str, Mapping[str, Any]]) -> HistoryRecord:
    """A history item (DynamoDB JSON) as a :class:`HistoryRecord`; never raises for a tampered item: what
    cannot be decoded is named in ``corrupt``. An item of a table layout this slotlock does not read is not
    tampered, and not guessed at either: :class:`~slotlock.errors.UnsupportedSchemaVersionError` (checked first)."""
    key = str(item.get(PK, {}).get("S", "?"))
    codec.check_schema_version(item, key)
    corrupt: str | None = None
    try:
        plain = codec.decode_slot_item(item, key)
    except CorruptLockItemError as exc:
        corrupt = str(exc)
        plain = {name: value for name, value in _plain_scalars(item).items() if not name.endswith("_json")}

    def number(name: str) -> int | None:
        value = plain.get(name)
        return value if isinstance(value, int) and not isinstance(value, bool) else None

    def text(name: str) -> str | None:
        value = plain.get(name)
        return value if isinstance(value, str) else None

    def mapping(name: str) -> Mapping[str, Any]:
        value = plain.get(name)
        return value if isinstance(value, dict) else {}

    epoch = number(SLOT_EPOCH)
    return HistoryRecord(
        job_name=text(table.HISTORY_PARTITION_KEY) or "",
        slot=Slot(epoch if epoch is not None else 0),
        generation=number(GENERATION) or table.LIVE_GENERATION,
        status=text(STATUS) or "",
        reason=text(REASON),
        fencing_token=number(TOKEN),
        owner_id=text(OWNER),
        started_at_ms=number(STARTED_AT),
        finished_at_ms=number(FINISHED_AT),
        run_kind=text(RUN_KIND),
        run_id=text(RUN_ID),
        requested_by=text(REQUESTED_BY),
        requested_at_ms=number(REQUESTED_AT),
        request_reason=text(REQUEST_REASON),
        state=mapping("state"),
        summary=mapping("summary"),
        error=mapping("error"),
        corrupt=corrupt,
    )


def _plain_scalars(item: Mapping[str, Mapping[str, Any]]) -> dict[str, Any]:
    return {name: wire.plain(value) for name, value in item.items()}


class SlotHistory:
    """Pages of a job's slot history on one lock table (``client``: a boto3 DynamoDB client; default one with
    the ``standard`` retry mode)."""

    def __init__(self, table_name: str, *, client: DynamoDBClient | None = None) -> None:
        self.table_name = table_name
        self._io = LockTableClient(table_name, client)

    def page(
        self,
        job_name: str,
        *,
        since: Slot | None = None,
        until: Slot | None = None,
        status: str | None = None,
        limit: int = 50,
        start_key: Mapping[str, Any] | None = None,
    ) -> HistoryPage:
        """One ``Query`` on the history index: ``job_name``'s records with ``since <= slot <= until`` (either
        bound optional), of ``status`` if given, at most ``limit`` (1..1000) evaluated items, newest first,
        continuing after ``start_key`` (a previous page's ``next_key``).

        Raises
        ------
        LockConfigurationError
            A bad job name, status, limit or range (named), or a ``start_key`` DynamoDB refuses as not one of
            this query's (``start_key``).
        UnsupportedSchemaVersionError
            An item of the page has a table layout this slotlock does not read.
        LockBackendError
            DynamoDB failed (e.g. ``ValidationException`` for a ``start_key`` that is not one of this query's).
        """
        if not table.is_valid_job_name(job_name):
            raise LockConfigurationError("job", f"must be {table.JOB_NAME_RULE}, got {job_name!r:.80}")
        if status is not None and status not in STATUSES:
            raise LockConfigurationError("status", f"must be one of {', '.join(STATUSES)}, got {status!r:.40}")
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_PAGE_LIMIT:
            raise LockConfigurationError("limit", f"must be an integer from 1 to {MAX_PAGE_LIMIT}, got {limit!r:.40}")
        if since is not None and until is not None and since > until:
            raise LockConfigurationError("since", f"{since.iso} is after until {until.iso}")
        names = {"#job": table.HISTORY_PARTITION_KEY}
        values: dict[str, Any] = {":job": {"S": job_name}}
        condition = "#job = :job"
        if since is not None or until is not None:
            names["#epoch"] = table.HISTORY_SORT_KEY
            if since is not None and until is not None:
                condition += " AND #epoch BETWEEN :since AND :until"
                values |= {":since": {"N": str(since.epoch_s)}, ":until": {"N": str(until.epoch_s)}}
            elif since is not None:
                condition += " AND #epoch >= :since"
                values[":since"] = {"N": str(since.epoch_s)}
            else:
                assert until is not None
                condition += " AND #epoch <= :until"
                values[":until"] = {"N": str(until.epoch_s)}
        params: dict[str, Any] = {
            "TableName": self.table_name,
            "IndexName": table.HISTORY_INDEX,
            "KeyConditionExpression": condition,
            "ScanIndexForward": False,
            "Limit": limit,
        }
        if status is not None:
            params["FilterExpression"] = "#status = :status"
            names["#status"] = STATUS
            values[":status"] = {"S": status}
        params["ExpressionAttributeNames"] = names
        params["ExpressionAttributeValues"] = values
        if start_key is not None:
            params["ExclusiveStartKey"] = dict(start_key)
        try:
            response = self._io.call("Query", **params)
        except ClientError as exc:
            if start_key is not None and wire.error_code(exc) == "ValidationException":
                raise LockConfigurationError("start_key", f"is not a key of this query: {exc}") from exc
            raise self._io.wrap("Query", exc) from exc
        records = [decode_record(item) for item in response.get("Items", [])]
        records.sort(key=lambda record: (record.slot, record.generation), reverse=True)
        next_key = response.get("LastEvaluatedKey")
        return HistoryPage(records, next_key if isinstance(next_key, dict) and next_key else None)

    def records(
        self,
        job_name: str,
        *,
        since: Slot | None = None,
        until: Slot | None = None,
        status: str | None = None,
        limit: int | None = None,
        page_size: int = 100,
    ) -> Iterator[HistoryRecord]:
        """Every record of :meth:`page`'s selection, page after page, newest first; at most ``limit``."""
        start_key: Mapping[str, Any] | None = None
        yielded = 0
        while True:
            page = self.page(job_name, since=since, until=until, status=status, limit=page_size, start_key=start_key)
            for record in page.records:
                if limit is not None and yielded >= limit:
                    return
                yield record
                yielded += 1
            if page.next_key is None:
                return
            start_key = page.next_key

    def slot_records(self, job_name: str, slot: Slot) -> list[HistoryRecord]:
        """Every generation of one slot, newest first (eventually consistent)."""
        return list(self.records(job_name, since=slot, until=slot))
