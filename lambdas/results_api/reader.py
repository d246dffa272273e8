"""The read model of every job: the one module the HTTP API, the dashboard widget and ``python -m tools.results``
read the tables through.

Reads, by request:

- :meth:`ResultsReader.latest`: **one** ``GetItem`` of the job's LATEST item, which carries the latest result
  (``athena_refresh.results``); rows offloaded to S3 are not fetched (the API redirects to them).
  :meth:`ResultsReader.latest_and_lock_items` reads it with lock table items (``GET latest``'s freshness) in
  **one** ``BatchGetItem`` across both tables.
- :meth:`ResultsReader.result`: one ``GetItem`` (a given generation) or a ``Query`` of the slot's generations
  then the ``GetItem`` (the newest committed generation).
- :meth:`ResultsReader.history`: one ``Query`` per page on the lock table's sparse history index
  (``slotlock.SlotHistory``), continued with an opaque :mod:`results_api.tokens` token. A ``status`` filter is
  applied by DynamoDB after ``Limit``, so a filtered page may be short, even empty, with a ``next_token``.
- :meth:`ResultsReader.jobs`: one ``BatchGetItem`` per 50 jobs of their live lock items and LATEST pointers
  (repeated only for keys DynamoDB leaves unprocessed: :func:`results_api.batch.batch_get`), then one per 100 of
  the slot items their freshness reads (:func:`results_api.freshness.jobs_freshness`).

Results reads are strongly consistent (the results table is read by key); history reads are eventually
consistent (a global secondary index offers nothing else). Nothing here writes.
"""

from __future__ import annotations

import datetime as dt
import os
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import TYPE_CHECKING, Any

import boto3
from botocore.config import Config
from botocore.exceptions import BotoCoreError, ClientError

from athena_refresh import contract
from athena_refresh.catalog import BUNDLED_CATALOG_PATH, CatalogQuery, load_catalog
from athena_refresh.errors import AthenaRefreshError, ConfigurationError
from athena_refresh.results import ResultsStore
from athena_refresh.stored import LATEST, StoredResult, plain_item
from slotlock import SlotHistory, table
from slotlock.codec import decode_lock_item
from slotlock.errors import InvalidEventError, LockConfigurationError, SlotLockError
from slotlock.history import MAX_PAGE_LIMIT, STATUSES
from slotlock.schedule import CronError, next_firing
from slotlock.slot import Slot

from . import tokens
from .batch import batch_get
from .errors import BackendUnavailableError, BadParameterError, ResultNotFoundError, UnknownJobError
from .freshness import jobs_freshness
from .views import JobSummary, history_entry

if TYPE_CHECKING:  # pragma: no cover
    from mypy_boto3_dynamodb.client import DynamoDBClient
    from mypy_boto3_s3.client import S3Client

DEFAULT_PAGE_LIMIT = 50
#: Presigned URLs of offloaded rows live this long (seconds): long enough to follow a redirect, no more.
PRESIGN_EXPIRES_S = 60
#: BatchGetItem reads at most 100 keys; each job needs two (lock item, LATEST pointer).
JOBS_PER_BATCH = 50
#: The LATEST item's attributes ``GET /jobs`` reads (:meth:`ResultsReader.job_items`).
POINTER_FIELDS = ("latest_slot", "latest_generation", "fencing_token", "committed_at_ms", "query_execution_id")


@dataclass(frozen=True)
class HistoryView:
    """One page of a job's history: ``entries`` (:func:`history_entry` objects, newest first) and
    ``next_token`` (``None`` on the last page). A filtered page may be short, even empty, before its end."""

    job: str
    entries: list[dict[str, Any]]
    next_token: str | None
    limit: int
    filters: dict[str, Any] = field(default_factory=dict)


def parse_slot(text: str, parameter: str = "slot") -> Slot:
    """A slot from its ISO 8601 text (``2026-11-22T00:30:00Z``; floored to the minute).

    :raises BadParameterError: naming ``parameter``.
    """
    try:
        return Slot.parse(text, field=parameter)
    except InvalidEventError as exc:
        problem = str(exc).split(": ", 1)[-1]
        raise BadParameterError(
            parameter, f"{problem}; expected an ISO 8601 time such as 2026-11-22T00:30:00Z"
        ) from exc


class ResultsReader:
    """Reads one deployment's results and history (see the module docstring for each read's cost).

    Parameters
    ----------
    lock_table, results_table:
        The table names.
    catalog:
        The deployment's jobs (:func:`athena_refresh.catalog.load_catalog`): only these are served.
    dynamodb_client, s3_client:
        Injected boto3 clients; defaults use botocore's ``standard`` retry mode.
    clock_ms:
        Epoch-milliseconds clock (``held``/``free``, ages, the next slot).
    """

    def __init__(
        self,
        lock_table: str,
        results_table: str,
        catalog: Mapping[str, CatalogQuery],
        *,
        dynamodb_client: DynamoDBClient | None = None,
        s3_client: S3Client | None = None,
        clock_ms: Callable[[], int] | None = None,
    ) -> None:
        self.lock_table = lock_table
        self.results_table = results_table
        self.catalog = dict(catalog)
        config = Config(retries={"mode": "standard"})
        self._dynamodb = dynamodb_client or boto3.client("dynamodb", config=config)
        self._s3 = s3_client
        self.store = ResultsStore(results_table, dynamodb_client=self._dynamodb, s3_client=s3_client)
        self.history_reader = SlotHistory(lock_table, client=self._dynamodb)
        self.clock_ms = clock_ms or (lambda: time.time_ns() // 1_000_000)
        self._next_slots: dict[str, tuple[float, dt.datetime]] = {}  # job -> (computed at s, next firing)

    @classmethod
    def from_env(cls, env: Mapping[str, str] | None = None) -> ResultsReader:
        """From the read functions' environment: ``LOCK_TABLE_NAME``, ``RESULTS_TABLE_NAME`` and (local tools)
        ``JOB_CATALOG_PATH`` (default: the catalog bundled in the asset).

        :raises athena_refresh.errors.ConfigurationError: a variable is missing or the catalog is broken.
        """
        env = os.environ if env is None else env
        names = {}
        for variable in (contract.ENV_LOCK_TABLE_NAME, contract.ENV_RESULTS_TABLE_NAME):
            value = env.get(variable, "").strip()
            if not value:
                raise ConfigurationError(variable, "is required and must not be empty")
            names[variable] = value
        catalog_path = Path(env.get(contract.ENV_JOB_CATALOG_PATH, "") or BUNDLED_CATALOG_PATH)
        return cls(
            names[contract.ENV_LOCK_TABLE_NAME], names[contract.ENV_RESULTS_TABLE_NAME], load_catalog(catalog_path)
        )

    @property
    def dynamodb(self) -> DynamoDBClient:
        """The DynamoDB client every read goes through (:mod:`results_api.overview` batches its own reads)."""
        return self._dynamodb

    @property
    def s3(self) -> S3Client:
        if self._s3 is None:
            self._s3 = boto3.client("s3", config=Config(retries={"mode": "standard"}, signature_version="s3v4"))
        return self._s3

    # --- jobs ------------------------------------------------------------------------------------------
    def job_names(self) -> list[str]:
        return sorted(self.catalog)

    def check_job(self, job: str) -> CatalogQuery:
        """The catalog entry of ``job``.

        :raises BadParameterError: (``job``) not a valid job name. :raises UnknownJobError: not in the catalog.
        """
        if not table.is_valid_job_name(job):
            raise BadParameterError("job", f"must be {table.JOB_NAME_RULE}, got {_preview(job)}")
        if job not in self.catalog:
            raise UnknownJobError(job, self.job_names())
        return self.catalog[job]

    def jobs(self) -> list[JobSummary]:
        """Every job of the catalog, by name, with its freshness as ``latest`` says it
        (:func:`results_api.freshness.jobs_freshness`): one ``BatchGetItem`` per 50 jobs of the lock and LATEST
        items, then one per 100 of the slot items the freshness reads (at most 4 a scheduled job).

        :raises BackendUnavailableError: DynamoDB failed.
        """
        names = self.job_names()
        now_ms = self.clock_ms()
        locks: dict[str, Any] = {}
        pointers: dict[str, Any] = {}
        for start in range(0, len(names), JOBS_PER_BATCH):
            chunk_locks, chunk_pointers = self.job_items(names[start : start + JOBS_PER_BATCH])
            locks.update(chunk_locks)
            pointers.update(chunk_pointers)
        freshness, _ = jobs_freshness(self, locks, pointers, now_ms=now_ms)
        return [self._summary(name, locks.get(name), pointers.get(name), now_ms, freshness[name]) for name in names]

    def job_items(
        self, names: list[str], *, pointer_fields: tuple[str, ...] = POINTER_FIELDS
    ) -> tuple[dict[str, Any], dict[str, Any]]:
        """The live lock items and LATEST items (only ``pointer_fields``, never the rows) of ``names`` (at most
        :data:`JOBS_PER_BATCH`), each by job name (absent: no item): one consistent ``BatchGetItem``.

        :raises BackendUnavailableError: DynamoDB failed.
        """
        pointer_names = {f"#p{index}": name for index, name in enumerate(("job", *pointer_fields))}
        request: dict[str, Any] = {
            self.lock_table: {
                "Keys": [{table.PARTITION_KEY: {"S": table.lock_key(name)}} for name in names],
                "ConsistentRead": True,
            },
            self.results_table: {
                "Keys": [
                    {contract.RESULTS_TABLE_PARTITION_KEY: {"S": name}, contract.RESULTS_TABLE_SORT_KEY: {"S": LATEST}}
                    for name in names
                ],
                "ConsistentRead": True,
                "ProjectionExpression": ", ".join(pointer_names),
                "ExpressionAttributeNames": pointer_names,
            },
        }
        found = batch_get(self._dynamodb, request, what="the jobs' lock and LATEST items")
        locks = {
            item.get(table.PARTITION_KEY, {}).get("S", "").removeprefix("lock#"): item
            for item in found.get(self.lock_table, [])
        }
        pointers = {
            item.get(contract.RESULTS_TABLE_PARTITION_KEY, {}).get("S", ""): item
            for item in found.get(self.results_table, [])
        }
        return locks, pointers

    def _summary(
        self, name: str, lock_item: Any, pointer: Any, now_ms: int, freshness: dict[str, Any] | None = None
    ) -> JobSummary:
        schedule = self.catalog[name].schedule
        latest: dict[str, Any] = {"freshness": freshness}
        if pointer:
            values = plain_item(pointer)
            latest |= {
                "latest_slot": values.get("latest_slot") if isinstance(values.get("latest_slot"), str) else None,
                "latest_generation": _int_or_none(values.get("latest_generation", table.LIVE_GENERATION)),
                "latest_fencing_token": _int_or_none(values.get("fencing_token")),
                "latest_committed_at_ms": _int_or_none(values.get("committed_at_ms")),
            }
        if not lock_item:
            return JobSummary(name, schedule, "free", **latest)
        try:
            record = decode_lock_item(lock_item, table.lock_key(name))
        except SlotLockError as exc:
            return JobSummary(name, schedule, "unknown", problem=str(exc), **latest)
        held = record.locked(now_ms)
        return JobSummary(
            name,
            schedule,
            "held" if held else "free",
            lease_owner_id=record.owner_id if held else None,
            lease_slot=record.lease_slot.iso if held and record.lease_slot else None,
            lease_fencing_token=record.fencing_token,
            lease_expires_at_ms=record.lease_expires_at_ms if held else None,
            paused=record.paused,
            paused_through_slot=record.paused_through_slot.iso
            if record.paused and record.paused_through_slot
            else None,
            last_success_slot=record.last_succeeded_slot.iso if record.last_succeeded_slot else None,
            last_success_at_ms=record.last_succeeded_at_ms,
            last_finished_slot=record.last_finished_slot.iso if record.last_finished_slot else None,
            last_finished_outcome=record.last_finished_outcome,
            **latest,
        )

    def get_lock_item(self, key: str) -> dict[str, Any] | None:
        """The lock table's item ``key`` (DynamoDB JSON; a lock or a slot's history item), strongly consistent;
        ``None`` when absent. One ``BatchGetItem`` of one key: the read roles read the lock table by batch only.
        :raises BackendUnavailableError: DynamoDB failed."""
        request = {self.lock_table: {"Keys": [{table.PARTITION_KEY: {"S": key}}], "ConsistentRead": True}}
        items = batch_get(self._dynamodb, request, what=key).get(self.lock_table, [])
        return dict(items[0]) if items else None

    # --- results ---------------------------------------------------------------------------------------
    def latest(self, job: str) -> StoredResult:
        """``job``'s newest committed result: one ``GetItem``.

        :raises BadParameterError, UnknownJobError: as :meth:`check_job`. :raises ResultNotFoundError: none yet.
        :raises BackendUnavailableError: DynamoDB failed or the item cannot be decoded.
        """
        self.check_job(job)
        return self._latest(job, lambda: self.store.latest(job))

    def latest_and_lock_items(
        self, job: str, lock_keys: Sequence[str]
    ) -> tuple[StoredResult, dict[str, dict[str, Any]]]:
        """``job``'s newest committed result (as :meth:`latest`) and the lock table's items ``lock_keys`` (DynamoDB
        JSON by partition key; absent ones left out), from **one** ``BatchGetItem`` across the results and the lock
        table, both strongly consistent (``ConsistentRead`` is per table in ``RequestItems``), keys left
        unprocessed read again (:func:`results_api.batch.batch_get`).
        https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_BatchGetItem.html

        :raises BadParameterError, UnknownJobError: as :meth:`check_job`. :raises ResultNotFoundError: none yet.
        :raises BackendUnavailableError: DynamoDB failed, left keys unprocessed, or the item cannot be decoded.
        """
        self.check_job(job)
        request: dict[str, Any] = {self.results_table: {"Keys": [self.store.latest_key(job)], "ConsistentRead": True}}
        if lock_keys:
            keys = [{table.PARTITION_KEY: {"S": key}} for key in dict.fromkeys(lock_keys)]
            request[self.lock_table] = {"Keys": keys, "ConsistentRead": True}
        found = batch_get(self._dynamodb, request, what=f"the latest result of {job} and its lock items")
        pointers = found.get(self.results_table, [])
        stored = self._latest(job, lambda: self.store.latest_from_item(job, pointers[0] if pointers else None))
        items = {item[table.PARTITION_KEY]["S"]: item for item in found.get(self.lock_table, [])}
        return stored, items

    @staticmethod
    def _latest(job: str, read: Callable[[], StoredResult | None]) -> StoredResult:
        try:
            stored = read()
        except AthenaRefreshError as exc:  # DynamoDB failed, or an edited item (CorruptResultsItemError)
            raise BackendUnavailableError(f"could not read the latest result of {job}: {exc}") from exc
        if stored is None:
            raise ResultNotFoundError(job, None)
        return stored

    def result(self, job: str, slot_text: str, generation: int | None = None) -> StoredResult:
        """The result of ``job`` at slot ``slot_text`` (ISO 8601) and ``generation`` (``None``: the newest
        committed generation).

        :raises BadParameterError: (``job``, ``slot``, ``generation``). :raises UnknownJobError, ResultNotFoundError.
        :raises BackendUnavailableError: DynamoDB failed or the item cannot be decoded.
        """
        self.check_job(job)
        slot = parse_slot(slot_text)
        if generation is not None and not table.LIVE_GENERATION <= generation <= table.MAX_GENERATION:
            raise BadParameterError("generation", f"must be an integer from 1 to {table.MAX_GENERATION}")
        try:
            stored = self.store.result(job, slot.iso, generation)
        except AthenaRefreshError as exc:  # DynamoDB failed, or an edited item (CorruptResultsItemError)
            raise BackendUnavailableError(f"could not read the result of {job} at {slot.iso}: {exc}") from exc
        if stored is None:
            raise ResultNotFoundError(job, slot.iso, generation)
        return stored

    def rows(self, stored: StoredResult) -> list[dict[str, Any]]:
        """``stored``'s rows, read from S3 when offloaded (checksum verified).

        :raises BackendUnavailableError: S3 failed or the object does not match its checksum.
        """
        try:
            return self.store.load_rows(stored)
        except AthenaRefreshError as exc:
            raise BackendUnavailableError(str(exc)) from exc

    def presigned_rows_url(self, stored: StoredResult, *, expires_s: int = PRESIGN_EXPIRES_S) -> str:
        """A presigned ``GetObject`` URL of ``stored``'s offloaded rows (a JSON array of row objects), valid for
        ``expires_s`` seconds. Presigning is local (no request); the URL carries the read role's credentials.
        https://docs.aws.amazon.com/AmazonS3/latest/userguide/ShareObjectPreSignedURL.html
        """
        if stored.rows_s3_uri is None:
            raise ValueError("the result's rows are not offloaded")
        bucket, _, key = stored.rows_s3_uri.removeprefix("s3://").partition("/")
        try:
            url: str = self.s3.generate_presigned_url(
                "get_object", Params={"Bucket": bucket, "Key": key}, ExpiresIn=expires_s
            )
        except (ClientError, BotoCoreError) as exc:
            raise BackendUnavailableError(f"could not presign {stored.rows_s3_uri}: {exc}") from exc
        return url

    def next_slot(self, job: str, now_ms: int | None = None) -> dt.datetime | None:
        """The next firing of ``job``'s schedule after ``now_ms`` (``None``: no schedule in the catalog, or it
        never fires again)."""
        schedule = self.check_job(job).schedule
        if schedule is None:
            return None
        now_s = (self.clock_ms() if now_ms is None else now_ms) / 1000
        cached = self._next_slots.get(job)
        # A cached firing answers every request until it passes (and only requests after the one that computed
        # it: the clock of tests may go backwards).
        if cached is not None and cached[0] <= now_s < cached[1].timestamp():
            return cached[1]
        try:
            firing = next_firing(schedule.expression, schedule.timezone, dt.datetime.fromtimestamp(now_s, dt.UTC))
        except CronError:
            return None
        if firing is not None:
            self._next_slots[job] = (now_s, firing)
        return firing

    # --- history ---------------------------------------------------------------------------------------
    def history(
        self,
        job: str,
        *,
        since: str | None = None,
        until: str | None = None,
        status: str | None = None,
        limit: int = DEFAULT_PAGE_LIMIT,
        next_token: str | None = None,
    ) -> HistoryView:
        """One page of ``job``'s history (every generation, newest first): one ``Query`` on the history index.

        ``since``/``until``: ISO 8601 slot bounds (inclusive); ``status``: one of ``slotlock.history.STATUSES``;
        ``limit``: items DynamoDB evaluates for the page, 1..1000; ``next_token``: the previous page's.

        :raises BadParameterError: naming ``from``, ``to``, ``status``, ``limit`` or ``next_token``.
        :raises UnknownJobError. :raises BackendUnavailableError: DynamoDB failed.
        """
        self.check_job(job)
        low = parse_slot(since, "from") if since is not None else None
        high = parse_slot(until, "to") if until is not None else None
        if low is not None and high is not None and low > high:
            raise BadParameterError("from", f"{low.iso} is after to {high.iso}")
        if status is not None and status not in STATUSES:
            raise BadParameterError("status", f"must be one of {', '.join(STATUSES)}, got {_preview(status)}")
        if isinstance(limit, bool) or not isinstance(limit, int) or not 1 <= limit <= MAX_PAGE_LIMIT:
            raise BadParameterError("limit", f"must be an integer from 1 to {MAX_PAGE_LIMIT}, got {_preview(limit)}")
        digest = tokens.query_digest(job, low, high, status)
        start_key = tokens.decode(next_token, job=job, digest=digest) if next_token is not None else None
        try:
            page = self.history_reader.page(job, since=low, until=high, status=status, limit=limit, start_key=start_key)
        except LockConfigurationError as exc:
            parameter = "next_token" if exc.parameter == "start_key" else exc.parameter
            raise BadParameterError(parameter, str(exc).split(": ", 1)[-1]) from exc
        except SlotLockError as exc:
            raise BackendUnavailableError(f"could not read the history of {job}: {exc}") from exc
        token = tokens.encode(page.next_key, digest) if page.next_key is not None else None
        filters = {"from": low.iso if low else None, "to": high.iso if high else None, "status": status}
        return HistoryView(job, [history_entry(r) for r in page.records], token, limit, filters)


def _int_or_none(value: Any) -> int | None:
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _preview(value: Any) -> str:
    """A bounded, printable rendering of a caller's value for an error message (never 1 MB of it)."""
    text = repr(value)
    return text if len(text) <= 60 else text[:57] + "..."
