"""The sample's Glue table: partitioned by ``dt``, its partitions declared by Athena partition projection.

https://docs.aws.amazon.com/athena/latest/ug/partition-projection-supported-types.html (the date type) and
https://docs.aws.amazon.com/athena/latest/ug/partition-projection-setting-up.html (storage.location.template).
"""

from __future__ import annotations

from typing import Any

from aws_cdk.assertions import Capture, Match, Template

from sample_data.flights import FLIGHTS_FIRST_DT, FLIGHTS_GLUE_COLUMNS, FLIGHTS_LAST_DT


def test_the_table_is_partitioned_by_dt_as_a_string(template: Template) -> None:
    columns = Capture()
    template.has_resource_properties(
        "AWS::Glue::Table",
        {
            "TableInput": Match.object_like(
                {
                    "Name": "flights",
                    "PartitionKeys": [{"Name": "dt", "Type": "string"}],
                    "StorageDescriptor": Match.object_like({"Columns": columns}),
                }
            )
        },
    )
    # the partition key is in the path, never among the data columns
    assert [(c["Name"], c["Type"]) for c in columns.as_array()] == list(FLIGHTS_GLUE_COLUMNS)
    assert "dt" not in {c["Name"] for c in columns.as_array()}


def test_every_projection_property_is_declared(template: Template) -> None:
    template.has_resource_properties(
        "AWS::Glue::Table",
        {
            "TableInput": Match.object_like(
                {
                    "Parameters": Match.object_like(
                        {
                            "classification": "parquet",
                            "EXTERNAL": "TRUE",
                            "projection.enabled": "true",
                            "projection.dt.type": "date",
                            "projection.dt.format": "yyyy-MM-dd",
                            "projection.dt.range": f"{FLIGHTS_FIRST_DT},{FLIGHTS_LAST_DT}",
                            "projection.dt.interval": "1",
                            "projection.dt.interval.unit": "DAYS",
                            "storage.location.template": Match.any_value(),
                        }
                    )
                }
            )
        },
    )
    assert (FLIGHTS_FIRST_DT, FLIGHTS_LAST_DT) == ("2013-01-01", "2014-01-01")


def test_the_location_template_names_the_tables_own_bucket_and_prefix(template: Template) -> None:
    location, location_template = Capture(), Capture()
    template.has_resource_properties(
        "AWS::Glue::Table",
        {
            "TableInput": Match.object_like(
                {
                    "Parameters": Match.object_like({"storage.location.template": location_template}),
                    "StorageDescriptor": Match.object_like({"Location": location}),
                }
            )
        },
    )
    join: Any = location.as_object()["Fn::Join"]
    template_join: Any = location_template.as_object()["Fn::Join"]

    # s3://<bucket>/data/flights/ and s3://<bucket>/data/flights/dt=${dt}/: the same bucket, one slash each
    assert join[1][:2] == template_join[1][:2] == ["s3://", join[1][1]]
    assert list(join[1][1]) == ["Ref"]
    assert join[1][2:] == ["/data/flights/"]
    assert template_join[1][2:] == ["/data/flights/dt=${dt}/"]
