"""Every DynamoDB request of the scripted scenario equals its golden twin, placeholder names aside.

The golden transcript, ``tests/fixtures/golden/slotlock_requests.json``, was recorded before slotlock's internals
were refactored (issue 32, item 5): the refactor may rename ``#name``/``:value`` placeholders, nothing else of a
request (whitespace and clause order included), and must send the same requests in the same order. The scenario
(:mod:`tests.golden.scenario`) runs on in-process moto with a fake clock; requests are recorded at botocore's
``before-call`` and normalised by :mod:`tests.golden.recorder` and :mod:`tests.golden.normalise`.

On a difference the test names the request's position, its scenario step and the first differing key. If the change
is intended (a deliberate new request shape, reviewed), regenerate the file explicitly and review its diff::

    SLOTLOCK_GOLDEN_UPDATE=1 .venv/bin/python -m pytest -q tests/integration/golden/test_golden_requests.py
    git diff tests/fixtures/golden/

The update runs the scenario twice and refuses to write a transcript that differs between the two runs; the test is
then reported as skipped (so that an update can never pass for a comparison). Nothing regenerates the file otherwise.
"""

from __future__ import annotations

import json
import os
from pathlib import Path
from typing import Any

import boto3
import moto
import pytest

from tests.golden.recorder import compare
from tests.golden.scenario import run_scenario

GOLDEN = Path(__file__).resolve().parents[2] / "fixtures" / "golden" / "slotlock_requests.json"
UPDATE_VARIABLE = "SLOTLOCK_GOLDEN_UPDATE"
ABOUT = (
    "Every DynamoDB request of tests/golden/scenario.py, in order, as sent (botocore before-call body), random ids "
    "labelled and placeholders renamed canonically (tests/golden/recorder.py, tests/golden/normalise.py). "
    "Regenerate only on purpose: see tests/integration/golden/test_golden_requests.py."
)
#: Every operation slotlock sends in the scenario; a regenerated file missing one is refused.
OPERATIONS = {"UpdateItem", "PutItem", "GetItem", "BatchGetItem", "TransactWriteItems", "Query"}
#: Each area of the brief must have steps in the transcript.
AREAS = ("lock: ", "manual: ", "admin: ", "semaphore: ", "tickets: ", "history: ")


def scenario_transcript() -> list[dict[str, Any]]:
    """The scenario on a fresh in-process moto (fake credentials, us-east-1)."""
    with moto.mock_aws():
        session = boto3.session.Session(
            aws_access_key_id="testing", aws_secret_access_key="testing", region_name="us-east-1"
        )
        return run_scenario(session.client("dynamodb"))


def check_coverage(entries: list[dict[str, Any]]) -> None:
    operations = {entry["operation"] for entry in entries}
    assert OPERATIONS <= operations, f"operations never sent: {sorted(OPERATIONS - operations)}"
    for area in AREAS:
        assert any(entry["step"].startswith(area) for entry in entries), f"no step of {area!r}"


def test_every_request_equals_its_golden_twin() -> None:
    # GIVEN the scenario's requests today, WHEN compared one by one with the golden transcript
    transcript = scenario_transcript()
    if os.environ.get(UPDATE_VARIABLE) == "1":
        again = scenario_transcript()
        problem = compare(transcript, again)
        assert problem is None, f"the scenario is not deterministic, nothing written: {problem}"
        check_coverage(transcript)
        GOLDEN.parent.mkdir(parents=True, exist_ok=True)
        document = {"about": ABOUT, "requests": transcript}
        GOLDEN.write_text(json.dumps(document, indent=1, ensure_ascii=False) + "\n", encoding="utf-8")
        pytest.skip(f"{UPDATE_VARIABLE}=1: {GOLDEN} rewritten ({len(transcript)} requests); review its git diff")
    if not GOLDEN.exists():
        pytest.fail(f"{GOLDEN} is missing: record it with {UPDATE_VARIABLE}=1 (see this module's docstring)")
    golden = json.loads(GOLDEN.read_text(encoding="utf-8"))["requests"]
    # THEN every request equals its twin, in the same order
    problem = compare(golden, transcript)
    if problem is not None:
        pytest.fail(
            f"{problem}\n(requests must not change but for placeholder names; if this change is intended, "
            f"regenerate with {UPDATE_VARIABLE}=1 and review the diff)",
            pytrace=False,
        )


def test_the_golden_transcript_covers_every_area_and_operation() -> None:
    golden = json.loads(GOLDEN.read_text(encoding="utf-8"))["requests"]
    check_coverage(golden)
    # each step sent at least one request, each entry is one request with its label
    assert all(set(entry) == {"step", "operation", "request"} for entry in golden)
