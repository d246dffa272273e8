"""The two library distributions as built: what each wheel and sdist holds, and the wheels' metadata.

With ``SLOTLOCK_DIST_DIR`` set (``make example`` sets it to ``dist/`` after ``make dist``) the tests read the
artifacts there, the very files the example then installs. Without it (``make test``) the module builds both
distributions into a temporary directory first, as ``make dist`` does (``python -m build --no-isolation``, about
6 s for both): the whole module stays well under 20 s, so it runs in every ``make test``.
"""

from __future__ import annotations

import json
import os
import re
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from dataclasses import dataclass
from email.message import Message
from email.parser import Parser
from pathlib import Path

import pytest
from packaging.requirements import Requirement
from packaging.utils import canonicalize_name
from packaging.version import Version

REPO_ROOT = Path(__file__).resolve().parents[2]
DIST_DIR_VARIABLE = "SLOTLOCK_DIST_DIR"
BUILD_TIMEOUT_S = 300

#: Top-level names of this repository that no library distribution may hold.
FOREIGN = {
    "tests",
    "local",
    "bench",
    "stacks",
    "tools",
    "athena_refresh",
    "results_api",
    "sample_data",
    "lambdas",
    "jobs",
    "docs",
    "examples",
}


@dataclass(frozen=True)
class Library:
    project: str  # the distribution's name
    package: str  # its one import package
    root: Path  # its folder in the repository

    @property
    def stem(self) -> str:
        """The artifacts' file name stem (``slotlock_cdk``)."""
        return self.project.replace("-", "_")

    @property
    def source(self) -> Path:
        return self.root / "src" / self.package

    @property
    def version(self) -> str:
        """The dynamic version of its pyproject.toml: the ``__version__`` assignment of the module it names."""
        pyproject = tomllib.loads((self.root / "pyproject.toml").read_text(encoding="utf-8"))
        module, _, attribute = pyproject["tool"]["setuptools"]["dynamic"]["version"]["attr"].rpartition(".")
        assert attribute == "__version__" and module.split(".")[0] == self.package, module
        path = self.source.parent.joinpath(*module.split("."))
        path = path / "__init__.py" if path.is_dir() else path.with_suffix(".py")
        found = re.search(r'^__version__ = "([^"]+)"$', path.read_text(encoding="utf-8"), re.MULTILINE)
        assert found is not None, f"{path}: no __version__ assignment"
        return found.group(1)

    def package_files(self) -> set[str]:
        """The package's files in the repository, relative to ``src/`` (what both artifacts must carry)."""
        return {
            path.relative_to(self.source.parent).as_posix()
            for pattern in ("*.py", "py.typed")
            for path in self.source.rglob(pattern)
            if "__pycache__" not in path.parts
        }


SLOTLOCK = Library("slotlock", "slotlock", REPO_ROOT / "packages" / "slotlock")
SLOTLOCK_CDK = Library("slotlock-cdk", "slotlock_cdk", REPO_ROOT / "packages" / "slotlock-cdk")
LIBRARIES = [SLOTLOCK, SLOTLOCK_CDK]


def by_project(library: Library) -> str:
    return library.project


@pytest.fixture(scope="module")
def dist_dir(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """``$SLOTLOCK_DIST_DIR`` (relative to the repository), or a fresh build of both libraries."""
    given = os.environ.get(DIST_DIR_VARIABLE)
    if given:
        path = REPO_ROOT / given
        assert path.is_dir(), f"{DIST_DIR_VARIABLE}={given}: no such directory (run make dist)"
        return path
    out = tmp_path_factory.mktemp("dist")
    for library in LIBRARIES:
        done = subprocess.run(
            [sys.executable, "-m", "build", "--quiet", "--no-isolation", "--outdir", str(out), str(library.root)],
            capture_output=True,
            text=True,
            timeout=BUILD_TIMEOUT_S,
            check=False,
        )
        assert done.returncode == 0, f"building {library.project} failed:\n{done.stdout[-3000:]}\n{done.stderr[-3000:]}"
    return out


def wheel_path(dist_dir: Path, library: Library) -> Path:
    return dist_dir / f"{library.stem}-{library.version}-py3-none-any.whl"


def sdist_path(dist_dir: Path, library: Library) -> Path:
    return dist_dir / f"{library.stem}-{library.version}.tar.gz"


def wheel_names(dist_dir: Path, library: Library) -> list[str]:
    with zipfile.ZipFile(wheel_path(dist_dir, library)) as wheel:
        return wheel.namelist()


def wheel_metadata(dist_dir: Path, library: Library) -> Message:
    with zipfile.ZipFile(wheel_path(dist_dir, library)) as wheel:
        text = wheel.read(f"{library.stem}-{library.version}.dist-info/METADATA").decode()
    return Parser().parsestr(text)


def requirements(metadata: Message) -> dict[str, Requirement]:
    parsed = [Requirement(line) for line in metadata.get_all("Requires-Dist") or []]
    assert len({canonicalize_name(r.name) for r in parsed}) == len(parsed), "a requirement is listed twice"
    return {canonicalize_name(r.name): r for r in parsed}


def test_dist_holds_one_wheel_and_one_sdist_per_library(dist_dir: Path) -> None:
    expected = {p.name for library in LIBRARIES for p in (wheel_path(dist_dir, library), sdist_path(dist_dir, library))}
    assert {p.name for p in dist_dir.iterdir()} == expected


@pytest.mark.parametrize("library", LIBRARIES, ids=by_project)
def test_the_wheel_holds_its_package_and_its_dist_info_only(dist_dir: Path, library: Library) -> None:
    names = wheel_names(dist_dir, library)
    dist_info = f"{library.stem}-{library.version}.dist-info"
    top_levels = {name.split("/")[0] for name in names}
    assert top_levels == {library.package, dist_info}
    assert not {part for name in names for part in name.split("/")[:-1]} & FOREIGN
    assert {name for name in names if not name.startswith(f"{dist_info}/")} == library.package_files()
    assert f"{library.package}/py.typed" in names
    assert f"{dist_info}/licenses/LICENSE" in names


def test_slotlock_metadata(dist_dir: Path) -> None:
    metadata = wheel_metadata(dist_dir, SLOTLOCK)
    assert (metadata["Name"], metadata["Version"]) == ("slotlock", SLOTLOCK.version)
    assert Version(SLOTLOCK.version) >= Version("1.0")
    assert metadata["Requires-Python"] == ">=3.11"
    assert metadata["License-Expression"] == "Apache-2.0"
    assert list(requirements(metadata)) == ["boto3"]  # Lambda's Python runtime ships it: nothing else


def test_slotlock_cdk_metadata(dist_dir: Path) -> None:
    metadata = wheel_metadata(dist_dir, SLOTLOCK_CDK)
    assert (metadata["Name"], metadata["Version"]) == ("slotlock-cdk", SLOTLOCK_CDK.version)
    assert metadata["Requires-Python"] == ">=3.11"
    assert metadata["License-Expression"] == "Apache-2.0"
    required = requirements(metadata)
    assert sorted(required) == ["aws-cdk-lib", "constructs", "slotlock"]
    # slotlock's 1.x line (one table layout): the current version in, the next major out
    slotlock_range = required["slotlock"].specifier
    assert SLOTLOCK.version in slotlock_range and "1.99" in slotlock_range
    assert "2.0" not in slotlock_range and "2.1" not in slotlock_range
    assert any(spec.operator == "<" and spec.version == "2" for spec in slotlock_range)


def test_the_wheels_own_disjoint_files(dist_dir: Path) -> None:
    assert not set(wheel_names(dist_dir, SLOTLOCK)) & set(wheel_names(dist_dir, SLOTLOCK_CDK))


def test_slotlock_all_names_exist_in_the_wheel(dist_dir: Path, tmp_path: Path) -> None:
    """``slotlock.__all__``, imported from the extracted wheel in a fresh interpreter (not from the checkout)."""
    with zipfile.ZipFile(wheel_path(dist_dir, SLOTLOCK)) as wheel:
        wheel.extractall(tmp_path)
    code = (
        "import json, sys; sys.path.insert(0, sys.argv[1]); import slotlock; "
        "print(json.dumps({'file': slotlock.__file__, 'all': slotlock.__all__, "
        "'missing': [n for n in slotlock.__all__ if not hasattr(slotlock, n)]}))"
    )
    done = subprocess.run(
        [sys.executable, "-I", "-c", code, str(tmp_path)], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode == 0, done.stderr
    found = json.loads(done.stdout)
    assert Path(found["file"]).is_relative_to(tmp_path)
    assert {"SlotLock", "once_per_slot"} <= set(found["all"])
    assert found["missing"] == []
    assert len(found["all"]) == len(set(found["all"]))


@pytest.mark.parametrize("library", LIBRARIES, ids=by_project)
def test_the_sdist_holds_its_package_root_only(dist_dir: Path, library: Library) -> None:
    prefix = f"{library.stem}-{library.version}"
    with tarfile.open(sdist_path(dist_dir, library)) as sdist:
        members = [m for m in sdist.getmembers() if m.isfile()]
    names = {m.name for m in members}
    assert all(name.startswith(f"{prefix}/") for name in names), sorted(names)
    relative = {name.removeprefix(f"{prefix}/") for name in names}
    egg_info = f"src/{library.package}.egg-info/"
    generated = {"PKG-INFO", "setup.cfg"} | {name for name in relative if name.startswith(egg_info)}
    own = {"LICENSE", "README.md", "pyproject.toml"} | {f"src/{name}" for name in library.package_files()}
    assert relative - generated == own
    assert {"LICENSE", "README.md", f"src/{library.package}/py.typed"} <= relative
    for name in own:  # the very files of the package root, not copies of others
        assert (library.root / name).is_file(), name
