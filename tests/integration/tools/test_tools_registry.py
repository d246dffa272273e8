"""``tools.registry``: the job registry read through SSM (in-process moto; one Stubber for the request shapes)."""

from __future__ import annotations

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
    ssm.put_parameter(Name=f"{PATH}job-00/extra", Value="{}", Type="String")  # deeper: not a job
    calls: list[dict[str, Any]] = []
    ssm.meta.events.register("provide-client-params.ssm.GetParametersByPath", lambda params, **_: calls.append(params))

    # WHEN the tools list the jobs
    jobs = list_jobs(ssm, PATH)

    # THEN every job is there, sorted, read three pages of at most ten (not recursive)
    assert list(jobs) == [f"job-{i:02d}" for i in range(23)]
    assert jobs["job-17"] == entries[17] and jobs["job-17"].stack == "ScheduledAthenaRefresh-Jobs-01"
    assert len(calls) == 3 and all(c["MaxResults"] == PAGE_SIZE and c["Recursive"] is False for c in calls)


def test_an_empty_registry_lists_no_job(ssm: Any) -> None:
    assert list_jobs(ssm, PATH) == {}


def test_one_job_is_one_get_parameter(ssm: Any) -> None:
    register(ssm, entry("flights-dashboard"), entry("carrier-on-time"))
    got = get_job(ssm, PATH, "carrier-on-time")
    assert got == entry("carrier-on-time") and got.schedule_timezone == "America/New_York"


def test_an_unknown_job_is_a_one_line_error_naming_the_parameter(ssm: Any) -> None:
    register(ssm, entry("flights-dashboard"))
    with pytest.raises(JobNotRegisteredError) as caught:
        get_job(ssm, PATH, "nope")
    message = str(caught.value)
    assert "\n" not in message and message.startswith("no job 'nope' in the job registry /ScheduledAthenaRefresh/jobs/")
    assert "(no parameter /ScheduledAthenaRefresh/jobs/nope)" in message
    with pytest.raises(JobRegistryError, match="'a b' is not a job name"):
        get_job(ssm, PATH, "a b")  # asks nothing: SSM would refuse the name


def test_a_malformed_entry_names_the_parameter_and_the_problem(ssm: Any) -> None:
    register(ssm, entry("flights-dashboard"))
    put_raw(ssm, "broken", '{"format": 1, "job": "broken", "racers": 0}')
    with pytest.raises(MalformedEntryError) as caught:
        list_jobs(ssm, PATH)
    message = str(caught.value)
    assert message.startswith("job registry parameter /ScheduledAthenaRefresh/jobs/broken: missing function_name")
    assert "racers: must be a positive integer, got 0" in message
    put_raw(ssm, "flights-dashboard", "flights!")
    with pytest.raises(MalformedEntryError, match="flights-dashboard: not JSON"):
        get_job(ssm, PATH, "flights-dashboard")


def test_other_aws_errors_pass_through_to_the_tool_s_main() -> None:
    client = boto3.client("ssm", region_name="us-east-1")
    with Stubber(client) as stubber:
        stubber.add_client_error("get_parameter", "AccessDeniedException", "not authorized to perform ssm:GetParameter")
        with pytest.raises(Exception, match="AccessDeniedException") as caught:
            get_job(client, PATH, "flights-dashboard")
    assert not isinstance(caught.value, JobRegistryError)


def test_the_requests_name_the_path_and_the_parameter() -> None:
    client = boto3.client("ssm", region_name="us-east-1")
    value = entry_value(entry("flights-dashboard"))
    name = f"{PATH}flights-dashboard"
    with Stubber(client) as stubber:
        stubber.add_response(
            "get_parameters_by_path",
            {"Parameters": [{"Name": name, "Type": "String", "Value": value}]},
            {"Path": PATH, "Recursive": False, "MaxResults": 10},
        )
        stubber.add_response(
            "get_parameter", {"Parameter": {"Name": name, "Type": "String", "Value": value}}, {"Name": name}
        )
        assert list(list_jobs(client, PATH)) == ["flights-dashboard"]
        assert get_job(client, PATH, "flights-dashboard").job == "flights-dashboard"
