"""The read side: the results and history of every job, served by an HTTP API (API Gateway HTTP API, IAM
auth), a CloudWatch custom widget and ``python -m tools.results``, all through :mod:`results_api.reader`.

Read-only by construction: nothing here writes to DynamoDB or S3.
"""
