"""``tools.registry``: the job registry read through SSM (in-process moto; one Stubber for the request shapes).

Each entry is named ``<path><job>/<group>`` (its job stack's group): a job moving between job stacks has two entries
for a moment, and the newer one is answered."""

from __future__ import annotations

import datetime as dt
from collections.abc import Iterator
from typing import Any

import boto3
import moto
import pytest
from botocore.stub import Stubber

from athena_refresh.registry import entry_value
from tests.job_registry import PATH, entry, put_raw, register
from tools.registry import (
    PAGE_SIZE,
    JobNotRegisteredError,
    JobRegistryError,
    MalformedEntryError,
    get_job,
    list_jobs,
)


@pytest.fixture
def ssm() -> Iterator[Any]:
    with moto.mock_aws():
        yield boto3.client("ssm", region_name="us-east-1")


def test_every_job_is_listed_across_pages_of_ten(ssm: Any) -> None:
    # GIVEN 23 jobs in the registry, and another stack's parameters beside it and below it
    entries = [entry(f"job-{i:02d}", group=i % 16) for i in range(23)]
    register(ssm, *entries)
    register(ssm, entry("elsewhere"), path="/OtherStack/jobs/")
    ssm.put_parameter(Name=f"{PATH}job-00/extra", Value="{}", Type="String")  # no group: not a job's entry
    ssm.put_parameter(Name=f"{PATH}job-00/03/deeper", Value="{}", Type="String")  # deeper: not a job's entry
    calls: list[dict[str, Any]] = []
    ssm.meta.events.register("provide-client-params.ssm.GetParametersByPath", lambda params, **_: calls.append(params))

    # WHEN the tools list the jobs
    jobs = list_jobs(ssm, PATH)

    # THEN every job is there, sorted, read in pages of at most ten (recursive: each entry is one level below its job)
    assert list(jobs) == [f"job-{i:02d}" for i in range(23)]
    assert jobs["job-17"] == entries[17] and jobs["job-17"].stack == "ScheduledAthenaRefresh-Jobs-01"
    assert len(calls) == 3 and all(c["MaxResults"] == PAGE_SIZE and c["Recursive"] is True for c in calls)


def test_an_empty_registry_lists_no_job(ssm: Any) -> None:
    assert list_jobs(ssm, PATH) == {}


def test_one_job_is_one_listing_of_its_own_path(ssm: Any) -> None:
    register(ssm, entry("flights-dashboard", group=34), entry("carrier-on-time", group=44))
    calls: list[dict[str, Any]] = []
    ssm.meta.events.register("provide-client-params.ssm.GetParametersByPath", lambda params, **_: calls.append(params))
    got = get_job(ssm, PATH, "carrier-on-time")
    assert got == entry("carrier-on-time", group=44) and got.schedule_timezone == "America/New_York"
    assert [call["Path"] for call in calls] == [f"{PATH}carrier-on-time/"]  # the group need not be known


def test_a_job_moving_between_job_stacks_is_answered_by_its_newer_entry(ssm: Any) -> None:
    # GIVEN a job whose new job stack (50) wrote its entry before its old stack (34) deleted its own: the two names
    # differ, so the deploy did not collide
    register(ssm, entry("flights-dashboard", group=34), entry("carrier-on-time", group=44))
    register(ssm, entry("flights-dashboard", group=50))
    # WHEN the tools read it, one job or every job
    one = get_job(ssm, PATH, "flights-dashboard")
    every = list_jobs(ssm, PATH)
    # THEN the newer entry (the move's target) is the answer, and the job is listed once
    assert one == every["flights-dashboard"] == entry("flights-dashboard", group=50)
    assert list(every) == ["carrier-on-time", "flights-dashboard"]
    # AND once the old stack deletes its entry, nothing changes
    ssm.delete_parameter(Name=f"{PATH}flights-dashboard/34")
    assert get_job(ssm, PATH, "flights-dashboard") == entry("flights-dashboard", group=50)


def test_an_entry_named_as_earlier_versions_named_it_is_listed_until_the_upgrade_replaces_it(ssm: Any) -> None:
    # GIVEN a deployment from before the group was in the name: /<shared>/jobs/<job>
    legacy = entry("carrier-on-time", group=3)
    ssm.put_parameter(Name=f"{PATH}carrier-on-time", Value=entry_value(legacy), Type="String")
    assert list_jobs(ssm, PATH) == {"carrier-on-time": legacy}
    # WHEN the upgrade's deploy writes the new name (the old one is deleted in the stack's clean-up)
    register(ssm, entry("carrier-on-time", group=3, racers=5))
    # THEN the new entry is the answer meanwhile
    assert list_jobs(ssm, PATH)["carrier-on-time"].racers == 5
    assert get_job(ssm, PATH, "carrier-on-time").racers == 5


def test_an_unknown_job_is_a_one_line_error_naming_the_parameter(ssm: Any) -> None:
    register(ssm, entry("flights-dashboard"))
    with pytest.raises(JobNotRegisteredError) as caught:
        get_job(ssm, PATH, "nope")
    message = str(caught.value)
    assert "\n" not in message and message.startswith("no job 'nope' in the job registry /ScheduledAthenaRefresh/jobs/")
    assert "(no parameter under /ScheduledAthenaRefresh/jobs/nope/)" in message
    with pytest.raises(JobRegistryError, match="'a b' is not a job name"):
        get_job(ssm, PATH, "a b")  # asks nothing: SSM would refuse the name


def test_a_malformed_entry_names_the_parameter_and_the_problem(ssm: Any) -> None:
    register(ssm, entry("flights-dashboard"))
    put_raw(ssm, "broken", '{"format": 1, "job": "broken", "racers": 0}')
    with pytest.raises(MalformedEntryError) as caught:
        list_jobs(ssm, PATH)
    message = str(caught.value)
    assert message.startswith("job registry parameter /ScheduledAthenaRefresh/jobs/broken/00: missing function_name")
    assert "racers: must be a positive integer, got 0" in message
    put_raw(ssm, "flights-dashboard", "flights!")
    with pytest.raises(MalformedEntryError, match="flights-dashboard/00: not JSON"):
        get_job(ssm, PATH, "flights-dashboard")


def test_other_aws_errors_pass_through_to_the_tool_s_main() -> None:
    client = boto3.client("ssm", region_name="us-east-1")
    with Stubber(client) as stubber:
        stubber.add_client_error(
            "get_parameters_by_path", "AccessDeniedException", "not authorized to perform ssm:GetParametersByPath"
        )
        with pytest.raises(Exception, match="AccessDeniedException") as caught:
            get_job(client, PATH, "flights-dashboard")
    assert not isinstance(caught.value, JobRegistryError)


def test_the_requests_name_the_registry_path_and_the_job_s_path() -> None:
    client = boto3.client("ssm", region_name="us-east-1")
    value = entry_value(entry("flights-dashboard", group=34))
    name = f"{PATH}flights-dashboard/34"
    modified = dt.datetime(2026, 12, 2, 7, 0, tzinfo=dt.UTC)
    parameters = [{"Name": name, "Type": "String", "Value": value, "LastModifiedDate": modified}]
    with Stubber(client) as stubber:
        stubber.add_response(
            "get_parameters_by_path", {"Parameters": parameters}, {"Path": PATH, "Recursive": True, "MaxResults": 10}
        )
        stubber.add_response(
            "get_parameters_by_path",
            {"Parameters": parameters},
            {"Path": f"{PATH}flights-dashboard/", "Recursive": False, "MaxResults": 10},
        )
        assert list(list_jobs(client, PATH)) == ["flights-dashboard"]
        assert get_job(client, PATH, "flights-dashboard").job == "flights-dashboard"
