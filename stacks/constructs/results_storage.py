"""Where results live: the results table (one immutable item per slot + a fenced LATEST pointer) and
the bucket holding Athena's output, oversized results and the sample data."""

from __future__ import annotations

import aws_cdk as cdk
from aws_cdk import aws_dynamodb as dynamodb
from aws_cdk import aws_s3 as s3
from constructs import Construct

from athena_refresh import contract

PARTITION_KEY = contract.RESULTS_TABLE_PARTITION_KEY
SORT_KEY = contract.RESULTS_TABLE_SORT_KEY

# Key prefixes inside the bucket (each ends with "/").
ATHENA_RESULTS_PREFIX = "athena-results/"  # Athena query output (the workgroup's result location)
RESULTS_PREFIX = contract.RESULTS_S3_PREFIX  # job results too large for a DynamoDB item (the runtime's layout)
DATA_PREFIX = "data/"  # source data read by Athena
ATHENA_RESULTS_EXPIRATION = cdk.Duration.days(30)
ACCESS_LOGS_PREFIX = "results-bucket/"  # in the access-log bucket
ACCESS_LOGS_EXPIRATION = cdk.Duration.days(90)
INCOMPLETE_UPLOAD_EXPIRATION = cdk.Duration.days(1)
#: How long an overwritten or deleted object of the (versioned) results bucket stays recoverable: the tables'
#: point-in-time recovery window (35 days, DynamoDB's default and maximum), so a results table restored to any
#: moment it can be restored to still finds the offloaded rows its items pointed at then.
NONCURRENT_VERSION_EXPIRATION = cdk.Duration.days(35)
#: Athena's expired query output is disposable: its noncurrent version goes a day after the expiry made it one.
ATHENA_RESULTS_NONCURRENT_EXPIRATION = cdk.Duration.days(1)


class ResultsStorage(Construct):
    """Results table (``job`` S / ``slot`` S) and the encrypted, SSL-only, private results bucket.

    The table has point-in-time recovery and (unless ``removal_policy`` is DESTROY) deletion
    protection, and no TTL: results are kept. The bucket logs its requests (S3 server access logs) to
    ``access_logs_bucket``, a second private bucket whose logs expire after 90 days. Athena's query
    output expires after 30 days; ``results/`` (rows too large for an item) is referenced by result
    items and never expires.

    The results bucket is versioned, as the tables have point-in-time recovery: an offloaded object
    overwritten or deleted (by hand, by a tool) stays recoverable for 35 days, the tables' recovery window.
    On a versioned bucket an expiration only turns the current version noncurrent behind a delete
    marker, so every rule that deletes has its counterpart: noncurrent versions expire (35 days; Athena's
    output after 1), and a delete marker left with no version behind it is removed
    (``ExpiredObjectDeleteMarker``): storage does not grow with every expiry.
    https://docs.aws.amazon.com/AmazonS3/latest/userguide/lifecycle-expire-general-considerations.html

    The access-log bucket is not versioned: it is a log sink, its objects are written once under unique
    keys by the logging service and never rewritten, they are no recovery source for anything (delivery is
    best effort), and versioning would only keep each expired log another lifetime as a noncurrent version.
    """

    def __init__(self, scope: Construct, construct_id: str, *, removal_policy: cdk.RemovalPolicy) -> None:
        super().__init__(scope, construct_id)
        self.table = dynamodb.Table(
            self,
            "Table",
            partition_key=dynamodb.Attribute(name=PARTITION_KEY, type=dynamodb.AttributeType.STRING),
            sort_key=dynamodb.Attribute(name=SORT_KEY, type=dynamodb.AttributeType.STRING),
            billing_mode=dynamodb.BillingMode.PAY_PER_REQUEST,
            point_in_time_recovery_specification=dynamodb.PointInTimeRecoverySpecification(
                point_in_time_recovery_enabled=True
            ),
            deletion_protection=removal_policy == cdk.RemovalPolicy.RETAIN,
            removal_policy=removal_policy,
        )
        # Server access logs can only go to an SSE-S3 bucket; this one logs nowhere (it is the log sink).
        self.access_logs_bucket = s3.Bucket(
            self,
            "AccessLogs",
            encryption=s3.BucketEncryption.S3_MANAGED,
            enforce_ssl=True,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            lifecycle_rules=[
                s3.LifecycleRule(
                    id="ExpireAccessLogs",
                    expiration=ACCESS_LOGS_EXPIRATION,
                    abort_incomplete_multipart_upload_after=INCOMPLETE_UPLOAD_EXPIRATION,
                )
            ],
            removal_policy=removal_policy,
        )
        self.bucket = s3.Bucket(
            self,
            "Bucket",
            encryption=s3.BucketEncryption.S3_MANAGED,
            enforce_ssl=True,
            block_public_access=s3.BlockPublicAccess.BLOCK_ALL,
            object_ownership=s3.ObjectOwnership.BUCKET_OWNER_ENFORCED,
            versioned=True,
            lifecycle_rules=[
                s3.LifecycleRule(
                    id="ExpireAthenaResults",
                    prefix=ATHENA_RESULTS_PREFIX,
                    expiration=ATHENA_RESULTS_EXPIRATION,
                    # Overlapping expirations: S3 honours the shorter (1 day here, 35 days bucket-wide).
                    # https://docs.aws.amazon.com/AmazonS3/latest/userguide/lifecycle-conflicts.html
                    noncurrent_version_expiration=ATHENA_RESULTS_NONCURRENT_EXPIRATION,
                ),
                s3.LifecycleRule(
                    id="AbortIncompleteUploads", abort_incomplete_multipart_upload_after=INCOMPLETE_UPLOAD_EXPIRATION
                ),
                s3.LifecycleRule(
                    id="ExpireNoncurrentVersions",
                    noncurrent_version_expiration=NONCURRENT_VERSION_EXPIRATION,
                    expired_object_delete_marker=True,
                ),
            ],
            server_access_logs_bucket=self.access_logs_bucket,
            server_access_logs_prefix=ACCESS_LOGS_PREFIX,
            removal_policy=removal_policy,
        )

    def s3_url(self, prefix: str) -> str:
        """``s3://<bucket>/<prefix>`` (a token until deployment)."""
        return f"s3://{self.bucket.bucket_name}/{prefix}"
