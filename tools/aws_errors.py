"""The AWS side of the command-line tools: their clients (:func:`client`: standard retries) and botocore's errors
about the caller's environment, as the one line a tool prints instead of a traceback.

Used at the ``main`` of ``python -m tools.ops`` and ``python -m tools.results``; each maps them to its own exit
status (``tools.ops``: 1 refused; ``tools.results``: 2 for :data:`CONFIGURATION_ERRORS`, 3 for the rest).

Why these tools catch :class:`~botocore.exceptions.BotoCoreError` as a whole, not ``Exception``: botocore raises it
only before, or instead of, a service's answer: no region, no or partial credentials, an unknown profile or a
broken config file, an SSO token that expired, an endpoint it cannot reach, a timeout, a value it refuses
client-side (``ParamValidationError``: mostly a name the user typed). Each is fixed in the environment or the
arguments, and the message says which; a traceback would only hide it. A service's refusal is a
:class:`~botocore.exceptions.ClientError` (its code and message, e.g. ``AccessDenied``). Anything else is a bug
and still ends in a traceback.
"""

from __future__ import annotations

from typing import Any, TextIO

from botocore.config import Config
from botocore.exceptions import (
    BotoCoreError,
    ClientError,
    ConfigNotFound,
    ConfigParseError,
    CredentialRetrievalError,
    HTTPClientError,
    InvalidConfigError,
    InvalidRegionError,
    NoCredentialsError,
    NoRegionError,
    PartialCredentialsError,
    ProfileNotFound,
    SSOError,
    TokenRetrievalError,
    UnknownCredentialError,
)
from botocore.exceptions import ConnectionError as BotocoreConnectionError

#: botocore's errors that can stop a command-line tool (its main catches these, and only these, of botocore's).
AWS_ERRORS: tuple[type[Exception], ...] = (BotoCoreError, ClientError)
#: The caller's AWS configuration is missing or wrong (region, credentials, profile, config file): fixed in the
#: environment or with a flag, never by retrying.
CONFIGURATION_ERRORS: tuple[type[BotoCoreError], ...] = (
    NoRegionError,
    InvalidRegionError,
    NoCredentialsError,
    PartialCredentialsError,
    CredentialRetrievalError,
    UnknownCredentialError,
    ProfileNotFound,
    ConfigNotFound,
    ConfigParseError,
    InvalidConfigError,
    SSOError,
    TokenRetrievalError,
)


def client(session: Any, service: str, *, endpoint_url: str | None = None, **config: Any) -> Any:
    """``session``'s client of ``service`` with botocore's standard retry mode and ``config`` (``read_timeout``,
    ``signature_version``, ...); ``endpoint_url``: another endpoint (DynamoDB Local). Each client gets its own
    :class:`~botocore.config.Config`: botocore rewrites a config's ``retries`` in place when it builds a client."""
    options: dict[str, Any] = {"config": Config(retries={"mode": "standard"}, **config)}
    if endpoint_url is not None:
        options["endpoint_url"] = endpoint_url
    return session.client(service, **options)


#: Longest message printed (a message can quote a whole response).
MAX_LINE = 400


def one_line(text: str, limit: int = MAX_LINE) -> str:
    """``text`` on one line (every run of whitespace, line breaks included, one space), cut at ``limit``."""
    line = " ".join(str(text).split())
    return line if len(line) <= limit else line[: limit - 3] + "..."


def error_line(err: TextIO, text: object, prefix: str = "error") -> None:
    """Write ``<prefix>: <text>`` to ``err`` as one line (every run of whitespace one space, never cut): how every
    tool reports a failure instead of a traceback."""
    err.write(f"{prefix}: {' '.join(str(text).split())}\n")


def describe(exc: BaseException, *, profile_option: str | None = None) -> str:
    """What went wrong and what to do, on one line (no prefix). ``profile_option``: the tool's flag that names a
    profile (``--profile``), offered with the credential hints when the tool has one."""
    profile = f"AWS_PROFILE (or {profile_option})" if profile_option else "AWS_PROFILE"
    if isinstance(exc, NoRegionError):
        return "no AWS region: pass --region, or set AWS_REGION (or a region in the AWS profile)"
    if isinstance(exc, NoCredentialsError):
        return (
            f"no AWS credentials found: set {profile}, or AWS_ACCESS_KEY_ID and AWS_SECRET_ACCESS_KEY"
            " (`aws sso login` first for an SSO profile)"
        )
    if isinstance(exc, (PartialCredentialsError, CredentialRetrievalError, ProfileNotFound, SSOError)):
        return one_line(f"{exc}: check {profile} and ~/.aws/config")
    if isinstance(exc, (BotocoreConnectionError, HTTPClientError)):
        return one_line(f"{exc} (check the network, or the --endpoint-url given)")
    return one_line(str(exc))
