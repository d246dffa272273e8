"""Give a Lambda function the ``slotlock`` package at run time, without Docker.

Lambda's Python runtimes ship boto3 (``slotlock``'s only dependency) but not ``slotlock``. Two ways, both
built from the files of the ``slotlock`` package installed beside this library (so the function runs exactly
the version the app was synthesized with, and the asset hash changes only when those files do):

- :class:`SlotlockLayer`: a layer version whose ``python/slotlock`` directory Lambda puts on ``sys.path``
  (https://docs.aws.amazon.com/lambda/latest/dg/packaging-layers.html#packaging-layers-paths); add it to any
  number of functions of the stack (``layers=[layer]``);
- :func:`stage_slotlock`: copy the package into a directory you bundle yourself (a function's own asset).

The package's ``.py`` files and ``py.typed`` are copied, its subpackages' too (``slotlock/ops``), keeping the
directory layout; nothing else (no ``__pycache__``).
"""

from __future__ import annotations

import atexit
import importlib.metadata
import shutil
import tempfile
from collections.abc import Sequence
from pathlib import Path

import aws_cdk as cdk
from aws_cdk import aws_lambda as lambda_
from constructs import Construct

import slotlock

__all__ = [
    "LAYER_PYTHON_DIR",
    "PYTHON_RUNTIMES",
    "SlotlockLayer",
    "slotlock_package_dir",
    "slotlock_version",
    "stage_slotlock",
]

#: Where a layer's Python packages go (Lambda adds ``/opt/python`` to ``sys.path``).
LAYER_PYTHON_DIR = "python"
#: The Lambda runtimes ``slotlock`` supports (it requires Python 3.11 or later).
PYTHON_RUNTIMES: tuple[lambda_.Runtime, ...] = (
    lambda_.Runtime.PYTHON_3_11,
    lambda_.Runtime.PYTHON_3_12,
    lambda_.Runtime.PYTHON_3_13,
)
#: What is copied, in the package and in each of its subpackages (``Path.rglob`` patterns).
_COPIED = ("*.py", "py.typed")


def slotlock_package_dir() -> Path:
    """The directory of the installed ``slotlock`` package (its source directory for an editable install)."""
    return Path(slotlock.__file__).resolve().parent


def slotlock_version() -> str:
    """The installed ``slotlock`` distribution's version (``slotlock.__version__`` without distribution metadata)."""
    try:
        return importlib.metadata.version("slotlock")
    except importlib.metadata.PackageNotFoundError:
        return slotlock.__version__


def stage_slotlock(destination: Path) -> Path:
    """Copy the installed ``slotlock`` package, subpackages included, into ``destination / "slotlock"`` and return
    that directory.

    :raises FileExistsError: ``destination / "slotlock"`` already exists.
    """
    source = slotlock_package_dir()
    target = destination / "slotlock"
    target.mkdir(parents=True)
    for pattern in _COPIED:
        for path in sorted(source.rglob(pattern)):
            if "__pycache__" in path.relative_to(source).parts:
                continue
            copied = target / path.relative_to(source)
            copied.parent.mkdir(parents=True, exist_ok=True)
            shutil.copy2(path, copied)
    return target


class SlotlockLayer(lambda_.LayerVersion):
    """A Lambda layer version holding the installed ``slotlock`` package, for Python 3.11 and later.

    ``compatible_runtimes`` defaults to :data:`PYTHON_RUNTIMES`; ``compatible_architectures`` to both (the package
    is pure Python). ``removal_policy`` defaults to DESTROY: a replaced layer version is deleted with the update
    (functions keep the version they were created with until they are updated).

    Example::

        layer = SlotlockLayer(self, "Slotlock")
        fn = lambda_.Function(self, "Report", runtime=lambda_.Runtime.PYTHON_3_13, handler="report.handler",
                              code=lambda_.Code.from_asset("handlers"), layers=[layer])
    """

    def __init__(
        self,
        scope: Construct,
        construct_id: str,
        *,
        compatible_runtimes: Sequence[lambda_.Runtime] | None = None,
        removal_policy: cdk.RemovalPolicy = cdk.RemovalPolicy.DESTROY,
    ) -> None:
        staged = Path(tempfile.mkdtemp(prefix="slotlock-layer-"))
        atexit.register(shutil.rmtree, staged, True)  # cdk synth copies the asset into the cloud assembly first
        stage_slotlock(staged / LAYER_PYTHON_DIR)
        self.slotlock_version = slotlock_version()
        super().__init__(
            scope,
            construct_id,
            code=lambda_.Code.from_asset(str(staged)),
            compatible_runtimes=list(compatible_runtimes or PYTHON_RUNTIMES),
            compatible_architectures=[lambda_.Architecture.ARM_64, lambda_.Architecture.X86_64],
            description=f"slotlock {self.slotlock_version}: run a scheduled function once per schedule slot",
            license="Apache-2.0",
            removal_policy=removal_policy,
        )
