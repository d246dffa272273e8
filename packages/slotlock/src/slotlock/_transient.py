"""Which DynamoDB answers are transient, how a cancelled transaction is judged, and the retry budget.

botocore's ``standard`` retry mode already retries top-level throttling (``ThrottlingException``,
``ProvisionedThroughputExceededException``, ``TransactionInProgressException``), HTTP 5xx and dropped
connections (https://docs.aws.amazon.com/sdkref/latest/guide/feature-retry-behavior.html). It does not
retry a ``TransactionCanceledException``, whatever its per-item reasons, nor a
``TransactionConflictException`` on a plain write. Those are judged here, item by item, from the
cancellation reasons DynamoDB returns
(https://docs.aws.amazon.com/amazondynamodb/latest/APIReference/API_TransactWriteItems.html#API_TransactWriteItems_Errors):

=================================  ===========================================================================
reason (item ``i``)                 verdict
=================================  ===========================================================================
``ConditionalCheckFailed``, i = 0   ``lease_gone``: the lock item's owner/token condition failed (the caller
                                    still checks whether its own earlier write explains it)
``ValidationError``,                ``permanent``: the same request fails on every retry (an item over 400 KB,
``ItemCollectionSizeLimitExceeded`` a transaction over 4 MB): the slot is recorded FAILED, never retried
``ConditionalCheckFailed``, i > 0   ``condition_failed``: another item's own condition (the caller decides)
``ThrottlingError``,                ``transient``: retried within the budget, then a retryable error
``ProvisionedThroughputExceeded``,
``TransactionConflict``
anything else, or no reasons        ``undecided``: the caller reads the lock item (consistent) and decides by
                                    owner and token: not ours = ``lease_gone``; ours = ``permanent`` on the
                                    first item with an unknown code (that item refused the write: recorded
                                    FAILED, no retry storm on a code we cannot judge), else ``transient``
=================================  ===========================================================================

Only ``lease_gone`` (with the lock item to prove it) ever becomes "lost".
"""

from __future__ import annotations

import random
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, replace
from typing import Any, Literal

from .errors import TransientLockError

ClockMs = Callable[[], int]

#: Requests in all (the first included) that a holder spends on transient answers (throttling, a conflicting
#: transaction, a server error) of one write, within the lease and the invocation deadline.
DEFAULT_MAX_TRANSIENT_ATTEMPTS = 6
#: A racer's acquisition or missed-slot record: fewer attempts, within this share of the lease.
LOSER_TRANSIENT_ATTEMPTS = 3
LOSER_RETRY_LEASE_SHARE = 0.25


def system_clock_ms() -> int:
    """Wall clock, epoch milliseconds (the default ``clock_ms``)."""
    return time.time_ns() // 1_000_000


#: Cancellation reason codes (``CancellationReasons[i].Code``).
CONDITION_FAILED = "ConditionalCheckFailed"
TRANSIENT_REASONS = frozenset({"ThrottlingError", "ProvisionedThroughputExceeded", "TransactionConflict"})
PERMANENT_REASONS = frozenset({"ValidationError", "ItemCollectionSizeLimitExceeded"})
NO_REASONS = frozenset({"None", ""})

#: Top-level error codes worth another request after botocore's own retries gave up.
TRANSIENT_ERROR_CODES = frozenset(
    {
        "ProvisionedThroughputExceededException",
        "ThrottlingException",
        "RequestLimitExceeded",
        "TransactionConflictException",
        "TransactionInProgressException",
        "InternalServerError",
        "InternalFailure",
        "ServiceUnavailable",
        "LimitExceededException",
    }
)
#: Top-level error codes that fail the same way on every retry.
PERMANENT_ERROR_CODES = frozenset({"ValidationException", "ItemCollectionSizeLimitExceededException"})

Verdict = Literal["lease_gone", "permanent", "condition_failed", "transient", "undecided"]


@dataclass(frozen=True)
class Cancellation:
    """A cancelled transaction judged by its per-item reasons (index 0 is always the lock item).

    ``verdict`` as in the module table; ``index``/``code`` name the deciding item and its reason
    (``None`` for ``transient`` and ``undecided``); ``codes`` lists every item's reason code.
    """

    verdict: Verdict
    codes: tuple[str, ...]
    index: int | None = None
    code: str | None = None

    @classmethod
    def judge(cls, reasons: Sequence[dict[str, Any]]) -> Cancellation:
        """Judge ``reasons`` (DynamoDB's ``CancellationReasons``, in request order)."""
        codes = tuple(str(reason.get("Code") or "None") for reason in reasons)
        if codes and codes[0] == CONDITION_FAILED:
            return cls("lease_gone", codes, 0, CONDITION_FAILED)
        for index, code in enumerate(codes):
            if code in PERMANENT_REASONS:
                return cls("permanent", codes, index, code)
        for index, code in enumerate(codes):
            if code == CONDITION_FAILED:
                return cls("condition_failed", codes, index, code)
        if (
            codes
            and all(code in TRANSIENT_REASONS or code in NO_REASONS for code in codes)
            and any(code in TRANSIENT_REASONS for code in codes)
        ):
            return cls("transient", codes)
        return cls("undecided", codes)

    def decided_by_lock(self, owned: bool) -> Cancellation:
        """Decide an ``undecided`` verdict by the lock item, read after the cancellation.

        ``owned``: the lock item still names the caller's owner and fencing token. Not owned: ``lease_gone``
        (index 0). Owned: the lease is intact, so the first item whose code is neither transient nor empty
        refused the write itself (``permanent`` there: retrying a code we cannot judge could only storm);
        with no such item, ``transient``.
        """
        if self.verdict != "undecided":
            return self
        if not owned:
            return replace(self, verdict="lease_gone", index=0, code=self.codes[0] if self.codes else None)
        for index, code in enumerate(self.codes):
            if code not in TRANSIENT_REASONS and code not in NO_REASONS:
                return replace(self, verdict="permanent", index=index, code=code)
        return replace(self, verdict="transient")


class RetryBudget:
    """A bounded number of retries with capped exponential backoff and full jitter, ending at a deadline.

    The deadline is the lease's expiry or the invocation's deadline, whichever comes first, so a retry
    never outlives the lease (a successor may take over after it) nor the invocation. Backoff and jitter
    follow "Exponential Backoff And Jitter" (AWS Architecture Blog, 2015):
    https://aws.amazon.com/blogs/architecture/exponential-backoff-and-jitter/

    Parameters
    ----------
    clock_ms, sleep_s:
        The caller's clock (epoch ms) and sleep (seconds), injected so tests move a fake clock.
    deadline_ms:
        No retry starts at or after this time (caller clock, epoch ms); ``None``: attempts bound only.
    max_attempts:
        Requests in all, the first included (>= 1).
    base_delay_ms, max_delay_ms:
        The backoff before retry ``n`` is uniform in ``[0, min(max_delay_ms, base_delay_ms * 2**(n-1))]``.
    """

    def __init__(
        self,
        *,
        clock_ms: Callable[[], int],
        sleep_s: Callable[[float], None] = time.sleep,
        deadline_ms: int | None,
        max_attempts: int,
        base_delay_ms: int = 25,
        max_delay_ms: int = 1_000,
        rng: Callable[[], float] = random.random,
    ) -> None:
        self.clock_ms = clock_ms
        self.sleep_s = sleep_s
        self.deadline_ms = deadline_ms
        self.max_attempts = max(1, max_attempts)
        self.base_delay_ms = base_delay_ms
        self.max_delay_ms = max_delay_ms
        self.rng = rng
        self.attempts = 1

    @classmethod
    def ending(
        cls,
        clock_ms: Callable[[], int],
        sleep_s: Callable[[float], None],
        ends: Sequence[int | None],
        max_attempts: int,
    ) -> RetryBudget:
        """A budget whose deadline is the earliest of ``ends`` (``None`` entries ignored: an absent deadline)."""
        return cls(
            clock_ms=clock_ms,
            sleep_s=sleep_s,
            deadline_ms=min(end for end in ends if end is not None),
            max_attempts=max_attempts,
        )

    def spent(
        self, operation: str, message: str, *, error_code: str | None = None, reasons: tuple[str, ...] = ()
    ) -> TransientLockError:
        """The retryable error to raise once this budget ran out: ``operation``, ``message`` and the attempts made."""
        return TransientLockError(operation, message, reasons=reasons, attempts=self.attempts, error_code=error_code)

    def retry(self) -> bool:
        """Back off and count one more attempt; ``False`` (no sleep) when the budget is spent."""
        if self.attempts >= self.max_attempts:
            return False
        cap_ms = min(self.max_delay_ms, self.base_delay_ms * 2 ** (self.attempts - 1))
        delay_ms = max(1, int(self.rng() * cap_ms))
        if self.deadline_ms is not None and self.clock_ms() + delay_ms >= self.deadline_ms:
            return False
        self.sleep_s(delay_ms / 1000)
        self.attempts += 1
        return True
