"""The import boundaries of the house, checked on the source (no import is executed).

- ``stacks/`` and ``app.py`` (infrastructure) never import ``local/`` (the local tools): a synth needs
  nothing that only exists for local runs; the sample data's schema lives in ``sample_data/``.
- ``lambdas/`` (the runtime, the Lambda asset) never imports ``aws_cdk``, ``local``, ``stacks`` or
  ``sample_data``: the asset holds ``lambdas/`` only.
- ``slotlock`` (``packages/slotlock``) depends on boto3/botocore and the standard library only.
- ``slotlock_cdk`` (``packages/slotlock-cdk``) imports aws_cdk, constructs, jsii, slotlock and the standard library
  only: never this project's ``stacks``, ``athena_refresh`` or ``cdk_nag``.
- Outside ``slotlock`` and the tests, nothing imports an internal ``slotlock._*`` module (the local tools may).
- ``examples/`` are apps as a user writes them: they import the libraries' public API (``make example`` installs
  the wheels), the CDK, cdk-nag, boto3, pytest and their own modules, never this repository's other packages.
"""

from __future__ import annotations

import ast
import re
import sys
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parent.parent


def imported_top_levels(path: Path) -> set[str]:
    """Top-level package names of every absolute import in ``path``."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def python_files(*roots: str) -> list[Path]:
    files: list[Path] = []
    for root in roots:
        path = REPO_ROOT / root
        files.extend([path] if path.is_file() else sorted(path.rglob("*.py")))
    return files


@pytest.mark.parametrize("path", python_files("stacks", "app.py"), ids=lambda p: str(p.relative_to(REPO_ROOT)))
def test_infrastructure_never_imports_the_local_tools(path: Path) -> None:
    assert "local" not in imported_top_levels(path)


@pytest.mark.parametrize("path", python_files("lambdas"), ids=lambda p: str(p.relative_to(REPO_ROOT)))
def test_the_runtime_imports_nothing_outside_the_asset(path: Path) -> None:
    assert not imported_top_levels(path) & {"aws_cdk", "constructs", "cdk_nag", "local", "stacks", "sample_data"}


SLOTLOCK = "packages/slotlock/src/slotlock"
SLOTLOCK_CDK = "packages/slotlock-cdk/src/slotlock_cdk"


@pytest.mark.parametrize("path", python_files(SLOTLOCK), ids=lambda p: str(p.relative_to(REPO_ROOT)))
def test_the_lock_package_depends_on_boto3_only(path: Path) -> None:
    allowed = set(sys.stdlib_module_names) | {"boto3", "botocore", "mypy_boto3_dynamodb", "slotlock"}
    assert imported_top_levels(path) <= allowed, imported_top_levels(path) - allowed


@pytest.mark.parametrize("path", python_files(SLOTLOCK_CDK), ids=lambda p: str(p.relative_to(REPO_ROOT)))
def test_the_construct_library_depends_on_the_cdk_and_slotlock_only(path: Path) -> None:
    allowed = set(sys.stdlib_module_names) | {"aws_cdk", "constructs", "jsii", "slotlock", "slotlock_cdk"}
    assert imported_top_levels(path) <= allowed, imported_top_levels(path) - allowed


def imported_modules(path: Path) -> set[str]:
    """Every absolute module name ``path`` imports (``from a.b import c`` gives ``a.b`` and ``a.b.c``)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module)
            names.update(f"{node.module}.{alias.name}" for alias in node.names)
    return names


@pytest.mark.parametrize(
    "path",
    python_files("lambdas", "stacks", "tools", "bench", "app.py", SLOTLOCK_CDK),
    ids=lambda p: str(p.relative_to(REPO_ROOT)),
)
def test_only_the_lock_package_imports_its_internals(path: Path) -> None:
    internal = {name for name in imported_modules(path) if name.startswith("slotlock._")}
    assert internal == set(), f"import the public API instead (slotlock.__all__, docs/compatibility.md): {internal}"


EXAMPLES = REPO_ROOT / "examples"


@pytest.mark.parametrize("path", python_files("examples"), ids=lambda p: str(p.relative_to(REPO_ROOT)))
def test_the_examples_use_the_libraries_as_a_user_would(path: Path) -> None:
    example = REPO_ROOT / "examples" / path.relative_to(EXAMPLES).parts[0]
    own = {p.stem for p in example.rglob("*.py")}
    allowed = set(sys.stdlib_module_names) | {"aws_cdk", "constructs", "cdk_nag", "boto3", "botocore", "pytest"}
    allowed |= {"slotlock", "slotlock_cdk"} | own
    assert imported_top_levels(path) <= allowed, imported_top_levels(path) - allowed
    internal = {name for name in imported_modules(path) if re.match(r"slotlock(_cdk)?\._", name)}
    assert internal == set(), f"import the public API (slotlock.__all__, slotlock_cdk.__all__): {internal}"
