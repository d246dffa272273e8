"""Run by ``make example`` with the python of a fresh venv holding the slotlock wheel alone (``python -I``).

slotlock must run on Lambda's Python runtime with nothing added but itself (its layer): the runtime ships boto3 and
its dependencies, nothing else. So: the venv holds slotlock, boto3 and what pip pulled for boto3, and importing
every module of slotlock (and building a lock with a DynamoDB client, no request sent) loads no third-party top-level
module outside boto3, botocore and their dependencies. Exits 1 with the offenders otherwise.
"""

from __future__ import annotations

import importlib
import importlib.metadata
import pkgutil
import sys
import sysconfig
from pathlib import Path

#: boto3 and its dependencies, as Lambda's Python runtimes ship them (six: python-dateutil's dependency).
RUNTIME_MODULES = {"boto3", "botocore", "jmespath", "dateutil", "urllib3", "s3transfer", "six"}
RUNTIME_DISTRIBUTIONS = {"boto3", "botocore", "jmespath", "python-dateutil", "urllib3", "s3transfer", "six"}
#: What a venv holds before anything is installed into it.
VENV_DISTRIBUTIONS = {"pip", "setuptools"}


STDLIB_DIR = Path(sysconfig.get_paths()["stdlib"]).resolve()  # (in a venv, "platstdlib" is the venv's lib/)
SITE_DIRS = {Path(sysconfig.get_paths()[key]).resolve() for key in ("purelib", "platlib")}


def is_stdlib(name: str) -> bool:
    """Whether top-level module ``name`` is the standard library's: listed as such, or a file of the interpreter's own
    library (e.g. ``_sysconfigdata_<platform>``), or this script (``__mp_main__``, multiprocessing's alias of it)."""
    if name in sys.stdlib_module_names:
        return True
    module = sys.modules.get(name)
    if module is sys.modules["__main__"]:
        return True
    file = getattr(module, "__file__", None)
    if file is None:
        return False
    path = Path(file).resolve()
    return path.is_relative_to(STDLIB_DIR) and not any(path.is_relative_to(site) for site in SITE_DIRS)


def main() -> int:
    problems: list[str] = []
    before = set(sys.modules)

    import boto3

    import slotlock

    site = Path(sys.prefix).resolve()
    if not Path(slotlock.__file__ or "").resolve().is_relative_to(site):
        problems.append(f"slotlock imported from {slotlock.__file__}, not from this venv ({site})")
    modules = sorted(info.name for info in pkgutil.walk_packages(slotlock.__path__, "slotlock."))
    for name in modules:
        importlib.import_module(name)
    client = boto3.session.Session(
        aws_access_key_id="testing", aws_secret_access_key="testing", region_name="us-east-1"
    ).client("dynamodb")
    slotlock.SlotLock("locks", "nightly-report", client=client)  # builds the lock; sends nothing

    loaded = {name.partition(".")[0] for name in set(sys.modules) - before}
    third_party = {name for name in loaded if not is_stdlib(name)} - {"slotlock"}
    if third_party - RUNTIME_MODULES:
        problems.append(f"modules Lambda's runtime lacks: {sorted(third_party - RUNTIME_MODULES)}")
    installed = {dist.metadata["Name"].lower() for dist in importlib.metadata.distributions()}
    extra = installed - RUNTIME_DISTRIBUTIONS - VENV_DISTRIBUTIONS - {"slotlock"}
    if extra:
        problems.append(f"distributions pip installed beyond boto3's: {sorted(extra)}")
    for problem in problems:
        print(f"FAIL: {problem}", file=sys.stderr)
    if not problems:
        print(
            f"slotlock {slotlock.__version__}: {len(modules) + 1} modules imported; third-party modules loaded: "
            f"{', '.join(sorted(third_party))} (Lambda's Python runtime has them); installed: {', '.join(sorted(installed))}"
        )
    return 1 if problems else 0


if __name__ == "__main__":
    sys.exit(main())
