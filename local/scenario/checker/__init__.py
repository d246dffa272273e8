"""The scenarios' history checker (the chaos suite's, the demo's): pure functions over a recorded history and the
final stored state; the capacity budget's family is :mod:`local.scenario.checker.capacity`.

In the manner of Jepsen's checkers (https://jepsen.io/consistency), the checker trusts nothing the
racers *say* about the protocol's guarantees: it replays what every racer observed, with machine-wide
``CLOCK_MONOTONIC`` timestamps (comparable across processes on one host), against what DynamoDB holds at
the end, and reports every violation of:

``one_commit_per_slot``
    at most one commit (a slot's final outcome) is accepted per slot;
``tokens_increase``
    committed fencing tokens strictly increase in slot order (history and stored results);
``stale_write_accepted``
    no commit is accepted whose token was already superseded when it was sent: an acquisition with a
    higher token had returned before the commit request left (Kleppmann, "How to do distributed
    locking", 2016: https://martin.kleppmann.com/2016/02/08/how-to-do-distributed-locking.html);
``commit_after_newer_slot``
    no slot commits after a newer slot's commit was acknowledged;
``slot_unaccounted``
    every planned slot ends committed (SUCCEEDED or FAILED) or with a recorded reason (a MISSED slot
    item with its reason, or Lambda's on-failure destination after the async retries ran out);
``results_mismatch``
    every SUCCEEDED slot has exactly one stored result, under the committed token, whose rows equal the
    rows the query gives for that slot (no row lost, none duplicated), and the LATEST pointer names the
    newest committed slot;
``terminal_records``
    every delivered slot (near-future deliveries aside) ends with exactly one terminal record, written
    once and never overwritten (:func:`check_terminal_records`);
``slot_missed_logged``
    the MISSED records the environments logged (lines with ``missed_reason``) equal, reason by reason, the slot
    items recorded MISSED (:func:`check_slot_missed_logged`);
``future_slot_refused``
    a delivery scheduled ahead of now (beyond the lead allowance) is refused with ``InvalidEventError`` on
    every attempt before any DynamoDB request, and its slot is never acquired nor recorded
    (:func:`check_future_refused`);
``paused_slot``
    a slot the operator paused is never acquired: every racer of it loses as ``paused`` after one acquisition
    request, exactly one records it MISSED ``paused`` (and that is its stored record), no query is started for
    it; after the resume no later slot is refused as paused (:func:`check_paused_slots`);
``force_release``
    the holder whose live lease the operator released never has a commit accepted (its token is fenced out),
    and its slot is completed by a takeover under a higher token that adopted the recorded query
    (:func:`check_force_release`);
``generation_commits``
    the once-per-slot rules per (slot, generation) for every manual generation (a re-run): exactly one commit
    accepted (SUCCEEDED or FAILED), none stale on the manual lease, the stored generation item is that commit,
    and a SUCCEEDED generation has its own result item (under its token, with the slot's rows), a FAILED one
    none; no generation item nor result nobody requested (:func:`check_generations`);
``manual_isolated``
    manual runs never touch the live schedule: no live racer loses to the manual lease (``busy``), no manual run
    records a slot MISSED, the live slot raced beside a re-run still ends committed, and the re-run slot's live
    record (generation 1) stays as it was (:func:`check_manual_isolation`).

Generations: the live schedule runs generation 1 of each slot, and the first eight checks apply to it as they
always did (the manual invocations' events are left out of them: :func:`live_history`); each manual generation
(2, 3, ...) is judged on its own by ``generation_commits``; the LATEST pointer must end at the newest (slot,
generation) stored (``results_mismatch``).

History events are dicts with ``what`` and ``t_ns`` plus, by kind: ``deliver`` (``request_id``, ``slot``,
``kind``), ``checkpoint`` (``request_id``, ``slot``, ``checkpoint``, ``token``), ``resumed``
(``request_id``), ``result`` (``request_id``, ``slot``, ``status``, ``reason``, ``token``, ``error_type``),
``error`` (``request_id``, ``slot``, ``error_type``), ``superseded`` (``request_id``, ``slot``: the older
slot an acquisition replaced, ``recorded``: whether it wrote that slot's MISSED record),
``dynamodb_requests`` (``request_id``, ``count``), ``dlq`` (``slot``). :mod:`local.emulators.lambda_service`
records them (for the chaos suite and the demo alike). The chaos harness adds ``operator`` events (``action``
``pause``, ``resume``, ``release`` or ``rerun``, ``slot``; :data:`OPERATOR` describes their fields).

The specification stays here, in one list; the checks live by invariant family, each a pure function with its
helpers next to it:

- :mod:`~local.scenario.checker.model`: the shared vocabulary (:data:`CHECKS`, :class:`Commit`, :class:`FinalState`,
  a violation's shape, :func:`percentile` for the reports); :mod:`~local.scenario.checker.history`: reading the
  history (:func:`live_history`, :func:`accepted_commits`, :func:`operator_events`, ...);
- :mod:`~local.scenario.checker.fencing`: the first four checks (:func:`check_history`);
- :mod:`~local.scenario.checker.final_state`: ``slot_unaccounted``, ``results_mismatch`` and the stored token order
  (:func:`check_final_state`);
- :mod:`~local.scenario.checker.terminal`: ``terminal_records`` and ``slot_missed_logged``;
- :mod:`~local.scenario.checker.future`: ``future_slot_refused``;
- :mod:`~local.scenario.checker.operator_actions`: ``paused_slot`` and ``force_release``;
- :mod:`~local.scenario.checker.generations`: ``generation_commits`` and ``manual_isolated``.

Every name is importable from ``local.scenario.checker`` (the chaos harness, the demo, the capacity report and the
tests import it from here).
"""

from __future__ import annotations

from local.scenario.checker.fencing import check_history
from local.scenario.checker.final_state import check_final_state
from local.scenario.checker.future import check_future_refused
from local.scenario.checker.generations import MANUAL_LEASE_REASON, check_generations, check_manual_isolation
from local.scenario.checker.history import (
    accepted_commits,
    acquisitions,
    live_history,
    manual_requests,
    operator_events,
)
from local.scenario.checker.model import (
    CHECKS,
    FINAL_COMMIT_STATUSES,
    OPERATOR,
    Acquisition,
    Commit,
    FinalState,
    percentile,
    slot_epoch_s,
)
from local.scenario.checker.operator_actions import PAUSED_REASON, check_force_release, check_paused_slots
from local.scenario.checker.terminal import (
    MISSED_REASON_FIELD,
    TERMINAL_STATUSES,
    TerminalWrite,
    check_slot_missed_logged,
    check_terminal_records,
    delivered_slots,
    logged_missed_slots,
    terminal_writes,
)

__all__ = [
    "CHECKS",
    "FINAL_COMMIT_STATUSES",
    "MANUAL_LEASE_REASON",
    "MISSED_REASON_FIELD",
    "OPERATOR",
    "PAUSED_REASON",
    "TERMINAL_STATUSES",
    "Acquisition",
    "Commit",
    "FinalState",
    "TerminalWrite",
    "accepted_commits",
    "acquisitions",
    "check_final_state",
    "check_force_release",
    "check_future_refused",
    "check_generations",
    "check_history",
    "check_manual_isolation",
    "check_paused_slots",
    "check_slot_missed_logged",
    "check_terminal_records",
    "delivered_slots",
    "live_history",
    "logged_missed_slots",
    "manual_requests",
    "operator_events",
    "percentile",
    "slot_epoch_s",
    "terminal_writes",
]
