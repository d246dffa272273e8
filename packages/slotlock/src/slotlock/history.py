"""A job's history, every generation, by Query on the history index: :mod:`slotlock.ops.history`, re-exported here
where slotlock 1.x has it (docs/compatibility.md)."""

from .ops.history import MAX_PAGE_LIMIT, STATUSES, HistoryPage, HistoryRecord, SlotHistory, decode_record

__all__ = ["MAX_PAGE_LIMIT", "STATUSES", "HistoryPage", "HistoryRecord", "SlotHistory", "decode_record"]
