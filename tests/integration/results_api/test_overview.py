"""``results_api.overview``: the custom widget's ``{"view": "overview"}`` mode, every job of the deployment in one
HTML table. The HTML is parsed (``html.parser``), never string-matched: what a browser would build from it is
what is checked.

The states are written by the real writers (the lock, the results store, the operator's pause), on top of the
conftest's ``world`` (a running job, a paused one, one that never ran, a tampered lock item). Like
``test_widget.py``, this module runs on moto only: the overview adds HTML and request bounds over batched reads
whose DynamoDB behaviour ``test_reader.py`` covers on both backends.
"""

from __future__ import annotations

import datetime as dt
from collections.abc import Callable
from html.parser import HTMLParser
from typing import Any

import pytest

from athena_refresh.catalog import CatalogQuery, CatalogSchedule
from athena_refresh.cost import format_usd
from athena_refresh.engine import Column, QueryResult, QueryStatistics
from athena_refresh.results import ResultsStore
from results_api import handler, overview
from results_api.freshness import latest_with_freshness
from results_api.overview import NEVER_RUN, read_overview
from results_api.overview_html import duration, render_overview
from results_api.reader import ResultsReader
from results_api.widget import DOCUMENTATION, render_widget, widget_response
from slotlock import Lease, Loss, Slot, SlotLock, pause

JOB = "flights-dashboard"  # the world's: RUNNING S4 under racer-4's live lease, last success S3
PAUSED_JOB = "carrier-on-time"  # the world's: S0 SUCCEEDED, then paused by the operator; no schedule
IDLE_JOB = "daily-ny"  # the world's: never ran
TAMPERED_JOB = "tampered"  # the world's: the lock item's fencing token is a String
OPERATOR = "arn:aws:iam::123456789012:user/operator"
HALF_HOURLY = CatalogSchedule("cron(0/30 * * * ? *)", "UTC", 3)
S0, S1, S2, S3, S4 = (Slot.parse(f"2026-11-22T{hh_mm}:00Z") for hh_mm in ("00:00", "00:30", "01:00", "01:30", "02:00"))
STATISTICS = QueryStatistics(
    data_scanned_bytes=1_048_576, engine_execution_time_ms=500, query_queue_time_ms=10, total_execution_time_ms=520
)
COST = {"estimated_cost_usd": 0.000123, "estimate": True, "by_service_usd": {}, "usage": {}, "prices": {}}
MARKUP = "<script>alert(1)</script>"
#: The elements the overview draws (anything else came from a value).
OWN_TAGS = {"p", "b", "table", "thead", "tbody", "tr", "th", "td", "br", "code"}


class Page(HTMLParser):
    """What a browser would build from the overview: every start tag, the paragraphs' text, the header cells, and
    the body's rows (each a list of cell texts, ``<br>`` as a newline) with each cell's colspan."""

    def __init__(self) -> None:
        super().__init__(convert_charrefs=True)
        self.tags: list[str] = []
        self.paragraphs: list[str] = []
        self.headers: list[str] = []
        self.rows: list[list[str]] = []
        self.spans: list[list[int]] = []
        self._in_body = False
        self._buffer: list[str] | None = None

    def handle_starttag(self, tag: str, attrs: list[tuple[str, str | None]]) -> None:
        self.tags.append(tag)
        if tag == "tbody":
            self._in_body = True
        elif tag == "tr" and self._in_body:
            self.rows.append([])
            self.spans.append([])
        elif tag in ("td", "th", "p"):
            self._buffer = []
            if tag == "td":
                self.spans[-1].append(int(dict(attrs).get("colspan") or 1))
        elif tag == "br" and self._buffer is not None:
            self._buffer.append("\n")

    def handle_endtag(self, tag: str) -> None:
        if tag == "tbody":
            self._in_body = False
        if tag not in ("td", "th", "p") or self._buffer is None:
            return
        text, self._buffer = "".join(self._buffer), None
        {"td": lambda: self.rows[-1].append(text), "th": lambda: self.headers.append(text)}.get(
            tag, lambda: self.paragraphs.append(text)
        )()

    def handle_data(self, data: str) -> None:
        if self._buffer is not None:
            self._buffer.append(data)

    def by_job(self) -> dict[str, list[str]]:
        """The body's rows by job (the first cell)."""
        return {row[0]: row for row in self.rows}

    @property
    def order(self) -> list[str]:
        return [row[0] for row in self.rows]


def parse(document: str) -> Page:
    page = Page()
    page.feed(document)
    page.close()
    return page


def columns(row: list[str]) -> dict[str, str]:
    names = ["job", "last slot", "freshness", "last success", "lease", "paused", "result", "fetch"]
    assert len(row) == len(names), row
    return dict(zip(names, row, strict=True))


def acquired(result: Lease | Loss) -> Lease:
    assert isinstance(result, Lease), f"expected a lease, got {result}"
    return result


@pytest.fixture
def run(
    make_lock: Callable[[str], SlotLock], make_store: Callable[..., ResultsStore], clock: Any
) -> Callable[..., int]:
    """``run(job, slot, outcome="succeeded", cost=None, error=None, lock=None)``: the job's live run of ``slot``
    as the runtime commits it (2 s after the slot, 3 s long; a success stores a result, with ``cost`` as its
    estimate); returns the commit time (epoch ms)."""

    def commit(
        job: str,
        slot: Slot,
        outcome: str = "succeeded",
        *,
        cost: dict[str, Any] | None = None,
        error: dict[str, Any] | None = None,
        lock: SlotLock | None = None,
    ) -> int:
        lock = lock or make_lock(job)
        clock.now = slot.epoch_ms + 2_000
        lease = acquired(lock.try_acquire(slot, f"racer-{job}"))
        clock.advance(s=3)
        if outcome == "failed":
            lock.commit(lease, outcome="failed", error=error or {"type": "QueryFailed"})
            return int(clock.now)
        store = make_store()
        prepared = store.prepare(
            job_name=job,
            slot_iso=slot.iso,
            fencing_token=lease.fencing_token,
            query_execution_id=f"qe-{job}-{slot.epoch_s}",
            statistics=STATISTICS,
            result=QueryResult(columns=(Column("a", "bigint"),), rows=[{"a": 1}]),
            committed_at_ms=clock.now,
            window=("2013-11-21T00:00:00", "2013-11-22T00:00:00"),
            cost=(lambda _writes, _summary: cost) if cost is not None else None,
        )
        lock.commit(lease, writes=prepared.writes, summary=prepared.summary)
        return int(clock.now)

    return commit


@pytest.fixture
def states(
    world: Any,
    run: Callable[..., int],
    catalog: dict[str, CatalogQuery],
    lock_table: str,
    ddb: Any,
    clock: Any,
) -> dict[str, Any]:
    """Four more half-hourly jobs beside the world's, each in one state at ``now`` (S4 + 7 s, as the world ends):

    - ``fresh``: S4 SUCCEEDED 5 s ago, with a cost estimate;
    - ``failing``: S3 SUCCEEDED, then S4 FAILED (its error's message holds markup);
    - ``missing``: S3 SUCCEEDED, then S4 delivered 2 min late: MISSED ``too_old``;
    - ``stale``: S0 SUCCEEDED two hours ago, nothing since: late (S2's grace is over, S1 and S2 never ran).
    """
    now = clock.now
    run("fresh", S3)
    run("fresh", S4, cost=COST)
    run("failing", S3)
    run("failing", S4, "failed", error={"type": "QueryFailed", "message": f"boom {MARKUP}"})
    late = SlotLock(
        lock_table, "missing", client=ddb, clock_ms=clock, lease_duration_s=30, max_slot_lead_s=None, max_slot_age_s=60
    )
    run("missing", S3, lock=late)
    clock.now = S4.epoch_ms + 120_000
    loss = late.try_acquire(S4, "racer-late")
    assert isinstance(loss, Loss) and loss.reason == "too_old" and loss.missed_recorded
    run("stale", S0)
    clock.now = now
    for job in ("fresh", "failing", "missing", "stale"):
        catalog[job] = CatalogQuery("SELECT 1 AS a", (), schedule=HALF_HOURLY)
    return {"now": now}


def test_every_job_is_one_row_in_its_state_attention_first(
    make_reader: Callable[..., ResultsReader], states: dict[str, Any], world: Any
) -> None:
    # GIVEN jobs in every state WHEN the overview renders at `now`
    now = states["now"]
    page = parse(render_overview(make_reader(), now_ms=now))

    # THEN one row per job of the catalog: the late, failing, failed and unreadable first, then the others, by name
    assert page.headers == [
        "job",
        "last slot",
        "freshness",
        "last success",
        "lease",
        "paused",
        "latest result",
        "fetch the result",
    ]
    assert page.order == [
        "daily-ny",
        "failing",
        "missing",
        "stale",
        "tampered",
        "carrier-on-time",
        "flights-dashboard",
        "fresh",
    ]
    assert page.paragraphs[0] == (
        "8 jobs · 5 need attention (late, failing, failed or unreadable, listed first) · 2 late · "
        "as of 2026-11-22T02:00:07Z (times in UTC)"
    )
    rows = page.by_job()
    # (a catalog without freshness_s: the grace is one shortest period + 300 s, so S2 is the latest slot due)
    next_slot = "next slot 2026-11-22T02:30:00Z"

    # the running job: on time (S3 finished after S2, the slot due); its live lease's holder and expiry
    running = columns(rows[JOB])
    assert running["last slot"] == f"RUNNING {S4.iso}"
    assert running["freshness"] == f"ON TIME · late: no\nthe latest slot due has finished\n{next_slot}"
    assert running["lease"] == "racer-4\nuntil 2026-11-22T02:00:32Z (in 25 s)"
    assert running["last success"] == "30 min ago"
    assert running["paused"] == "no"
    committed = world.committed_at_ms[(S3, 1)]
    assert running["result"] == (
        f"{S3.iso}\ncommitted {dt.datetime.fromtimestamp(committed / 1000, dt.UTC):%Y-%m-%dT%H:%M:%SZ} (30 min ago)"
        f"\nest. cost {format_usd(world.latest_cost['estimated_cost_usd'])}"
    )

    # succeeded a moment ago, with its result's cost estimate
    fresh = columns(rows["fresh"])
    assert (fresh["last slot"], fresh["lease"], fresh["last success"]) == (f"SUCCEEDED {S4.iso}", "free", "2 s ago")
    assert fresh["freshness"].startswith("ON TIME · late: no\n")
    assert fresh["result"] == (
        f"{S4.iso}\ncommitted 2026-11-22T02:00:05Z (2 s ago)\nest. cost {format_usd(COST['estimated_cost_usd'])}"
    )

    # failed: the error's type and message (as text); failing, not late (S4 finished)
    failing = columns(rows["failing"])
    assert failing["last slot"] == f"FAILED {S4.iso}\nQueryFailed: boom {MARKUP}"
    assert failing["freshness"] == (
        f"FAILING · late: no\nslot {S4.iso} FAILED: QueryFailed: boom {MARKUP}\n{next_slot}"
    )
    assert failing["result"].startswith(f"{S3.iso}\n") and failing["result"].endswith("est. cost no estimate")

    # missed, with the reason its history item records: failing too (MISSED for a reason other than paused)
    missing = columns(rows["missing"])
    assert missing["last slot"] == f"MISSED {S4.iso}\ntoo_old: the invocation came after the slot's maximum age"
    assert missing["freshness"].startswith(f"FAILING · late: no\nslot {S4.iso} MISSED: too_old")

    # late: S0 succeeded, nothing since, and S2's grace is over (the stale rule of before is the watchdog's now)
    stale = columns(rows["stale"])
    assert stale["last slot"] == f"SUCCEEDED {S0.iso}"
    assert stale["freshness"] == (
        f"LATE · late: yes\nslot {S2.iso} not finished 2100 s after its firing; last finished slot {S0.iso}\n{next_slot}"
    )
    assert stale["last success"] == "2 h ago"

    # paused: by whom and why; no schedule in its catalog entry, so no freshness state
    paused = columns(rows[PAUSED_JOB])
    assert paused["paused"] == f"yes by {OPERATOR}\nmaintenance"
    assert paused["freshness"] == "UNKNOWN\nno schedule in the catalog"
    assert paused["last success"] == "1 h 59 min ago"

    # never ran: late (no slot of its New York schedule has finished; the grace is 23 h + 300 s)
    idle = columns(rows[IDLE_JOB])
    assert (idle["last slot"], idle["last success"], idle["lease"], idle["paused"], idle["result"]) == (
        NEVER_RUN,
        "never",
        "free",
        "no",
        "no result yet",
    )
    assert idle["freshness"].startswith("LATE · late: yes\n") and "no slot has ever finished" in idle["freshness"]
    assert idle["freshness"].endswith("next slot 2026-11-22T11:00:00Z")  # 06:00 in New York

    # how to fetch each result: the command and the signed route, never a link (it would answer 403)
    assert running["fetch"] == f"python -m tools.results latest --job {JOB}\nGET /jobs/{JOB}/results/latest"
    # the markup of the failure's message is text: no element but the overview's own, no link
    assert set(page.tags) <= OWN_TAGS
    # and the tampered lock item is the error cell of its row, whatever the other jobs show
    assert page.spans[page.order.index(TAMPERED_JOB)] == [1, 6, 1]
    tampered = rows[TAMPERED_JOB]
    assert "fencing_token" in tampered[1] and "must be a Number" in tampered[1]


def test_each_rows_freshness_is_what_latest_says(
    make_reader: Callable[..., ResultsReader], states: dict[str, Any], world: Any, clock: Any
) -> None:
    """One function (results_api.freshness): the overview's freshness of each job is latest's, key for key."""
    reader = make_reader()
    rows = {row.job: row for row in read_overview(reader, now_ms=clock.now)}
    compared = 0
    for job, row in rows.items():
        if row.problem is not None or row.cost_of is None:
            continue  # the tampered lock item; a job without a result (latest answers 404)
        assert row.freshness == latest_with_freshness(reader, job)[1], job
        compared += 1
    assert compared == 6
    assert {job: (row.freshness or {}).get("state") for job, row in rows.items()} == {
        "daily-ny": "late",
        "failing": "failing",
        "missing": "failing",
        "stale": "late",
        "tampered": None,
        "carrier-on-time": None,
        JOB: "on_time",
        "fresh": "on_time",
    }


def test_a_lease_past_its_expiry_is_free_and_its_slot_says_so(
    make_reader: Callable[..., ResultsReader], world: Any
) -> None:
    # GIVEN the running job's holder crashed: the clock passes its lease's expiry
    now = world.held_lease.expires_at_ms + 1_000
    [row] = [row for row in read_overview(make_reader(), now_ms=now) if row.job == JOB]
    # THEN no holder is shown, and the slot is still RUNNING on record, its lease expired
    assert (row.lease_owner_id, row.lease_expires_at_ms) == (None, None)
    assert (row.status, row.slot_iso) == ("RUNNING", S4.iso)
    assert row.detail is not None and row.detail.startswith("lease expired")


def test_every_value_is_escaped(
    make_reader: Callable[..., ResultsReader],
    make_lock: Callable[[str], SlotLock],
    catalog: dict[str, CatalogQuery],
    run: Callable[..., int],
    clock: Any,
) -> None:
    # GIVEN markup wherever a writer takes text: the holder, the pause's author and reason (a failure's error:
    # the test above)
    catalog["hostile"] = CatalogQuery("SELECT 1 AS a", (), schedule=HALF_HOURLY)
    lock = make_lock("hostile")
    run("hostile", S3)
    clock.now = S4.epoch_ms + 1_000
    lock.try_acquire(S4, f"<b>{MARKUP}</b>")
    pause(lock, reason=f"{MARKUP} & 'quotes'", requested_by='<a href="javascript:alert(1)">me</a>')

    # WHEN the overview renders
    page = parse(render_overview(make_reader(), now_ms=clock.now + 1_000))

    # THEN only the overview's own elements exist, and each value is its text
    assert set(page.tags) <= OWN_TAGS
    hostile = columns(page.by_job()["hostile"])
    assert hostile["lease"].startswith(f"<b>{MARKUP}</b>\n")
    assert hostile["paused"] == f"yes by <a href=\"javascript:alert(1)\">me</a>\n{MARKUP} & 'quotes'"
    assert hostile["last slot"] == f"RUNNING {S4.iso}"


def test_a_corrupt_item_is_its_rows_error_cell_never_a_failure(
    make_reader: Callable[..., ResultsReader],
    world: Any,
    ddb: Any,
    catalog: dict[str, CatalogQuery],
    run: Callable[..., int],
    clock: Any,
) -> None:
    # GIVEN (beside the tampered lock item) a LATEST item whose cost is not JSON, a history item whose error is
    # not JSON, and a lock item whose lease expires past year 9999 (no date can show it)
    for job in ("bad-latest", "bad-slot", "far-lease"):
        catalog[job] = CatalogQuery("SELECT 1 AS a", (), schedule=HALF_HOURLY)
    run("bad-latest", S3)
    ddb.update_item(
        TableName=world.results_table,
        Key={"job": {"S": "bad-latest"}, "slot": {"S": "LATEST"}},
        UpdateExpression="SET cost_json = :bad",
        ExpressionAttributeValues={":bad": {"S": "{not json"}},
    )
    run("bad-slot", S3, "failed")
    ddb.update_item(
        TableName=world.lock_table,
        Key={"pk": {"S": f"slot#bad-slot#{S3.iso}"}},
        UpdateExpression="SET error_json = :bad",
        ExpressionAttributeValues={":bad": {"N": "7"}},
    )
    run("far-lease", S3)
    ddb.update_item(
        TableName=world.lock_table,
        Key={"pk": {"S": "lock#far-lease"}},
        UpdateExpression="SET owner_id = :owner, lease_expires_at_ms = :far",
        ExpressionAttributeValues={":owner": {"S": "racer-x"}, ":far": {"N": str(10**18)}},
    )

    # WHEN the overview renders THEN every job has its row; each unreadable one is a row with one error cell
    page = parse(widget_response({"view": "overview"}, make_reader(), now_ms=clock.now))
    rows = page.by_job()
    assert set(rows) == set(catalog)
    errors = {job: row[1] for job, row in rows.items() if len(row) == 3}
    assert set(errors) == {"tampered", "bad-latest", "bad-slot", "far-lease"}
    assert "cost_json" in errors["bad-latest"] and "error_json" in errors["bad-slot"]
    assert errors["far-lease"].startswith("cannot show this job: ")
    # AND they need attention, listed first (with the idle job: late, no slot of its schedule ever finished)
    assert page.order[:5] == ["bad-latest", "bad-slot", IDLE_JOB, "far-lease", "tampered"]
    assert columns(rows[JOB])["last slot"] == f"RUNNING {S4.iso}"


def test_a_lock_item_of_a_newer_layout_is_its_rows_error_cell(
    make_reader: Callable[..., ResultsReader], world: Any, ddb: Any, clock: Any
) -> None:
    # GIVEN a newer slotlock rewrote the job's live lock item (schema_version 2)
    ddb.update_item(
        TableName=world.lock_table,
        Key={"pk": {"S": f"lock#{JOB}"}},
        UpdateExpression="SET schema_version = :v",
        ExpressionAttributeValues={":v": {"N": "2"}},
    )

    # WHEN the overview renders THEN that job is a row with one error cell naming the layout; the others render
    rows = parse(widget_response({"view": "overview"}, make_reader(), now_ms=clock.now)).by_job()
    assert len(rows[JOB]) == 3 and "UnsupportedSchemaVersionError" in rows[JOB][1]
    assert "schema_version=2" in rows[JOB][1] and "reads and writes layout 1" in rows[JOB][1]  # (cut short)
    assert len(rows["carrier-on-time"]) > 3


def test_a_hundred_and_twenty_jobs_take_eight_batched_reads(
    make_reader: Callable[..., ResultsReader],
    ddb: Any,
    make_lock: Callable[[str], SlotLock],
    catalog: dict[str, CatalogQuery],
    world: Any,
    clock: Any,
    request_log: Any,
) -> None:
    # GIVEN 120 more jobs, each with a committed slot (so each has a history record to read): two written by the
    # lock (one FAILED, one SUCCEEDED), the others copies of their items (moto's transactions take ~0.15 s each)
    many = {f"job-{index:03d}": CatalogQuery("SELECT 1 AS a", (), schedule=HALF_HOURLY) for index in range(120)}
    clock.now = S4.epoch_ms + 2_000
    for job, outcome in (("job-000", "failed"), ("job-001", "succeeded")):
        lock = make_lock(job)
        lock.commit(acquired(lock.try_acquire(S4, f"racer-{job}")), outcome=outcome)
    templates = {
        job: [
            ddb.get_item(TableName=world.lock_table, Key={"pk": {"S": key}}, ConsistentRead=True)["Item"]
            for key in (f"lock#{job}", f"slot#{job}#{S4.iso}")
        ]
        for job in ("job-000", "job-001")
    }
    copies: list[dict[str, Any]] = []
    for index, job in enumerate(many):
        if index > 1:  # every seventh job FAILED, as job-000
            template = "job-000" if index % 7 == 0 else "job-001"
            copies += [
                {**item, "pk": {"S": item["pk"]["S"].replace(template, job)}, "job": {"S": job}}
                for item in templates[template]
            ]
    for start in range(0, len(copies), 25):
        batch = [{"PutRequest": {"Item": item}} for item in copies[start : start + 25]]
        ddb.batch_write_item(RequestItems={world.lock_table: batch})
    catalog.update(many)
    reader = make_reader()

    # WHEN the overview renders
    request_log.clear()
    page = parse(render_overview(reader, now_ms=clock.now))

    # THEN 124 jobs cost 3 BatchGetItem of lock and LATEST items (50 jobs each) and 5 of slot records (100 keys
    # each): the 4 newest firings of each scheduled job (the freshness; the last slot is one of them) and the
    # paused job's last slot. No GetItem, no Query, no request per job
    assert request_log.operations == ["BatchGetItem"] * 8
    batches = request_log.requests("BatchGetItem")
    lock_and_latest = [len(b["RequestItems"][reader.lock_table]["Keys"]) for b in batches[:3]]
    assert lock_and_latest == [50, 50, 24]
    assert [len(b["RequestItems"][reader.results_table]["Keys"]) for b in batches[:3]] == lock_and_latest
    slot_keys = [key["pk"]["S"] for b in batches[3:] for key in b["RequestItems"][reader.lock_table]["Keys"]]
    assert [len(b["RequestItems"][reader.lock_table]["Keys"]) for b in batches[3:]] == [100, 100, 100, 100, 93]
    assert all(set(b["RequestItems"]) == {reader.lock_table} for b in batches[3:])
    half_hourly = [*many, JOB, TAMPERED_JOB]
    firings = [S1, S2, S3, S4]
    daily = [f"slot#{IDLE_JOB}#2026-11-{day}T11:00:00Z" for day in (18, 19, 20, 21)]
    assert sorted(slot_keys) == sorted(
        [f"slot#{job}#{slot.iso}" for job in half_hourly for slot in firings] + daily + [f"slot#{PAUSED_JOB}#{S0.iso}"]
    )
    # AND the LATEST items are read without their rows (cost estimate and pointer only), consistently
    pointer = batches[0]["RequestItems"][reader.results_table]
    assert set(pointer["ExpressionAttributeNames"].values()) == {"job", *overview.POINTER_FIELDS}
    assert all(entry["ConsistentRead"] for b in batches for entry in b["RequestItems"].values())
    # AND every job is one row, the 18 failing ones (and the late idle one, the tampered one) first
    assert len(page.rows) == 124 and len(set(page.order)) == 124
    failed = sorted(job for index, job in enumerate(many) if index % 7 == 0)
    assert page.order[:20] == sorted([*failed, IDLE_JOB, TAMPERED_JOB])


def test_a_dynamodb_failure_is_a_message(make_reader: Callable[..., ResultsReader], world: Any, ddb: Any) -> None:
    ddb.delete_table(TableName=world.lock_table)
    page = parse(render_overview(make_reader(), now_ms=0))
    [message] = page.paragraphs
    assert message.startswith("could not read the jobs' lock and LATEST items") and "table" not in page.tags


def test_an_empty_catalog_says_so(make_reader: Callable[..., ResultsReader], world: Any) -> None:
    assert render_overview(make_reader(catalog={}), now_ms=0) == "<p>This deployment has no jobs.</p>"


@pytest.mark.parametrize(
    ("ms", "shown"),
    [
        (-5, "0 s"),
        (59_999, "59 s"),
        (60_000, "1 min"),
        (31 * 60_000 + 59_000, "31 min"),
        (3_600_000, "1 h"),
        (2 * 3_600_000 + 5 * 60_000, "2 h 5 min"),
        (86_400_000, "1 d"),
        (3 * 86_400_000 + 4 * 3_600_000 + 59_000, "3 d 4 h"),
    ],
)
def test_durations_are_in_their_two_largest_units(ms: int, shown: str) -> None:
    assert duration(ms) == shown


# ---------------------------------------------------------------------------------------------------
# the widget's modes
# ---------------------------------------------------------------------------------------------------
def test_the_per_job_mode_is_unchanged_and_view_selects_the_overview(reader: ResultsReader, world: Any) -> None:
    now = world.committed_at_ms[(S3, 1)] + 75_000
    # WHEN params name a job THEN its latest result, exactly as before
    assert widget_response({"job": JOB}, reader, now_ms=now) == render_widget(reader, JOB, now_ms=now)
    # WHEN the view is the overview THEN every job's row (a job given as well changes nothing)
    for event in ({"view": "overview"}, {"view": "overview", "job": JOB}):
        # (the idle job is late: no slot of its schedule ever finished; the tampered one is unreadable)
        assert parse(widget_response(event, reader, now_ms=now)).order[:2] == [IDLE_JOB, TAMPERED_JOB]
    # WHEN the view is unknown THEN a message naming the views, the value as text
    page = parse(widget_response({"view": "<i>x</i>", "job": JOB}, reader, now_ms=now))
    assert page.paragraphs == [
        "Unknown view '<i>x</i>': the param view takes overview (every job); for one job, give job instead."
    ]
    assert "i" not in page.tags


def test_describe_documents_both_modes(offline_reader: ResultsReader, offline_requests: Any) -> None:
    assert widget_response({"describe": True, "view": "overview"}, offline_reader, now_ms=0) == DOCUMENTATION
    assert "job: flights-dashboard" in DOCUMENTATION and "view: overview" in DOCUMENTATION
    assert offline_requests.operations == []


def test_the_widget_handler_renders_the_overview(
    deployed: None, lambda_context: Any, world: Any, cloudwatch_widget_context: Any
) -> None:
    # GIVEN CloudWatch's event for a widget whose params are {"view": "overview"}
    widget_context = cloudwatch_widget_context({"view": "overview"}, title="Jobs", width=1200, height=600)
    # WHEN the handler gets it THEN the overview of the deployment's jobs (real clock: everything is stale now)
    page = parse(handler.widget_handler({"widgetContext": widget_context, "view": "overview"}, lambda_context))
    assert sorted(page.order) == sorted(world.catalog)
    assert dt.datetime.now(dt.UTC).strftime("%Y-") in page.paragraphs[0]
