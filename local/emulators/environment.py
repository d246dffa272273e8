"""What stops a local run for want of something on this machine, as the one line ``python -m local.demo``,
``python -m local.chaos`` and ``python -m local.capacity`` print instead of a traceback (:mod:`local.scenario.cli`).

- **DynamoDB Local** (:class:`~local.emulators.dynamodb_local.DynamoDBLocalError`): no working ``java``, the npm
  package not fetched and ``npm`` missing or offline, the process exiting or not answering;
- **the moto server** (:class:`~local.emulators.atomic_moto.AtomicMotoError`, or a ``TimeoutError``): the child
  exited or never became ready;
- **the local deployment** and **the Lambda emulator** (:class:`~local.emulators.deployment.LocalDeploymentError`,
  :class:`~local.emulators.lambda_service.LambdaServiceError`): execution environments that never became ready;
- **the file system and sockets** (``OSError``): a work directory that cannot be written, a full disk, the sample
  data's source package missing;
- **the local endpoints** (botocore's ``BotoCoreError``/``ClientError``): an emulator that died mid-run;
- and one user's mistake: **the job folders** (:class:`athena_refresh.checks.ConfigError`, a broken ``jobs/<job>/job.toml``),
  named on one line as ``cdk synth`` names it.

These are the classes the entry points catch (:data:`LOCAL_RUN_ERRORS`), and only these: anything else (a
``TypeError``, a ``KeyError``) is a bug and keeps its traceback.
"""

from __future__ import annotations

from botocore.exceptions import BotoCoreError, ClientError

from athena_refresh.checks import ConfigError
from local.emulators.atomic_moto import AtomicMotoError
from local.emulators.deployment import LocalDeploymentError
from local.emulators.dynamodb_local import DynamoDBLocalError
from local.emulators.lambda_service import LambdaServiceError
from tools.aws_errors import one_line  # one line, whitespace folded, cut at its limit

LOCAL_RUN_ERRORS: tuple[type[Exception], ...] = (
    ConfigError,
    DynamoDBLocalError,
    AtomicMotoError,
    LocalDeploymentError,
    LambdaServiceError,
    OSError,
    BotoCoreError,
    ClientError,
)


def describe(exc: BaseException) -> str:
    """One line naming what failed (DynamoDB Local, the moto server, a file...) and botocore's or the OS's reason."""
    if isinstance(exc, ConfigError):
        more = f" (and {len(exc.problems) - 1} more problem(s))" if len(exc.problems) > 1 else ""
        return one_line(f"invalid job configuration: {exc.problems[0] if exc.problems else exc}{more}")
    if isinstance(exc, DynamoDBLocalError):
        what = "DynamoDB Local is unavailable"
    elif isinstance(exc, AtomicMotoError):
        what = "the local moto server did not start"
    elif isinstance(exc, TimeoutError):  # the message names what (the moto server, processes) did not answer
        what = "timed out"
    elif isinstance(exc, LocalDeploymentError):
        what = "the local deployment failed"
    elif isinstance(exc, LambdaServiceError):
        what = "the Lambda emulator failed"
    elif isinstance(exc, (BotoCoreError, ClientError)):
        what = "a local AWS endpoint failed"
    elif isinstance(exc, OSError) and exc.filename is not None:
        return one_line(f"{exc.filename}: {exc.strerror or exc}")
    else:
        return one_line(str(exc) or type(exc).__name__)
    return one_line(f"{what}: {exc}")
