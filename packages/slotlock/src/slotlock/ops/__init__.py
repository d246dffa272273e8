"""slotlock.ops: what operators and their tools do with a job's lock items, beside the racers' protocol.

- :mod:`slotlock.ops.history`: a job's history, every generation, by Query on the history index
  (:class:`SlotHistory`, :class:`HistoryRecord`, :class:`HistoryPage`);
- :mod:`slotlock.ops.admin`: the operator actions on the lock items (:func:`pause`, :func:`resume`,
  :func:`release`, :func:`bump_fencing_token`; :class:`OperatorAction`, :class:`FenceBump`);
- :mod:`slotlock.ops.requests`: manual-run requests, a new generation of a past slot
  (:func:`request_generation`, :func:`find_requested`; :class:`GenerationRequest`).

The racers never import this package; it imports the core (:class:`slotlock.SlotLock`, the layout, the write
builder), never the other way round. Every name here is also importable from where slotlock 1.x has it
(``slotlock``, ``slotlock.history``, ``slotlock.manual``: docs/compatibility.md).
"""

from .admin import FenceBump, OperatorAction, bump_fencing_token, pause, release, resume
from .history import HistoryPage, HistoryRecord, SlotHistory
from .requests import GenerationRequest, find_requested, request_generation

__all__ = [
    "FenceBump",
    "GenerationRequest",
    "HistoryPage",
    "HistoryRecord",
    "OperatorAction",
    "SlotHistory",
    "bump_fencing_token",
    "find_requested",
    "pause",
    "release",
    "request_generation",
    "resume",
]
