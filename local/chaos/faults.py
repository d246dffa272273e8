"""The chaos suite's fault vocabulary, one specification for its plan (:mod:`local.chaos.plan`), its environments
(:mod:`local.chaos.worker`) and its verdict (:mod:`local.chaos.verdict`): the kinds of the faults injected on the
boto3 clients and the query engine, the lock's writes as told apart by their request bodies (:func:`classify_write`)
and the rates of the faults aimed at them (:data:`WRITE_FAULTS`); :mod:`local.chaos.worker` says what each fault
stands for and how it is injected.
"""

from __future__ import annotations

import json
from typing import Any

from athena_refresh.engine import DEFAULT_CLIENT_CONFIG

#: botocore ``standard`` retry mode: four attempts in all for DynamoDB (botocore/retries/standard.py,
#: https://docs.aws.amazon.com/sdkref/latest/guide/feature-retry-behavior.html). A storm of that many calls
#: outlasts the client's retries.
DYNAMODB_STANDARD_MAX_ATTEMPTS = 4
#: AthenaQueryEngine's client: ``max_attempts`` retries after the first call (botocore Config semantics).
ATHENA_MAX_ATTEMPTS = int(DEFAULT_CLIENT_CONFIG.retries["max_attempts"]) + 1
DYNAMODB_THROTTLES = ("ProvisionedThroughputExceededException", "ThrottlingException")
DYNAMODB_FAULT_KINDS = DYNAMODB_THROTTLES + ("connection_error", "response_lost")
ATHENA_THROTTLE = "TooManyRequestsException"
UNFENCED_NAME = "#chaos_unfenced"
#: A stop fault marked ``"operator": OPERATOR_RELEASE``: the operator force-releases the stopped holder's lease
#: (:mod:`local.chaos.plan`, :mod:`local.chaos.harness`).
OPERATOR_RELEASE = "release"

#: Transient per-item reasons of a cancelled transaction, with DynamoDB's messages for them (the Errors section of
#: https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_TransactWriteItems.html).
TRANSIENT_CANCELLATION_MESSAGES = {
    "ThrottlingError": "Throughput exceeds the current capacity for one or more global secondary indexes."
    " DynamoDB is automatically scaling your index so please be patient",
    "ProvisionedThroughputExceeded": "The level of configured provisioned throughput for the table was exceeded."
    " Consider increasing your provisioning level with the UpdateTable API",
    "TransactionConflict": "Transaction is ongoing for the item",
}
PERMANENT_CANCELLATION = ("ValidationError", "Item size has exceeded the maximum allowed size")
CANCELLED_PREFIX = "cancelled_"  # kind of a fabricated TransactionCanceledException: cancelled_<reason>
TRANSIENT_CANCELLATION_KINDS = tuple(CANCELLED_PREFIX + reason for reason in TRANSIENT_CANCELLATION_MESSAGES)
PERMANENT_CANCELLATION_KIND = CANCELLED_PREFIX + PERMANENT_CANCELLATION[0]
TRANSACTION_CONFLICT = "TransactionConflictException"
RESPONSE_LOST = "response_lost"

#: The lock's writes, as :func:`classify_write` tells them apart by the request body.
ACQUIRE, HEARTBEAT, RECORD_STATE = "acquire", "heartbeat", "record_state"
COMMIT, RECORD_MISSED = "commit", "record_missed"
#: Faults aimed at the lock's writes: write -> ((kinds, probability per request), ...). Each group is drawn in
#: turn (the permanent ValidationError first, and only on a commit carrying results items). Rates are per
#: request: a bounded run (16 x 30) sends about 510 acquires, 40 commits, 35 state records and a handful of
#: heartbeat-shaped writes (renewals of a resumed holder, releases after an error) and MISSED records. A
#: cancellation or conflict costs one backoff of a few milliseconds and a lost MISSED answer one resend, so
#: they add no measurable time; a permanent ValidationError turns a slot FAILED, hence its low rate.
WRITE_FAULTS: dict[str, tuple[tuple[tuple[str, ...], float], ...]] = {
    RECORD_STATE: ((TRANSIENT_CANCELLATION_KINDS, 0.15),),
    COMMIT: (((PERMANENT_CANCELLATION_KIND,), 0.01), (TRANSIENT_CANCELLATION_KINDS, 0.15)),
    ACQUIRE: (((TRANSACTION_CONFLICT,), 0.01),),
    HEARTBEAT: (((TRANSACTION_CONFLICT,), 0.1),),
    RECORD_MISSED: (((RESPONSE_LOST,), 0.5),),  # the first attempt only: botocore's resend gets the answer
}


def classify_write(operation: str, body: Any) -> str | None:
    """Which of the lock's writes a DynamoDB request is (one of the names above), from its JSON body.

    Slot-item writes all come from one builder (``slotlock._expressions.slot_item_update``) and differ by
    the ``:status`` they set: ``MISSED`` is ``record_missed`` (UpdateItem, or TransactWriteItems with the
    lock item's missed-slot mark), ``RUNNING`` in a TransactWriteItems is ``record_state``, ``SUCCEEDED`` /
    ``FAILED`` is ``commit``; ``acquire``: the UpdateItem with ``ADD #token :one``; ``heartbeat``: the
    UpdateItem ``slotlock._expressions.LEASE_EXPIRY_UPDATE`` (a release has the same shape). ``None`` for
    anything else (reads, the results store's own requests, the lock's other updates).
    """
    from slotlock._expressions import LEASE_EXPIRY_UPDATE

    if operation not in ("UpdateItem", "TransactWriteItems"):
        return None
    try:
        request = json.loads(body.decode() if isinstance(body, (bytes, bytearray)) else body or "{}")
    except (ValueError, UnicodeDecodeError):
        return None
    if operation == "UpdateItem":
        actions = [request]
    else:
        actions = [
            action
            for entry in request.get("TransactItems", [])
            for action in entry.values()
            if isinstance(action, dict)
        ]
    expressions = [str(action.get("UpdateExpression", "")) for action in actions]
    statuses = {
        str(action.get("ExpressionAttributeValues", {}).get(":status", {}).get("S"))
        for action in actions
        if "#status = :status" in str(action.get("UpdateExpression", ""))
    }
    if "MISSED" in statuses:
        return RECORD_MISSED
    if operation == "TransactWriteItems":
        if statuses & {"SUCCEEDED", "FAILED"}:
            return COMMIT
        if "RUNNING" in statuses:
            return RECORD_STATE
        return None
    if "ADD #token :one" in expressions[0]:
        return ACQUIRE
    if expressions[0].strip() == LEASE_EXPIRY_UPDATE:
        return HEARTBEAT
    return None
