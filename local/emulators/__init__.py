"""Local stand-ins for AWS: the serialised moto server, AWS DynamoDB Local, the DuckDB query engine (Athena's
interface), a Lambda-like runtime and worker pool, and bounded process helpers. Never deployed."""
