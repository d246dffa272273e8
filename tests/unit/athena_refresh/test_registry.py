"""The job registry's format (:mod:`athena_refresh.registry`): what a job stack writes, what the tools read back."""

from __future__ import annotations

import json

import pytest

from athena_refresh.registry import (
    KEYS,
    MAX_VALUE_BYTES,
    JobRegistryEntry,
    RegistryEntryError,
    entry_value,
    job_path,
    named_job,
    parameter_name,
    parse_entry,
    registry_path,
)

ENTRY = JobRegistryEntry(
    job="flights-dashboard",
    function_name="ScheduledAthenaRefresh-Jobs-03-JobflightsdashboardRefresh-1A2B3C",
    stack="ScheduledAthenaRefresh-Jobs-03",
    schedule_expression="cron(0/30 * * * ? *)",
    schedule_timezone="UTC",
    racers=3,
    log_group_name="/aws/lambda/ScheduledAthenaRefresh-Jobs-03-JobflightsdashboardRefresh-1A2B3C",
)
PATH = "/ScheduledAthenaRefresh/jobs/"
NAME = "/ScheduledAthenaRefresh/jobs/flights-dashboard/03"


def test_the_path_and_the_parameter_follow_the_shared_stack_s_name_and_the_job_stack_s_group() -> None:
    assert registry_path("ScheduledAthenaRefresh") == PATH
    assert parameter_name(PATH, "flights-dashboard", 3) == NAME
    assert parameter_name("/ScheduledAthenaRefresh/jobs", "flights-dashboard", 3) == NAME
    assert job_path(PATH, "flights-dashboard") == "/ScheduledAthenaRefresh/jobs/flights-dashboard/"
    # a job in another job stack has another name: a move creates the new entry beside the old one
    assert parameter_name(PATH, "flights-dashboard", 43) != NAME
    for group in (-1, 100, True):
        with pytest.raises(ValueError, match="group must be in"):
            parameter_name(PATH, "flights-dashboard", group)
    with pytest.raises(ValueError, match="stack name"):
        registry_path("a/b")


@pytest.mark.parametrize(
    ("name", "job"),
    [
        (NAME, "flights-dashboard"),
        ("/ScheduledAthenaRefresh/jobs/flights-dashboard", "flights-dashboard"),  # as earlier versions named it
        ("/ScheduledAthenaRefresh/jobs/07", "07"),  # a job named 07, as earlier versions named it
        ("/ScheduledAthenaRefresh/jobs/07/12", "07"),
        ("/ScheduledAthenaRefresh/jobs/flights-dashboard/extra", None),
        ("/ScheduledAthenaRefresh/jobs/flights-dashboard/3", None),
        ("/ScheduledAthenaRefresh/jobs/flights-dashboard/03/deeper", None),
        ("/ScheduledAthenaRefresh/jobs/", None),
        ("/Other/jobs/flights-dashboard/03", None),
    ],
)
def test_the_job_of_a_parameter_is_read_from_its_name(name: str, job: str | None) -> None:
    assert named_job(PATH, name) == job


def test_the_value_is_compact_json_in_the_documented_order_and_reads_back() -> None:
    # WHEN a job stack writes an entry
    text = entry_value(ENTRY)

    # THEN it is compact JSON, format 1 first, the keys in the documented order, and it reads back equal
    assert " " not in text.replace("cron(0/30 * * * ? *)", "")
    assert list(json.loads(text)) == list(KEYS) and json.loads(text)["format"] == 1
    assert parse_entry(text, name=NAME, path=PATH) == ENTRY


def test_a_cdk_token_for_a_physical_name_is_written_as_it_is() -> None:
    token = "${Token[TOKEN.123]}"  # what function.function_name is at synth
    text = entry_value(JobRegistryEntry(**{**_fields(), "function_name": token}))
    assert f'"function_name":"{token}"' in text


def test_unknown_keys_are_ignored_so_a_later_version_may_add_some() -> None:
    document = {**json.loads(entry_value(ENTRY)), "lease_duration_s": 45}
    assert parse_entry(json.dumps(document), name=NAME) == ENTRY


@pytest.mark.parametrize(
    ("text", "message"),
    [
        ("not json", f"{NAME}: not JSON"),
        ("[1, 2]", f"{NAME}: expected a JSON object, got list"),
        (json.dumps({**ENTRY.as_dict(), "format": 2}), "format: expected 1, got 2 (written by another version"),
        (json.dumps({**ENTRY.as_dict(), "format": True}), "format: expected 1, got True"),
        (json.dumps({"format": 1, "job": "flights-dashboard"}), "missing function_name, stack, schedule_expression"),
        (json.dumps({**ENTRY.as_dict(), "racers": 0}), "racers: must be a positive integer, got 0"),
        (json.dumps({**ENTRY.as_dict(), "racers": "3"}), "racers: must be a positive integer, got '3'"),
        (json.dumps({**ENTRY.as_dict(), "function_name": " "}), "function_name: must be a non-empty string"),
        (json.dumps({**ENTRY.as_dict(), "schedule_expression": "rate(5 minutes)"}), "must be a cron(...) expression"),
        (json.dumps({**ENTRY.as_dict(), "job": "a#b"}), "job: must be 1 to 64 letters"),
        (
            json.dumps({**ENTRY.as_dict(), "job": "carrier-on-time"}),
            "but the parameter is named for 'flights-dashboard'",
        ),
    ],
)
def test_a_malformed_value_names_the_parameter_and_what_is_wrong(text: str, message: str) -> None:
    with pytest.raises(RegistryEntryError) as caught:
        parse_entry(text, name=NAME, path=PATH)
    assert str(caught.value).startswith(f"{NAME}: ") and message in str(caught.value)
    assert caught.value.name == NAME and caught.value.problems


def test_every_problem_is_listed_at_once() -> None:
    document = {**ENTRY.as_dict(), "racers": -1, "stack": "", "schedule_timezone": 7}
    with pytest.raises(RegistryEntryError) as caught:
        parse_entry(json.dumps(document))
    assert len(caught.value.problems) == 3 and str(caught.value).startswith("registry entry: ")


def test_the_writer_refuses_an_invalid_entry_or_one_above_4_kb() -> None:
    with pytest.raises(RegistryEntryError, match="racers: must be a positive integer"):
        entry_value(JobRegistryEntry(**{**_fields(), "racers": 0}))
    with pytest.raises(RegistryEntryError, match=f"a Standard parameter holds {MAX_VALUE_BYTES}"):
        entry_value(JobRegistryEntry(**{**_fields(), "log_group_name": "x" * MAX_VALUE_BYTES}))


def _fields() -> dict[str, object]:
    return {key: value for key, value in ENTRY.as_dict().items() if key != "format"}
