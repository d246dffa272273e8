"""Key layout, attribute names and the named condition clauses of the lock table (no I/O).

Every expression :class:`slotlock._dynamodb.SlotLock` sends is built from these names and clauses; each
clause group carries the timeline it decides. Attribute names always go through
``ExpressionAttributeNames`` (``#name``), values through ``ExpressionAttributeValues`` (``:value``).
Condition expressions: https://docs.aws.amazon.com/amazondynamodb/latest/developerguide/Expressions.ConditionExpressions.html
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from . import _wire as wire
from . import table
from ._wire import both, checked, either, update, write

if TYPE_CHECKING:
    from ._dynamodb import LockContext
    from .slot import Slot

# --- attribute names (all go through ExpressionAttributeNames) --------------------------------------
PK = table.PARTITION_KEY
JOB = "job"
TOKEN = "fencing_token"
OWNER = "owner_id"
EXPIRES = "lease_expires_at_ms"
ACQUIRED = "acquired_at_ms"
LEASE_SLOT = "lease_slot_epoch_s"
PREV_OWNER = "previous_owner_id"
PREV_SLOT = "previous_slot_epoch_s"
LAST_FIN_SLOT = "last_finished_slot_epoch_s"
LAST_FIN_OUTCOME = "last_finished_outcome"
LAST_FIN_TOKEN = "last_finished_token"
LAST_FIN_AT = "last_finished_at_ms"
LAST_OK_SLOT = "last_succeeded_slot_epoch_s"
LAST_OK_AT = "last_succeeded_at_ms"
MISSED_SLOTS = "missed_slots_epoch_s"  # Number Set: slots recorded MISSED while not acquired (never acquirable)
# a give-back (SlotRun.give_back): why the lease slot's last holder gave it back unfinished (live lock item only);
# the next acquisition removes it, copying it to PREV_GIVEN_BACK (absent, or NULL: not given back)
GIVEN_BACK = "given_back_reason"
PREV_GIVEN_BACK = "previous_given_back_reason"
# pause (live lock item): the acquire condition reads PAUSED_THROUGH; PAUSED and the audit are for people
PAUSED = "paused"  # BOOL
PAUSED_THROUGH = "paused_through_slot_epoch_s"  # slots at or before this epoch are not acquired (but a running one)
PAUSE_REASON = table.PAUSE_REASON
PAUSED_BY = table.PAUSED_BY
PAUSED_AT = "paused_at_ms"
RESUMED_BY = "resumed_by"
RESUMED_AT = "resumed_at_ms"
# an operator's release of a lease (live or manual lock item): who, when, why, which token was fenced out
RELEASED_BY = "released_by"
RELEASED_AT = "released_at_ms"
RELEASE_REASON = "release_reason"
RELEASED_TOKEN = "released_fencing_token"
# generations: the manual lock item's lease names its generation; slot items carry theirs
LEASE_GENERATION = "lease_generation"
PREV_GENERATION = "previous_generation"
LAST_FIN_GENERATION = "last_finished_generation"
LAST_GENERATION = "last_generation"  # a slot's generation counter
GENERATION = "generation"
RUN_ID = "run_id"  # the operator command that requested a generation (a backfill resumes by it)
RUN_KIND = "run_kind"  # run | rerun | backfill
REQUESTED_BY = "requested_by"
REQUESTED_AT = "requested_at_ms"
REQUEST_REASON = "request_reason"
# slot items
SLOT = "slot"
SLOT_EPOCH = "slot_epoch_s"
STATUS = "status"
REASON = "reason"
STATE_JSON = "state_json"
SUMMARY_JSON = "summary_json"
ERROR_JSON = "error_json"
STARTED_AT = "started_at_ms"
FINISHED_AT = "finished_at_ms"
TTL = table.TTL_ATTRIBUTE
RECORD_ID = "record_id"  # a random id per MISSED write: an SDK resend of our own applied write is recognised

STATUS_REQUESTED = table.STATUS_REQUESTED
STATUS_RUNNING = table.STATUS_RUNNING
STATUS_SUCCEEDED = table.STATUS_SUCCEEDED
STATUS_FAILED = table.STATUS_FAILED
STATUS_MISSED = table.STATUS_MISSED
TERMINAL_STATUSES = table.TERMINAL_STATUSES

#: The placeholders of the lock items (live and manual) and of the generation counters: :func:`write` derives each
#: request's ExpressionAttributeNames from the placeholders its expressions use.
LOCK_NAMES: Mapping[str, str] = {
    "#pk": PK,
    "#job": JOB,
    "#token": TOKEN,
    "#owner": OWNER,
    "#expires": EXPIRES,
    "#acquired": ACQUIRED,
    "#lease_slot": LEASE_SLOT,
    "#lease_gen": LEASE_GENERATION,
    "#prev_owner": PREV_OWNER,
    "#prev_slot": PREV_SLOT,
    "#prev_gen": PREV_GENERATION,
    "#given_back": GIVEN_BACK,
    "#prev_given_back": PREV_GIVEN_BACK,
    "#last_fin_slot": LAST_FIN_SLOT,
    "#missed": MISSED_SLOTS,
    "#fin_slot": LAST_FIN_SLOT,
    "#fin_outcome": LAST_FIN_OUTCOME,
    "#fin_token": LAST_FIN_TOKEN,
    "#fin_at": LAST_FIN_AT,
    "#fin_gen": LAST_FIN_GENERATION,
    "#ok_slot": LAST_OK_SLOT,
    "#ok_at": LAST_OK_AT,
    "#paused": PAUSED,
    "#paused_through": PAUSED_THROUGH,
    "#pause_reason": PAUSE_REASON,
    "#paused_by": PAUSED_BY,
    "#paused_at": PAUSED_AT,
    "#resumed_by": RESUMED_BY,
    "#resumed_at": RESUMED_AT,
    "#released_by": RELEASED_BY,
    "#released_at": RELEASED_AT,
    "#release_reason": RELEASE_REASON,
    "#released_token": RELEASED_TOKEN,
    "#last": LAST_GENERATION,
    "#slot": SLOT,
}

# --- the table layout (slotlock.table.SCHEMA_VERSION), checked by every conditional write ----------------
# Timeline of any item's layout, as seen by a write of this slotlock (layout 1), whatever the item:
#
#   item absent                                     -> the write's own condition decides; the item is
#                                                      created with schema_version = 1
#   item without schema_version (written before      -> layout 1: the write's own condition decides (live lock
#     the attribute existed)                           items and their fencing counters carry over); the
#                                                      write adds schema_version = 1
#   schema_version = 1                              -> the write's own condition decides
#   schema_version = 2, 3, ... (a newer slotlock)   -> condition false: never overwritten. ALL_OLD (or the
#     or not a Number (an edited item)                 cancellation reason's item) shows the version: the
#                                                      writer raises UnsupportedSchemaVersionError before
#                                                      judging anything else, with no extra request and
#                                                      no retry (slotlock._client, slotlock.codec)
# Every write is made by slotlock._wire.write: its condition is a Condition (SCHEMA_COMPATIBLE first, then the
# write's own clauses, checked()), its update an UpdateExpression (the attribute set at the end of its SET
# clause, update()), or its Put item carries the attribute.
SCHEMA_VERSION_ATTR = wire.SCHEMA_VERSION_ATTR  # the attribute (its value: table.SCHEMA_VERSION)
SCHEMA_COMPATIBLE = wire.SCHEMA_COMPATIBLE  # "(attribute_not_exists(#schema_version) OR #schema_version = ...)"
SCHEMA_VERSION_SET = wire.SCHEMA_VERSION_SET  # "#schema_version = :schema_version"

# --- named condition clauses ------------------------------------------------------------------------
# Timeline of one job's lock item, as seen by a racer for slot S (":slot" = S.epoch_s, ":now" = caller clock):
#
#   lock item absent (fresh table)                          -> ACQUIRE, token 1
#   lock item present without a fencing token (tampered)    -> condition false: CorruptLockItemError (an ADD
#                                                              would silently restart the counter at 1)
#   last finished slot  < S, no lease or lease expired      -> ACQUIRE (token + 1); same-slot holder = TAKEOVER
#   last finished slot  < S, lease held by us for S         -> RE-ENTER (our own Lambda retry), token + 1
#   last finished slot  < S, lease of another owner valid   -> LOSE "held" (slot S) / "overrun" (older slot)
#   last finished slot >= S                                 -> LOSE "slot_finished" (= S) / "superseded" (> S)
#   latest acquired slot > S                                -> LOSE "superseded": an older slot never runs
#                                                              after a newer one started
#   S in the missed slots (recorded MISSED, never acquired) -> LOSE "slot_finished": a MISSED slot never runs
#   S <= paused through (an operator paused the job), and S  -> LOSE "paused" (one racer records it MISSED
#     is not the slot already acquired (that one may finish)     "paused" with one conditional PutItem)
#   lock item of a newer table layout (schema_version 2), or  -> condition false, whatever the lease says:
#     one whose schema_version is not a Number                   UnsupportedSchemaVersionError from ALL_OLD
#                                                                (SCHEMA_COMPATIBLE, checked before the rest)
LOCK_ITEM_ABSENT = "attribute_not_exists(#pk)"
TOKEN_PRESENT = "attribute_exists(#token)"
SLOT_NOT_FINISHED = "(attribute_not_exists(#last_fin_slot) OR #last_fin_slot < :slot)"
SLOT_NOT_SUPERSEDED = "(attribute_not_exists(#lease_slot) OR #lease_slot <= :slot)"
LEASE_FREE_OR_EXPIRED = "(attribute_not_exists(#owner) OR #expires <= :now)"
LEASE_OURS_FOR_SLOT = "(#owner = :owner AND #lease_slot = :slot)"
SLOT_NOT_MISSED = "NOT contains(#missed, :slot)"
# While paused, PAUSED_THROUGH is far in the future; resuming sets it to the resume minute, so a paused
# slot's late delivery never runs after the resume either (its MISSED "paused" record is final).
SLOT_NOT_PAUSED = "(attribute_not_exists(#paused_through) OR #paused_through < :slot OR #lease_slot = :slot)"
ACQUIRE_CONDITION = checked(
    either(
        LOCK_ITEM_ABSENT,
        both(
            TOKEN_PRESENT,
            SLOT_NOT_FINISHED,
            SLOT_NOT_SUPERSEDED,
            SLOT_NOT_MISSED,
            SLOT_NOT_PAUSED,
            either(LEASE_FREE_OR_EXPIRED, LEASE_OURS_FOR_SLOT),
        ),
    )
)
# The previous holder is copied before being overwritten: update operands read the item as it was
# before this update, so a successor learns from ALL_NEW whom it replaced, at no extra request. So is the
# previous holder's give-back reason (GIVEN_BACK), which every acquisition removes: a slot given back and then
# superseded is recorded MISSED with that reason (e.g. "capacity"), while a comeback that re-acquires the slot
# clears it (its own give-back, if any, sets it again).
ACQUIRE_UPDATE = update(
    ("REMOVE", ["#given_back"]),
    (
        "SET",
        (
            "#prev_owner = if_not_exists(#owner, :null), #prev_slot = if_not_exists(#lease_slot, :null), "
            "#prev_given_back = if_not_exists(#given_back, :null), #owner = :owner, #expires = :expires, "
            "#acquired = :now, #lease_slot = :slot, #job = :job"
        ),
    ),
    ("ADD", ["#token :one"]),
)
# Timeline of one job's manual lock item, as seen by a manual run of slot S, generation G (":gen" = G):
#
#   absent (no manual run yet)                              -> ACQUIRE, manual token 1
#   present without a fencing token (tampered)              -> condition false: CorruptLockItemError
#   no lease, or lease expired                              -> ACQUIRE (token + 1); same (S, G) = TAKEOVER
#   lease held by us for (S, G)                             -> RE-ENTER (our own Lambda retry), token + 1
#   lease of another owner valid                            -> LOSE "held" (same S, G) / "busy" (another run)
# The live lock item is never read nor written: a manual run never delays, nor is delayed by, a live racer.
MANUAL_LEASE_OURS = "(#owner = :owner AND #lease_slot = :slot AND #lease_gen = :gen)"
MANUAL_ACQUIRE_CONDITION = checked(
    either(LOCK_ITEM_ABSENT, both(TOKEN_PRESENT, either(LEASE_FREE_OR_EXPIRED, MANUAL_LEASE_OURS)))
)
MANUAL_ACQUIRE_UPDATE = update(
    (
        "SET",
        (
            "#prev_owner = if_not_exists(#owner, :null), #prev_slot = if_not_exists(#lease_slot, :null), "
            "#prev_gen = if_not_exists(#lease_gen, :null), #owner = :owner, #expires = :expires, "
            "#acquired = :now, #lease_slot = :slot, #lease_gen = :gen, #job = :job"
        ),
    ),
    ("ADD", ["#token :one"]),
)
# Renew, record state, commit and release are all conditional on owner AND fencing token (never a clock), and on
# the layout: a holder whose lock item a newer slotlock rewrote gets UnsupportedSchemaVersionError, not a lost lease.
OWNER_AND_TOKEN_MATCH = "#owner = :owner AND #token = :token"
HOLDER_CONDITION = checked(OWNER_AND_TOKEN_MATCH)
#: A holder's renewal (heartbeat, and the renewal inside record_state) and release: the lease's new expiry.
LEASE_EXPIRY_UPDATE = update(("SET", ["#expires = :expires"]))
#: A live holder's give-back (a release naming why, e.g. ``capacity``): the expiry, and the reason for a superseder.
GIVE_BACK_UPDATE = update(("SET", ["#expires = :expires", "#given_back = :given_back"]))
# Timeline of one slot's history item (terminal states are final; only RUNNING is ever overwritten):
#
#   absent                  -> RUNNING (record_state of the holder), or a terminal state directly
#   REQUESTED (generation 2+, written by the operator's request) -> RUNNING, SUCCEEDED/FAILED (its holder)
#   RUNNING                 -> RUNNING (a later holder of the same slot), SUCCEEDED/FAILED (its commit),
#                              MISSED "superseded" (the slot can never finish: a newer slot holds the lock),
#                              or MISSED with the give-back reason (e.g. "capacity") when its last holder gave
#                              it back and no comeback re-acquired it before the newer slot did
#   SUCCEEDED/FAILED/MISSED -> never written again: a condition failure, judged by the writer
SLOT_ITEM_ABSENT = "attribute_not_exists(#pk)"
SLOT_NOT_ENDED = f"({SLOT_ITEM_ABSENT} OR #status = :running)"
GENERATION_NOT_ENDED = f"({SLOT_ITEM_ABSENT} OR #status IN (:running, :requested))"
SLOT_WRITE_CONDITION = checked(SLOT_NOT_ENDED)
GENERATION_WRITE_CONDITION = checked(GENERATION_NOT_ENDED)
#: A slot item created once (a MISSED "paused" record, a requested generation): absent, and of our layout.
SLOT_CREATE_CONDITION = checked(SLOT_ITEM_ABSENT)
# A MISSED record of "overrun" or "too_old" is written in one transaction with an update of the lock item
# that adds the slot to its missed slots, on condition that the slot is not the lock's acquired slot at that
# instant (and that the item is not tampered: a fresh item gets fencing token 0, a present one keeps its
# own). SLOT_NOT_MISSED in the acquire condition then refuses the slot for good: a MISSED slot never runs,
# and a running slot is never recorded MISSED. A commit prunes the entries older than its slot (already
# refused by SLOT_NOT_FINISHED), so the set holds at most the slots missed since the last finished one.
SLOT_NOT_ACQUIRED = (
    "(attribute_not_exists(#pk) OR (attribute_exists(#token)"
    " AND (attribute_not_exists(#lease_slot) OR #lease_slot <> :slot)))"
)
MARK_SLOT_MISSED_CONDITION = checked(SLOT_NOT_ACQUIRED)
MARK_SLOT_MISSED = update(("SET", ["#token = if_not_exists(#token, :zero)"]), ("ADD", ["#missed :slots"]))


def slot_item_update(
    ctx: LockContext,
    slot: Slot,
    *,
    status: str,
    now_ms: int,
    attributes: Mapping[str, Mapping[str, Any]],
    started_at_ms: int | None = None,
    generation: int = table.LIVE_GENERATION,
) -> dict[str, Any]:
    """The one builder of slot-item writes: an ``Update`` (for UpdateItem or a TransactWriteItems entry) of
    ``slot``'s history item of ``generation`` on ``ctx``'s table, written at ``now_ms`` (its TTL from it).

    Sets the slot's identity (job, slot, epoch, ``generation``), ``status``, the TTL attribute and
    ``attributes`` (name -> DynamoDB JSON value), ``started_at_ms`` only if the item has none yet, and the
    layout (:data:`SCHEMA_VERSION_ATTR`, last). Conditioned on :data:`SLOT_WRITE_CONDITION` (the layout, and
    :data:`SLOT_NOT_ENDED`: a terminal record is never overwritten; for a generation >= 2,
    :data:`GENERATION_WRITE_CONDITION`, which also accepts the operator's REQUESTED record), ``ALL_OLD`` on
    failure. Placeholders are ``#<attribute>`` / ``:<attribute>``.
    """
    values: dict[str, Mapping[str, Any]] = {
        JOB: {"S": ctx.job_name},
        SLOT: {"S": slot.iso},
        SLOT_EPOCH: {"N": str(slot.epoch_s)},
        GENERATION: {"N": str(generation)},
        STATUS: {"S": status},
        TTL: {"N": str(ctx.ttl_epoch_s(now_ms))},
        **attributes,
    }
    assignments = [f"#{name} = :{name}" for name in values]
    names = {f"#{name}": name for name in (*values, STARTED_AT)} | {"#pk": PK, "#status": STATUS}
    placeholders: dict[str, Mapping[str, Any]] = {f":{name}": value for name, value in values.items()}
    if started_at_ms is not None:
        assignments.append(f"#{STARTED_AT} = if_not_exists(#{STARTED_AT}, :{STARTED_AT})")
        placeholders[f":{STARTED_AT}"] = {"N": str(started_at_ms)}
    placeholders[":running"] = {"S": STATUS_RUNNING}
    condition = SLOT_WRITE_CONDITION
    if generation != table.LIVE_GENERATION:
        placeholders[":requested"] = {"S": STATUS_REQUESTED}
        condition = GENERATION_WRITE_CONDITION
    return write(
        ctx.table_name,
        key=table.slot_key(ctx.job_name, slot.iso, generation),
        expression=update(("SET", assignments)),
        condition=condition,
        names=names,
        values=placeholders,
    )


# --- the capacity semaphore (slotlock.semaphore) ------------------------------------------------------
# Permit items ``permit#<name>#<i>``: who holds the permit (the owner is a slot's query: job, slot,
# generation), under which fencing token (the job lease's), until when (the lease's expiry, renewed with the
# heartbeat), and the query it stands for once started.
PERMIT_OWNER = "permit_owner"  # "<job>#<slot iso>#g<generation>"
PERMIT_TOKEN = "permit_fencing_token"
PERMIT_EXPIRES = "permit_expires_at_ms"
PERMIT_QUERY = "query_execution_id"
PERMIT_ACQUIRED = "permit_acquired_at_ms"
PERMIT_SEMAPHORE = "semaphore"
PERMIT_INDEX = "permit_index"
PERMIT_PREV_OWNER = "previous_permit_owner"  # whom a reclaim or an inheritance replaced (audit)
PERMIT_PREV_TOKEN = "previous_permit_fencing_token"
PERMIT_PREV_QUERY = "previous_query_execution_id"
PERMIT_LAST_OWNER = "last_permit_owner"  # set by a release: a resend of our own release is recognised
PERMIT_LAST_TOKEN = "last_permit_fencing_token"
PERMIT_RELEASED_AT = "permit_released_at_ms"
# Set by every take: a query may be started under the permit; while it names none, it stays counted this long
# past its expiry (the longest a query can stay active). Kept by renew, record and inherit; removed by release.
PERMIT_START_MAY_FOLLOW = "permit_start_may_follow_ms"
# The tickets item ``tickets#<name>``: the ticket counter, and the waiters by waiter id (= permit owner).
NEXT_TICKET = "next_ticket"
WAITER_TICKETS = "waiter_tickets"  # Map: waiter id -> ticket number
WAITER_EXPIRES = "waiter_expires_at_ms"  # Map: waiter id -> epoch ms after which the waiter counts as gone
#: The placeholders of the permit items, and of the tickets item (``#me``, a waiter id, is a request's own).
PERMIT_NAMES: Mapping[str, str] = {
    "#pk": PK,
    "#owner": PERMIT_OWNER,
    "#token": PERMIT_TOKEN,
    "#expires": PERMIT_EXPIRES,
    "#query": PERMIT_QUERY,
    "#acquired": PERMIT_ACQUIRED,
    "#semaphore": PERMIT_SEMAPHORE,
    "#index": PERMIT_INDEX,
    "#prev_owner": PERMIT_PREV_OWNER,
    "#prev_token": PERMIT_PREV_TOKEN,
    "#prev_query": PERMIT_PREV_QUERY,
    "#last_owner": PERMIT_LAST_OWNER,
    "#last_token": PERMIT_LAST_TOKEN,
    "#released_at": PERMIT_RELEASED_AT,
    "#start_may_follow": PERMIT_START_MAY_FOLLOW,
}
TICKET_NAMES: Mapping[str, str] = {
    "#pk": PK,
    "#waiters": WAITER_TICKETS,
    "#waiter_expires": WAITER_EXPIRES,
    "#next": NEXT_TICKET,
}

# Timeline of one permit item, as seen by owner O (job, slot, generation, deployment) with fencing token T at
# ":now". Every take restates what the taker read, so any write in between (a renew, another taker) makes it
# fail. A take marks the permit "start may follow" (F ms: the longest a query can stay active, Athena's DML
# query timeout), in the same write:
#
#   absent, or released (no owner)                    -> TAKE FREE: owner O, token T, expiry E, F, no query
#   owner P, no query, expiry + F <= now              -> TAKE EXPIRED-NO-QUERY (reclaim): restates P, its token,
#     (F absent: a take by slotlock 1.0, F = 0)          its expiry, its F and the absence of a query. A start
#                                                        whose answer was lost ran at most F past the expiry
#   owner P, no query, expiry <= now < expiry + F     -> not taken: P may have started a query it never recorded
#   owner P, expiry <= now, query Q, Q terminal       -> RECLAIM TERMINAL-QUERY: restates P, token, expiry, Q
#     (the caller's query_is_terminal(Q), or it stopped Q)
#   owner P, expiry <= now, query Q not terminal      -> not taken: Q still counts against the quota
#   owner P, expiry > now                             -> not taken (held)
#   owner O, token T' < T                             -> INHERIT: token T, expiry E, Q and F kept (same query: a
#                                                        takeover never takes a second permit)
#   owner O, token T                                  -> ours already (an SDK resend of our applied take)
#   owner O, token T' > T                             -> refused: we are a stale holder
#   owner O' of another deployment, same job and slot -> another owner (its id names its deployment): never
#                                                        inherited, never "ours"
#
#   P renews between a reclaimer's read and its write -> the reclaim fails (expiry restated): RENEW WINS
PERMIT_FREE = "attribute_not_exists(#owner)"
PERMIT_AS_READ = "(#owner = :seen_owner AND #token = :seen_token AND #expires = :seen_expires)"
PERMIT_EXPIRED = "#expires <= :now"
PERMIT_NO_QUERY = "attribute_not_exists(#query)"
PERMIT_SAME_QUERY = "#query = :seen_query"
# ":quiet_since" = now - F as read: the expiry lies at least F in the past.
PERMIT_START_WINDOW_OVER = "#expires <= :quiet_since"
TAKE_EXPIRED_NO_QUERY = f"{PERMIT_AS_READ} AND {PERMIT_START_WINDOW_OVER} AND {PERMIT_NO_QUERY}"
RECLAIM_TERMINAL_QUERY = f"{PERMIT_AS_READ} AND {PERMIT_EXPIRED} AND {PERMIT_SAME_QUERY}"
PERMIT_INHERIT = "(#owner = :owner AND #token = :seen_token AND #token < :token)"
# A take (free or reclaimed) writes the whole holder and forgets any query; an inheritance keeps the query.
# Every permit write sets the layout and is conditioned on it too (PermitBook.update: write()).
PERMIT_TAKE_UPDATE = update(
    (
        "SET",
        (
            "#prev_owner = if_not_exists(#owner, :null), #prev_token = if_not_exists(#token, :null), "
            "#prev_query = if_not_exists(#query, :null), #owner = :owner, #token = :token, #expires = :expires, "
            "#acquired = :now, #semaphore = :semaphore, #index = :index, #start_may_follow = :start_may_follow"
        ),
    ),
    ("REMOVE", ["#query"]),
)
PERMIT_INHERIT_UPDATE = update(
    (
        "SET",
        ["#prev_owner = #owner", "#prev_token = #token", "#token = :token", "#expires = :expires", "#acquired = :now"],
    )
)
# Timeline of a holder's own writes (owner O, token T); all conditional on owner AND token, never a clock:
#
#   RENEW:        owner O, token T                 -> expiry = the lease's new expiry (only while the permit
#                                                     names no query, or its expiry would end before the lease)
#   RECORD QUERY: owner O, token T, no query or Q  -> query = Q and expiry = the holder's invocation deadline
#                                                     + the takeover window (once StartQueryExecution answered;
#                                                     no renewal after it, whatever the query's length)
#   RELEASE:      owner O, token T                 -> owner, token, expiry, query, F removed; last owner O,
#                                                     last token T kept (a resend finds them: ours)
#   STALE:        owner O, token T' > T            -> refused (StalePermitTokenError): a newer holder of
#                                                     the same query inherited the permit
#   GONE:         another owner, or none           -> release: "gone" (a clear result, never raised);
#                                                     renew/record: PermitLostError (reclaimed)
PERMIT_OURS = "(#owner = :owner AND #token = :token)"
PERMIT_QUERY_UNSET_OR_SAME = "(attribute_not_exists(#query) OR #query = :query)"
PERMIT_RECORD_QUERY = f"{PERMIT_OURS} AND {PERMIT_QUERY_UNSET_OR_SAME}"
PERMIT_RENEW_UPDATE = update(("SET", ["#expires = :expires"]))
PERMIT_RECORD_QUERY_UPDATE = update(("SET", ["#query = :query"]))
PERMIT_RECORD_QUERY_EXPIRY_UPDATE = update(("SET", ["#query = :query", "#expires = :expires"]))
PERMIT_RELEASE_UPDATE = update(
    ("SET", ["#last_owner = :owner", "#last_token = :token", "#released_at = :now"]),
    ("REMOVE", ["#owner", "#token", "#expires", "#query", "#start_may_follow"]),
)
# Timeline of the tickets item, as seen by waiter W (= its permit owner) at ":now":
#
#   absent                                  -> created once (conditional PutItem: next ticket 0, empty maps)
#   W not waiting                           -> REGISTER: W's ticket = next ticket, next ticket + 1 (ADD),
#                                              W's expiry = now + waiter TTL (one UpdateItem, ALL_NEW)
#   W waiting already (a resend, a retry)   -> refused by the condition; ALL_OLD shows W's ticket: kept
#   W waiting                               -> TOUCH: W's expiry renewed (while it polls), ticket unchanged
#   W took a permit or gives up             -> LEAVE: W's entries removed
# A waiter whose expiry passed is gone: it no longer blocks later tickets (it may come back: TOUCH fails,
# it registers again and gets a new, later ticket).
TICKETS_READY = "attribute_exists(#waiters)"
WAITER_ABSENT = "attribute_not_exists(#waiters.#me)"
WAITER_REGISTER_SET = ("#waiters.#me = if_not_exists(#next, :zero)", "#waiter_expires.#me = :expires")
WAITER_REGISTER_ADD = "#next :one"
WAITER_REGISTER_UPDATE = update(("SET", WAITER_REGISTER_SET), ("ADD", [WAITER_REGISTER_ADD]))
WAITER_PRESENT = "#waiters.#me = :ticket"
