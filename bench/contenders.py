"""The contenders: one adapter per library, each running "one Lambda invocation's worth" of locking.

Every adapter exposes the same call, :meth:`Contender.invoke` ``(key, owner, job) -> Outcome``: try to get
the right to run ``job`` for one schedule slot, run it if granted, then finish the way the library
finishes (commit, release, save). ``Outcome.ran`` says whether this invocation ran the job. The same
call is used to count requests, to time cycles, to race processes and to take over from a killed holder,
so every figure measures the same code path, with the same client configuration, on the same endpoint.

Contenders:

``floor``
    One plain conditional PutItem (``attribute_not_exists``) per slot: the physical minimum for
    "first writer wins". No lease, no takeover of a crashed winner, no fencing.
``slotlock`` (ours)
    :class:`slotlock.SlotRunner` over :class:`slotlock.SlotLock`: one conditional UpdateItem acquires a
    fenced lease for the slot; the commit is one TransactWriteItems that finishes the slot and releases.
``fenced-lease`` (reference, written here)
    The textbook lease: one conditional UpdateItem per job (owner, expiry, ``ADD`` fencing token), and a
    plain conditional release. It shows what our per-slot bookkeeping and atomic commit cost on top.
``powertools`` (peer)
    ``aws_lambda_powertools.utilities.idempotency.idempotent_function`` with ``DynamoDBPersistenceLayer``,
    keyed on ``{"job", "slot"}``. Powertools writes its in-progress expiry only when it knows the Lambda
    context, so every invocation registers a Lambda-like context whose remaining time is the lease.
``python-dynamodb-lock`` (peer)
    ``python_dynamodb_lock.DynamoDBLockClient`` (port of AWS's Java lock client), one lock per slot.
    Its ``retry_timeout=timedelta(0)`` means "use the default" (lease + heartbeat period, 35 s by default),
    so losers get a tiny positive timeout (:data:`PDL_LOSER_TIMEOUT`): one attempt, then give up.
    It stores ``Decimal.from_float(lease_duration)``, which boto3's serializer rejects as inexact unless the
    lease in seconds is a binary fraction (1.0, 0.5, 60.0 work; 0.8 fails with ``decimal.Inexact``).
"""

from __future__ import annotations

import datetime as dt
import time
import uuid
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, ClassVar

from botocore.exceptions import ClientError

from slotlock import Slot, SlotLock, SlotRunner

from .backends import Endpoint, create_table, make_client, make_resource, make_session
from .counting import RequestCounter

Job = Callable[[], None]

#: python-dynamodb-lock: a loser's whole retry budget. Positive: 0 would mean "default" (35 s).
PDL_LOSER_TIMEOUT = dt.timedelta(milliseconds=1)
#: python-dynamodb-lock: wait between a loser's attempts (longer than the budget: exactly one attempt).
PDL_LOSER_RETRY_PERIOD = dt.timedelta(seconds=1)


@dataclass(frozen=True)
class SlotKey:
    """What is locked: a job and one of its schedule slots."""

    job: str
    slot: Slot

    @property
    def text(self) -> str:
        return f"{self.job}#{self.slot.iso}"


@dataclass(frozen=True)
class Outcome:
    """What one invocation did: whether it ran the job, and the library's word for why (not)."""

    ran: bool
    detail: str


@dataclass(frozen=True)
class Features:
    """What a contender guarantees, for the report's table."""

    once_per_slot: str
    fencing: str
    takeover: str
    loser: str


class Contender:
    """Base adapter. Subclasses set ``name``, ``label``, ``features`` and implement ``invoke``.

    Parameters
    ----------
    endpoint:
        The DynamoDB endpoint (every contender of a comparison uses the same one).
    run_id:
        Prefix of this run's table names (tables are created by :meth:`create_tables`).
    lease_s:
        Lease length in seconds (ignored by the floor).
    capacity:
        Ask DynamoDB for consumed capacity on every request (accounting runs only).
    """

    name: ClassVar[str]
    label: ClassVar[str]
    peer: ClassVar[bool] = False
    supports_takeover: ClassVar[bool] = True
    features: ClassVar[Features]

    def __init__(self, endpoint: Endpoint, run_id: str, *, lease_s: float = 60.0, capacity: bool = False) -> None:
        self.endpoint = endpoint
        self.run_id = run_id
        self.lease_s = lease_s
        self.session = make_session()
        self.client = self._make_client()
        reader = make_client(endpoint) if capacity else None
        self.counter = RequestCounter(self.client, capacity=capacity, reader=reader)

    def _make_client(self) -> Any:
        return make_client(self.endpoint, self.session)

    @classmethod
    def unavailable(cls) -> str | None:
        """Why this contender cannot run here (a peer not installed), or ``None``."""
        return None

    @classmethod
    def table(cls, run_id: str) -> str:
        return f"bench-{run_id}-{cls.name}"

    @classmethod
    def create_tables(cls, client: Any, run_id: str) -> None:
        create_table(client, cls.table(run_id), [("pk", "HASH")])

    def warm(self) -> None:
        """Open the connection outside any measurement (one DescribeTable, not counted by callers)."""
        self.client.describe_table(TableName=self.table(self.run_id))

    def invoke(self, key: SlotKey, owner: str, job: Job) -> Outcome:
        raise NotImplementedError

    def invoke_until_run(self, key: SlotKey, owner: str, job: Job, *, poll_s: float, timeout_s: float) -> Outcome:
        """A successor: invoke every ``poll_s`` until it runs the job (takeover), at most ``timeout_s``."""
        deadline = time.monotonic() + timeout_s
        while True:
            outcome = self.invoke(key, owner, job)
            if outcome.ran or time.monotonic() + poll_s > deadline:
                return outcome
            time.sleep(poll_s)


class Floor(Contender):
    name = "floor"
    label = "floor: 1 conditional PutItem"
    supports_takeover = False
    features = Features(
        once_per_slot="yes (first writer wins)",
        fencing="no",
        takeover="never (a crashed winner loses the slot)",
        loser="1 PutItem, returns",
    )

    def invoke(self, key: SlotKey, owner: str, job: Job) -> Outcome:
        try:
            self.client.put_item(
                TableName=self.table(self.run_id),
                Item={"pk": {"S": key.text}, "owner": {"S": owner}},
                ConditionExpression="attribute_not_exists(#pk)",
                ExpressionAttributeNames={"#pk": "pk"},
            )
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
                return Outcome(False, "exists")
            raise
        job()
        return Outcome(True, "won")


class SlotLockContender(Contender):
    name = "slotlock"
    label = "slotlock (ours)"
    features = Features(
        once_per_slot="yes (slot finished is recorded in the lease write's condition)",
        fencing="yes: token in the atomic commit transaction",
        takeover="after the lease (expiry compared in the condition)",
        loser="1 UpdateItem, returns",
    )

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._runners: dict[str, SlotRunner] = {}

    def runner(self, job_name: str) -> SlotRunner:
        runner = self._runners.get(job_name)
        if runner is None:
            lock = SlotLock(self.table(self.run_id), job_name, client=self.client, lease_duration_s=self.lease_s)
            runner = self._runners[job_name] = SlotRunner(lock)
        return runner

    def invoke(self, key: SlotKey, owner: str, job: Job) -> Outcome:
        ran: list[bool] = []

        def body(run: Any) -> None:
            ran.append(True)
            job()

        outcome = self.runner(key.job).run(body, slot=key.slot, owner_id=owner)
        return Outcome(bool(ran), outcome.reason or outcome.status)


class FencedLease(Contender):
    name = "fenced-lease"
    label = "ref: fenced UpdateItem lease + release"
    features = Features(
        once_per_slot="no (a late racer runs again after the release)",
        fencing="token returned; the caller must fence its own writes",
        takeover="after the lease",
        loser="1 UpdateItem, returns",
    )

    def invoke(self, key: SlotKey, owner: str, job: Job) -> Outcome:
        table, item_key = self.table(self.run_id), {"pk": {"S": f"lease#{key.job}"}}
        now_ms = time.time_ns() // 1_000_000
        try:
            response = self.client.update_item(
                TableName=table,
                Key=item_key,
                UpdateExpression="SET #owner = :owner, #expires = :expires ADD #token :one",
                ConditionExpression="attribute_not_exists(#owner) OR #expires <= :now",
                ExpressionAttributeNames={
                    "#owner": "owner_id",
                    "#expires": "lease_expires_at_ms",
                    "#token": "fencing_token",
                },
                ExpressionAttributeValues={
                    ":owner": {"S": owner},
                    ":expires": {"N": str(now_ms + int(self.lease_s * 1000))},
                    ":now": {"N": str(now_ms)},
                    ":one": {"N": "1"},
                },
                ReturnValues="UPDATED_NEW",
                ReturnValuesOnConditionCheckFailure="ALL_OLD",
            )
        except ClientError as exc:
            if exc.response.get("Error", {}).get("Code") == "ConditionalCheckFailedException":
                return Outcome(False, "held")
            raise
        token = response["Attributes"]["fencing_token"]["N"]
        job()
        self.client.update_item(
            TableName=table,
            Key=item_key,
            UpdateExpression="REMOVE #owner, #expires",
            ConditionExpression="#owner = :owner AND #token = :token",
            ExpressionAttributeNames={
                "#owner": "owner_id",
                "#expires": "lease_expires_at_ms",
                "#token": "fencing_token",
            },
            ExpressionAttributeValues={":owner": {"S": owner}, ":token": {"N": token}},
        )
        return Outcome(True, "won")


class PowertoolsIdempotency(Contender):
    name = "powertools"
    label = "Powertools idempotency"
    peer = True
    features = Features(
        once_per_slot="yes while the record lives (expires_after_seconds)",
        fencing="no: save_success is an unconditional UpdateItem",
        takeover="after the in-progress expiry (= remaining Lambda time)",
        loser="1 PutItem, raises AlreadyInProgress or returns the saved result",
    )
    KEY_ATTR = "id"

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        from aws_lambda_powertools.utilities.idempotency import (
            DynamoDBPersistenceLayer,
            IdempotencyConfig,
            idempotent_function,
        )

        from local.emulators.lambda_runtime import LambdaContext

        self._context_type = LambdaContext
        self.config = IdempotencyConfig(expires_after_seconds=24 * 3600, raise_on_no_idempotency_key=True)
        self.persistence = DynamoDBPersistenceLayer(
            table_name=self.table(self.run_id), key_attr=self.KEY_ATTR, boto3_client=self.client
        )
        self._job: Job = _nothing

        def guarded(slot: dict[str, str]) -> dict[str, bool]:
            self._job()
            return {"ran": True}

        self._guarded = idempotent_function(
            guarded,
            data_keyword_argument="slot",
            persistence_store=self.persistence,
            config=self.config,
            key_prefix="bench",
        )

    @classmethod
    def create_tables(cls, client: Any, run_id: str) -> None:
        create_table(client, cls.table(run_id), [(cls.KEY_ATTR, "HASH")], ttl_attribute="expiration")

    def invoke(self, key: SlotKey, owner: str, job: Job) -> Outcome:
        from aws_lambda_powertools.utilities.idempotency.exceptions import IdempotencyAlreadyInProgressError

        # A Lambda-like context: Powertools sets the in-progress expiry to now + remaining time.
        context = self._context_type(aws_request_id=owner, function_name="bench", timeout_ms=int(self.lease_s * 1000))
        self.config.register_lambda_context(context)
        ran: list[bool] = []

        def tracked() -> None:
            ran.append(True)
            job()

        self._job = tracked
        try:
            # The idempotency key is "bench#" + the hash of this payload: the job and the slot.
            self._guarded(slot={"job": key.job, "slot": key.slot.iso})
        except IdempotencyAlreadyInProgressError:
            return Outcome(False, "in_progress")
        finally:
            self._job = _nothing
        return Outcome(bool(ran), "won" if ran else "completed")


class PythonDynamoDBLock(Contender):
    name = "python-dynamodb-lock"
    label = "python-dynamodb-lock"
    peer = True
    features = Features(
        once_per_slot="no: release deletes the item, a late racer runs again",
        fencing="no: record_version_number changes at every heartbeat, not monotonic",
        takeover="a waiter must watch the record unchanged for a whole lease",
        loser="GetItem (+ PutItem if absent); blocks retry_timeout (default 35 s)",
    )
    PARTITION_KEY = "lock_key"
    SORT_KEY = "sort_key"
    # Its client starts two daemon heartbeat threads; close() joins them for up to a heartbeat period
    # (15 s with a 60 s lease), so adapters leave them to end with the process.

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        from python_dynamodb_lock.python_dynamodb_lock import DynamoDBLockClient, DynamoDBLockError

        self._error_type = DynamoDBLockError
        lease = dt.timedelta(seconds=self.lease_s)
        self.lock_client = DynamoDBLockClient(
            self.resource,
            table_name=self.table(self.run_id),
            owner_name=f"bench-{uuid.uuid4().hex[:12]}",  # the default calls socket.getfqdn()
            heartbeat_period=lease / 4,  # the library recommends at least 4 heartbeats per lease
            safe_period=lease * 2 / 3,
            lease_duration=lease,
        )

    def _make_client(self) -> Any:
        self.resource = make_resource(self.endpoint, self.session)
        return self.resource.meta.client

    @classmethod
    def unavailable(cls) -> str | None:
        try:
            import python_dynamodb_lock  # noqa: F401
        except ImportError:
            return "python-dynamodb-lock is not installed (make bench installs it into .venv-bench)"
        return None

    @classmethod
    def create_tables(cls, client: Any, run_id: str) -> None:
        # The library's own create_dynamodb_table uses provisioned capacity; on-demand like the others here.
        create_table(
            client,
            cls.table(run_id),
            [(cls.PARTITION_KEY, "HASH"), (cls.SORT_KEY, "RANGE")],
            ttl_attribute="expiry_time",
        )

    def _acquire(self, key: SlotKey, retry_period: dt.timedelta, retry_timeout: dt.timedelta) -> Any:
        try:
            return self.lock_client.acquire_lock(
                key.text, retry_period=retry_period, retry_timeout=retry_timeout, app_callback=_ignore_callback
            )
        except self._error_type as exc:
            if exc.code == self._error_type.ACQUIRE_TIMEOUT:
                return None
            raise

    def _run(self, lock: Any, job: Job) -> Outcome:
        try:
            job()
        finally:
            lock.release(best_effort=False)
        return Outcome(True, "won")

    def invoke(self, key: SlotKey, owner: str, job: Job) -> Outcome:
        lock = self._acquire(key, PDL_LOSER_RETRY_PERIOD, PDL_LOSER_TIMEOUT)
        return Outcome(False, "timeout") if lock is None else self._run(lock, job)

    def invoke_until_run(self, key: SlotKey, owner: str, job: Job, *, poll_s: float, timeout_s: float) -> Outcome:
        # Its own way to wait: one acquire_lock call that watches the record version for a whole lease.
        lock = self._acquire(key, dt.timedelta(seconds=poll_s), dt.timedelta(seconds=timeout_s))
        return Outcome(False, "timeout") if lock is None else self._run(lock, job)


def _nothing() -> None:
    """A job that does nothing (the default job of an idle adapter)."""


def _ignore_callback(code: str, lock: Any) -> None:
    """python-dynamodb-lock's app_callback (lock in danger / stolen): nothing to abort in a benchmark."""


#: All contenders, floor first (the report's order).
CONTENDERS: tuple[type[Contender], ...] = (
    Floor,
    SlotLockContender,
    FencedLease,
    PowertoolsIdempotency,
    PythonDynamoDBLock,
)
BY_NAME = {c.name: c for c in CONTENDERS}


def select(names: list[str] | None = None) -> tuple[list[type[Contender]], dict[str, str]]:
    """The runnable contenders among ``names`` (default: all) and, by name, why the others cannot run."""
    chosen = [BY_NAME[n] for n in names] if names else list(CONTENDERS)
    skipped = {c.name: reason for c in chosen if (reason := c.unavailable())}
    return [c for c in chosen if c.name not in skipped], skipped
