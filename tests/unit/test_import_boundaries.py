"""The import boundaries of the house, checked on the source (no import is executed).

- ``stacks/`` and ``app.py`` (infrastructure) never import ``local/`` (the local tools): a synth needs
  nothing that only exists for local runs; the sample data's schema lives in ``sample_data/``.
- ``lambdas/`` (the runtime, the Lambda asset) never imports ``aws_cdk``, ``local``, ``stacks`` or
  ``sample_data``: the asset holds ``lambdas/`` only.
- ``slotlock`` (``packages/slotlock``) depends on boto3/botocore and the standard library only.
- ``athena_sql`` (Athena's SQL, offline: synth, ``check`` and the local engine use it) depends on sqlglot and the
  standard library only.
- ``slotlock_cdk`` (``packages/slotlock-cdk``) imports aws_cdk, constructs, jsii, slotlock and the standard library
  only: never this project's ``stacks``, ``athena_refresh`` or ``cdk_nag``.
- Outside ``slotlock`` and the tests, nothing imports an internal ``slotlock._*`` module (the local tools may).
- ``examples/`` are apps as a user writes them: they import the libraries' public API (``make example`` installs
  the wheels), the CDK, cdk-nag, boto3, pytest and their own modules, never this repository's other packages.
- No import cycle between the project's own modules (a package's ``__init__`` is a module of its own): every import
  counts, at module level or inside a function, except those under ``if TYPE_CHECKING:``. Break a cycle at the
  right depth (move the shared piece to the module that owns it, or invert the dependency), never by hiding an
  import.
"""

from __future__ import annotations

import ast
import re
import sys
import tomllib
from collections.abc import Iterable, Iterator, Mapping
from dataclasses import dataclass
from pathlib import Path

import pytest

REPO_ROOT = Path(__file__).resolve().parents[2]


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


@pytest.mark.parametrize("path", python_files("athena_sql"), ids=lambda p: str(p.relative_to(REPO_ROOT)))
def test_athena_sql_depends_on_sqlglot_only(path: Path) -> None:
    allowed = set(sys.stdlib_module_names) | {"sqlglot", "athena_sql"}
    assert imported_top_levels(path) <= allowed, imported_top_levels(path) - allowed


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


# --- No import cycle between the project's own modules -------------------------------------------------------------

#: Top-level module name -> its source (a package directory, or ``app.py``); pyproject's [tool.setuptools] mapping.
PROJECT_MODULES = {
    "athena_refresh": "lambdas/athena_refresh",
    "results_api": "lambdas/results_api",
    "slotlock": SLOTLOCK,
    "slotlock_cdk": SLOTLOCK_CDK,
    "stacks": "stacks",
    "tools": "tools",
    "bench": "bench",
    "athena_sql": "athena_sql",
    "local": "local",
    "sample_data": "sample_data",
    "app": "app.py",
}


def test_the_cycle_check_walks_every_package_the_project_ships() -> None:
    setuptools = tomllib.loads((REPO_ROOT / "pyproject.toml").read_text(encoding="utf-8"))["tool"]["setuptools"]
    tops = {name.split(".")[0] for name in setuptools["packages"]}
    assert tops <= PROJECT_MODULES.keys(), tops - PROJECT_MODULES.keys()
    assert all(PROJECT_MODULES[top] == source for top, source in setuptools["package-dir"].items())


@dataclass(frozen=True)
class ImportEdge:
    """``importer`` imports ``imported`` (dotted module names) at ``path``:``line``."""

    importer: str
    imported: str
    path: Path
    line: int

    def __str__(self) -> str:
        where = self.path.relative_to(REPO_ROOT) if self.path.is_relative_to(REPO_ROOT) else self.path
        return f"{self.importer} -> {self.imported} ({where}:{self.line})"


def module_sources(roots: Mapping[str, Path]) -> dict[str, tuple[Path, bool]]:
    """Dotted module name -> (source file, is a package ``__init__``), for every ``.py`` under ``roots``.

    ``roots`` maps a top-level name to its package directory or its single-module file.
    """
    sources: dict[str, tuple[Path, bool]] = {}
    for top, root in roots.items():
        if root.is_file():
            sources[top] = (root, False)
            continue
        for path in sorted(root.rglob("*.py")):
            parts = path.relative_to(root).with_suffix("").parts
            is_package = parts[-1] == "__init__"
            sources[".".join((top, *(parts[:-1] if is_package else parts)))] = (path, is_package)
    return sources


def is_type_checking_guard(test: ast.expr) -> bool:
    """``TYPE_CHECKING`` or ``typing.TYPE_CHECKING``, the guard of imports made for the type checker only."""
    if isinstance(test, ast.Name):
        return test.id == "TYPE_CHECKING"
    return isinstance(test, ast.Attribute) and test.attr == "TYPE_CHECKING"


def runtime_imports(tree: ast.AST) -> Iterator[ast.Import | ast.ImportFrom]:
    """Every import statement of ``tree`` (any depth) outside the body of an ``if TYPE_CHECKING:`` block."""
    stack = [tree]
    while stack:
        node = stack.pop()
        if isinstance(node, ast.Import | ast.ImportFrom):
            yield node
        elif isinstance(node, ast.If) and is_type_checking_guard(node.test):
            stack.extend(node.orelse)
        else:
            stack.extend(ast.iter_child_nodes(node))


def import_edges(roots: Mapping[str, Path]) -> list[ImportEdge]:
    """The import graph of the modules under ``roots`` (see :func:`module_sources`): only edges between them.

    ``import a.b.c`` is an edge to ``a.b.c``; ``from a.b import c`` to ``a.b.c`` when that is a module, else to
    ``a.b``; relative imports are resolved against the importer. No implicit edge to a parent package's
    ``__init__``; a module importing itself (``from . import name`` in an ``__init__``) is no edge.
    """
    sources = module_sources(roots)
    edges: list[ImportEdge] = []
    for importer, (path, is_package) in sources.items():
        package = importer.split(".") if is_package else importer.split(".")[:-1]
        for node in runtime_imports(ast.parse(path.read_text(encoding="utf-8"), filename=str(path))):
            if isinstance(node, ast.Import):
                targets = [alias.name for alias in node.names]
            elif node.level > len(package):
                continue  # a relative import beyond the top-level package: Python refuses it
            else:
                base = package[: len(package) - node.level + 1] if node.level else []
                module = ".".join([*base, *([node.module] if node.module else [])])
                targets = [f"{module}.{a.name}" if f"{module}.{a.name}" in sources else module for a in node.names]
            edges.extend(
                ImportEdge(importer, target, path, node.lineno)
                for target in dict.fromkeys(targets)
                if target in sources and target != importer
            )
    return edges


def import_cycles(edges: Iterable[ImportEdge]) -> list[list[str]]:
    """The strongly connected components of more than one module, each sorted, in sorted order (Tarjan, iterative)."""
    graph: dict[str, list[str]] = {}
    for edge in edges:
        graph.setdefault(edge.importer, []).append(edge.imported)
        graph.setdefault(edge.imported, [])
    index: dict[str, int] = {}
    lowlink: dict[str, int] = {}
    on_stack: set[str] = set()
    stack: list[str] = []
    components: list[list[str]] = []
    for start in sorted(graph):
        if start in index:
            continue
        work = [(start, iter(graph[start]))]
        index[start] = lowlink[start] = len(index)
        stack.append(start)
        on_stack.add(start)
        while work:
            node, successors = work[-1]
            for successor in successors:
                if successor not in index:
                    index[successor] = lowlink[successor] = len(index)
                    stack.append(successor)
                    on_stack.add(successor)
                    work.append((successor, iter(graph[successor])))
                    break
                if successor in on_stack:
                    lowlink[node] = min(lowlink[node], index[successor])
            else:
                work.pop()
                if work:
                    lowlink[work[-1][0]] = min(lowlink[work[-1][0]], lowlink[node])
                if lowlink[node] == index[node]:
                    component = []
                    while (member := stack.pop()) != node:
                        component.append(member)
                    component.append(node)
                    on_stack.difference_update(component)
                    if len(component) > 1:
                        components.append(sorted(component))
    return sorted(components)


def describe_cycles(edges: list[ImportEdge]) -> str:
    """One paragraph per cycle: its modules, then every import edge inside it with its file:line."""
    paragraphs = []
    for component in import_cycles(edges):
        members = set(component)
        inside = sorted(
            (e for e in edges if e.importer in members and e.imported in members),
            key=lambda e: (e.importer, e.line, e.imported),
        )
        lines = [f"cycle of {len(component)} modules: {', '.join(component)}", *(f"  {edge}" for edge in inside)]
        paragraphs.append("\n".join(lines))
    return "\n\n".join(paragraphs)


def test_the_project_has_no_import_cycle() -> None:
    edges = import_edges({top: REPO_ROOT / source for top, source in PROJECT_MODULES.items()})
    assert import_cycles(edges) == [], "break each import cycle at the right depth:\n\n" + describe_cycles(edges)


# The walker itself, on synthetic module trees.


def edges_of(tmp_path: Path, files: dict[str, str], top: str = "pkg") -> set[tuple[str, str, int]]:
    """Write ``files`` (path under ``tmp_path`` -> source) and return the import edges of package ``top``."""
    for name, source in files.items():
        (tmp_path / name).parent.mkdir(parents=True, exist_ok=True)
        (tmp_path / name).write_text(source, encoding="utf-8")
    return {(e.importer, e.imported, e.line) for e in import_edges({top: tmp_path / top})}


def test_imports_for_the_type_checker_only_are_no_edge(tmp_path: Path) -> None:
    files = {
        "pkg/__init__.py": "",
        "pkg/a.py": "import typing\nfrom typing import TYPE_CHECKING\nif TYPE_CHECKING:\n    from pkg import b\n"
        "if typing.TYPE_CHECKING:\n    import pkg.b\nelse:\n    import pkg.c\n",
        "pkg/b.py": "from pkg import a\n",
        "pkg/c.py": "",
    }
    assert edges_of(tmp_path, files) == {("pkg.a", "pkg.c", 8), ("pkg.b", "pkg.a", 1)}


def test_an_import_inside_a_function_is_an_edge_and_closes_a_cycle(tmp_path: Path) -> None:
    files = {
        "pkg/__init__.py": "",
        "pkg/a.py": "from pkg.b import helper\n",
        "pkg/b.py": "def helper():\n    class Inner:\n        def run(self):\n            from pkg import a\n",
    }
    edges_of(tmp_path, files)
    edges = import_edges({"pkg": tmp_path / "pkg"})
    assert {(e.importer, e.imported, e.line) for e in edges} == {("pkg.a", "pkg.b", 1), ("pkg.b", "pkg.a", 4)}
    assert import_cycles(edges) == [["pkg.a", "pkg.b"]]
    message = describe_cycles(edges)
    assert "cycle of 2 modules: pkg.a, pkg.b" in message
    assert f"pkg.b -> pkg.a ({tmp_path / 'pkg' / 'b.py'}:4)" in message


def test_relative_imports_resolve_against_the_importer(tmp_path: Path) -> None:
    files = {
        "pkg/__init__.py": "from .sub import c\n",
        "pkg/a.py": "",
        "pkg/sub/__init__.py": "from .c import name\nfrom . import d\n",
        "pkg/sub/c.py": "from ..a import name\nfrom . import d, other_name\nfrom .. import a\n",
        "pkg/sub/d.py": "from ...pkg import a\n",  # beyond the top-level package: Python refuses it
    }
    assert edges_of(tmp_path, files) == {
        ("pkg", "pkg.sub.c", 1),
        ("pkg.sub", "pkg.sub.c", 1),
        ("pkg.sub", "pkg.sub.d", 2),
        ("pkg.sub.c", "pkg.a", 1),
        ("pkg.sub.c", "pkg.sub.d", 2),
        ("pkg.sub.c", "pkg.sub", 2),  # other_name is no module: the package's __init__
        ("pkg.sub.c", "pkg.a", 3),
    }


def test_from_a_package_import_a_submodule_is_an_edge_to_the_submodule_only(tmp_path: Path) -> None:
    files = {
        "pkg/__init__.py": "VALUE = 1\nfrom pkg import VALUE as again\n",
        "pkg/a.py": "from pkg import b, VALUE\nimport pkg.sub.c\nimport os.path, json\n",
        "pkg/b.py": "",
        "pkg/sub/__init__.py": "",
        "pkg/sub/c.py": "from pkg import sub\n",
    }
    # no implicit edge to a parent package's __init__ (import pkg.sub.c), none from the package to itself
    assert edges_of(tmp_path, files) == {
        ("pkg.a", "pkg.b", 1),
        ("pkg.a", "pkg", 1),
        ("pkg.a", "pkg.sub.c", 2),
        ("pkg.sub.c", "pkg.sub", 1),
    }


def test_a_single_file_module_and_separate_cycles(tmp_path: Path) -> None:
    (tmp_path / "app.py").write_text("import pkg.a\n", encoding="utf-8")
    edges_of(
        tmp_path,
        {
            "pkg/__init__.py": "from pkg import a\n",
            "pkg/a.py": "import pkg.b\n",
            "pkg/b.py": "import pkg\n",
            "pkg/c.py": "import app\nfrom pkg import d\n",
            "pkg/d.py": "import pkg.c\n",
        },
    )
    edges = import_edges({"pkg": tmp_path / "pkg", "app": tmp_path / "app.py"})
    assert ("app", "pkg.a") in {(e.importer, e.imported) for e in edges}
    assert import_cycles(edges) == [["pkg", "pkg.a", "pkg.b"], ["pkg.c", "pkg.d"]]


def test_the_cycle_finder_needs_no_deep_recursion() -> None:
    n = 5 * sys.getrecursionlimit()
    chain = [ImportEdge(f"m{i}", f"m{i + 1}", Path("x.py"), i) for i in range(n)]
    assert import_cycles(chain) == []
    cycle = import_cycles([*chain, ImportEdge(f"m{n}", "m0", Path("x.py"), n)])
    assert len(cycle) == 1 and len(cycle[0]) == n + 1
