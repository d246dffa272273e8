"""Errors of the read side: one base, :class:`ResultsApiError`, with the HTTP status each maps to.

Every error names what is wrong (the parameter, the job, the slot); the API answers it as an RFC 9457 problem
document (https://www.rfc-editor.org/rfc/rfc9457). Backend failures (DynamoDB, S3) are
:class:`BackendUnavailableError` (503): never blamed on the caller, never a 500.
"""

from __future__ import annotations


class ResultsApiError(Exception):
    """Base of the read side's errors. ``status``: the HTTP status; ``code``: a stable machine-readable name."""

    status = 500
    code = "internal"

    def __init__(self, message: str) -> None:
        super().__init__(message)
        self.message = message


class BadParameterError(ResultsApiError):
    """A request parameter (path, query or header) is malformed: ``parameter`` names it."""

    status = 400
    code = "bad_parameter"

    def __init__(self, parameter: str, problem: str) -> None:
        super().__init__(f"{parameter}: {problem}")
        self.parameter = parameter
        self.problem = problem


class UnknownJobError(ResultsApiError):
    """No job of that name in the deployment's job catalog."""

    status = 404
    code = "unknown_job"

    def __init__(self, job: str, known: list[str]) -> None:
        super().__init__(f"no job {job!r}; jobs: {', '.join(known) or 'none'}")
        self.job = job


class ResultNotFoundError(ResultsApiError):
    """The job has no committed result for that slot (and generation), or none at all yet."""

    status = 404
    code = "no_result"

    def __init__(self, job: str, slot: str | None, generation: int | None = None) -> None:
        if slot is None:
            message = f"job {job!r} has no committed result yet"
        elif generation is None:
            message = f"job {job!r} has no committed result for slot {slot}"
        else:
            message = f"job {job!r} has no committed result for slot {slot} generation {generation}"
        super().__init__(message)
        self.job, self.slot, self.generation = job, slot, generation


class NotAcceptableError(ResultsApiError):
    """The ``Accept`` header allows none of the representations served (JSON, CSV)."""

    status = 406
    code = "not_acceptable"


class BackendUnavailableError(ResultsApiError):
    """DynamoDB or S3 failed (after botocore's retries), or a stored item cannot be decoded."""

    status = 503
    code = "backend_unavailable"
