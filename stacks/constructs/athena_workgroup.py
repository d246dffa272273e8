"""The Athena workgroup the job runs in: enforced result location, SSE-S3, engine v3, CloudWatch metrics,
and a cap on the bytes one query may scan."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_athena as athena
from constructs import Construct

ENGINE_VERSION = "Athena engine version 3"


class AthenaWorkgroup(Construct):
    """An Athena workgroup whose settings override the client's (``EnforceWorkGroupConfiguration``).

    Query output goes to ``output_location`` encrypted with SSE-S3; a query that scans more than
    ``bytes_scanned_cutoff_per_query`` bytes (minimum 10,000,000) is cancelled by Athena, and is billed
    for what it scanned until then:
    https://docs.aws.amazon.com/athena/latest/ug/workgroups-setting-control-limits-cloudwatch.html

    ``arn`` is the workgroup ARN for IAM; ``name`` is its (physical) name.
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        name: str,
        output_location: str,
        bytes_scanned_cutoff_per_query: int,
    ) -> None:
        super().__init__(scope, construct_id)
        self.workgroup = athena.CfnWorkGroup(
            self,
            "WorkGroup",
            name=name,
            description="Scheduled Athena refresh: one query per schedule slot",
            recursive_delete_option=True,  # deletable with the stack even if it holds saved queries
            work_group_configuration=athena.CfnWorkGroup.WorkGroupConfigurationProperty(
                enforce_work_group_configuration=True,
                bytes_scanned_cutoff_per_query=bytes_scanned_cutoff_per_query,
                publish_cloud_watch_metrics_enabled=True,
                engine_version=athena.CfnWorkGroup.EngineVersionProperty(selected_engine_version=ENGINE_VERSION),
                result_configuration=athena.CfnWorkGroup.ResultConfigurationProperty(
                    output_location=output_location,
                    encryption_configuration=athena.CfnWorkGroup.EncryptionConfigurationProperty(
                        encryption_option="SSE_S3"
                    ),
                ),
            ),
        )
        self.name = self.workgroup.ref  # Ref of AWS::Athena::WorkGroup is its name
        self.arn = cdk.Stack.of(self).format_arn(
            service="athena",
            resource="workgroup",
            resource_name=self.name,
            arn_format=cdk.ArnFormat.SLASH_RESOURCE_NAME,
        )
