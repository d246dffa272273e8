"""What every bench scenario shares: the slots it uses (one fresh minute per cycle or race, in the past), the
barrier and readiness timeouts of its child processes, the no-op job and the run's tables.
"""

from __future__ import annotations

import uuid
from typing import TYPE_CHECKING

from slotlock import Slot

from .backends import make_client

if TYPE_CHECKING:
    from collections.abc import Sequence

    from .backends import Endpoint
    from .contenders import Contender

#: Slots are minutes from here on, one fresh slot per cycle or race.
BASE_SLOT_EPOCH_S = Slot.parse("2024-01-01T00:00:00Z").epoch_s  # past: slotlock refuses future slots
BARRIER_FIRST_TIMEOUT_S = 180.0  # covers spawning and importing in every racer (32 processes on 2 cores)
BARRIER_TIMEOUT_S = 60.0
HOLDER_READY_TIMEOUT_S = 120.0


def slot_at(index: int) -> Slot:
    return Slot(BASE_SLOT_EPOCH_S + 60 * index)


def noop() -> None:
    """The job: nothing, so the figures are the locking alone."""


def new_run_id() -> str:
    return uuid.uuid4().hex[:10]


def create_tables(endpoint: Endpoint, run_id: str, contenders: Sequence[type[Contender]]) -> None:
    client = make_client(endpoint)
    for contender in contenders:
        contender.create_tables(client, run_id)
