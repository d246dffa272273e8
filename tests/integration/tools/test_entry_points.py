"""Every command-line entry point turns an environment problem into one line and its documented exit status.

Each test runs the real entry (``sys.executable -m <module>``) in a sanitized environment: no ``AWS_*`` variable
of this machine, ``AWS_CONFIG_FILE``/``AWS_SHARED_CREDENTIALS_FILE`` empty files, the instance metadata service
off (nothing leaves the machine), ``HOME`` a temporary directory and ``PATH`` an empty one (no ``node``, ``java``
or ``npm``: what a machine without them sees). Nothing is downloaded: DynamoDB Local is looked for under the
temporary ``HOME``, and with no ``npm`` on PATH it is not fetched. Every network address is loopback; every child
is bounded by a timeout.

The problems: ``tools.ops`` with no region (its ``refused:`` line, exit 1) and with an endpoint that refuses
connections; ``tools.results`` with no region, then no credentials (exit 2); ``tools.cost`` without ``node`` for
the synth (exit 1); ``local.serve`` with no demo store (exit 2) and with its port taken (exit 1); ``local.demo``
with a work directory it cannot create (exit 2), and (in process) with a moto server that does not start;
``local.chaos`` without DynamoDB Local (exit 2).
"""

from __future__ import annotations

import json
import socket
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from athena_refresh.catalog import catalog_document
from local.emulators.dynamodb_local import NPM_PACKAGE, NPM_VERSION
from stacks.jobs import load_repo_jobs
from stacks.runtime_asset import catalog_queries

REPO_ROOT = Path(__file__).resolve().parents[3]
CHILD_TIMEOUT_S = 120  # each child needs a second or two; bounded so a hang fails instead of blocking the suite


@dataclass
class Ran:
    status: int
    out: str
    err: str

    def one_line(self, stream: str) -> str:
        """The only line of ``stream`` (``"out"`` or ``"err"``), the other stream being empty of tracebacks."""
        text = self.out if stream == "out" else self.err
        assert "Traceback" not in self.out + self.err, self.out + self.err
        assert text.endswith("\n") and text.count("\n") == 1, (self.out, self.err)
        return text.rstrip("\n")


@pytest.fixture
def sandbox(tmp_path: Path) -> Iterator[dict[str, str]]:
    """The sanitized environment of the children (see the module docstring)."""
    home, bin_dir = tmp_path / "home", tmp_path / "bin"
    home.mkdir()
    bin_dir.mkdir()
    empty = tmp_path / "empty-aws-file"
    empty.write_text("")
    yield {
        "HOME": str(home),
        "PATH": str(bin_dir),
        "AWS_CONFIG_FILE": str(empty),
        "AWS_SHARED_CREDENTIALS_FILE": str(empty),
        "AWS_EC2_METADATA_DISABLED": "true",
        "PYTHONDONTWRITEBYTECODE": "1",
        "LANG": "C.UTF-8",
    }


def run(env: dict[str, str], module: str, *argv: str) -> Ran:
    """``python -m module argv`` in ``env`` alone (nothing of this process's environment is inherited)."""
    done = subprocess.run(
        [sys.executable, "-m", module, *argv],
        cwd=REPO_ROOT,
        env=env,
        capture_output=True,
        text=True,
        timeout=CHILD_TIMEOUT_S,
        check=False,
    )
    return Ran(done.returncode, done.stdout, done.stderr)


def closed_port() -> int:
    """A loopback port nobody listens on (bound, then released)."""
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


EXPLICIT = ["--lock-table", "locks-table", "--results-table", "results-table"]


# ---- tools.ops ------------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_ops_status_without_a_region_is_one_refused_line_and_exit_1(sandbox: dict[str, str]) -> None:
    ran = run(sandbox, "tools.ops", "status")
    assert ran.status == 1 and ran.err == ""
    assert (
        ran.one_line("out")
        == "refused: no AWS region: pass --region, or set AWS_REGION (or a region in the AWS profile)"
    )


@pytest.mark.slow
def test_ops_status_on_an_unreachable_endpoint_is_one_refused_line_and_exit_1(sandbox: dict[str, str]) -> None:
    port = closed_port()
    # the first request reads the job registry (SSM), then DynamoDB: both at the closed port, nothing leaves
    endpoints = {"AWS_ENDPOINT_URL_SSM": f"http://127.0.0.1:{port}"}
    env = sandbox | {"AWS_ACCESS_KEY_ID": "testing", "AWS_SECRET_ACCESS_KEY": "testing"} | endpoints
    argv = ["--region", "us-east-1", *EXPLICIT]
    ran = run(env, "tools.ops", *argv, "--endpoint-url", f"http://127.0.0.1:{port}", "status")
    assert ran.status == 1 and ran.err == ""
    line = ran.one_line("out")  # never wrapped, however long
    assert line.startswith("refused: ") and f'Could not connect to the endpoint URL: "http://127.0.0.1:{port}/"' in line


# ---- tools.results --------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_results_without_a_region_or_credentials_is_one_error_line_and_exit_2(sandbox: dict[str, str]) -> None:
    ran = run(sandbox, "tools.results", "jobs")
    assert ran.status == 2 and ran.out == ""
    assert ran.one_line("err").startswith("error: no AWS region: pass --region")

    ran = run(sandbox, "tools.results", "--region", "us-east-1", "jobs", *EXPLICIT)
    assert ran.status == 2 and ran.out == ""
    assert ran.one_line("err").startswith("error: no AWS credentials found: set AWS_PROFILE (or --profile)")


# ---- tools.cost -----------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_cost_without_node_for_the_synth_is_one_error_line_and_exit_1(sandbox: dict[str, str]) -> None:
    ran = run(sandbox, "tools.cost", "--format", "json")
    assert ran.status == 1 and ran.out == ""
    assert ran.one_line("err") == (
        "error: `node` is not on PATH: the stack's synth (its alarms) needs Node.js 20+ (install it, or set JSII_NODE)"
    )


# ---- local.serve ----------------------------------------------------------------------------------------------
def minimal_store(workdir: Path) -> Path:
    """A valid, empty store of the demo (what ``make serve`` needs to get as far as listening)."""
    store = workdir / "store"
    (store / "dynamodb").mkdir(parents=True)
    tables = []
    for kind, name in (("lock", "demo-locks"), ("results", "demo-results")):
        (store / "dynamodb" / f"{name}.jsonl").write_text("")
        tables.append({"kind": kind, "name": name, "file": f"dynamodb/{name}.jsonl", "items": 0})
    manifest = {
        "kind": "athena-refresh-demo-store",
        "format": 1,
        "created_at": "2026-11-22T00:00:00Z",
        "region": "us-east-1",
        "lock_table": "demo-locks",
        "results_table": "demo-results",
        "bucket": None,
        "catalog": catalog_document(catalog_queries(load_repo_jobs(REPO_ROOT)[1])),
        "tables": tables,
        "objects": [],
        "counts": {"lock_items": 0, "result_items": 0, "objects": 0, "object_bytes": 0},
    }
    (store / "manifest.json").write_text(json.dumps(manifest))
    return store


@pytest.mark.slow
def test_serve_without_a_store_is_one_line_and_exit_2(sandbox: dict[str, str], tmp_path: Path) -> None:
    ran = run(sandbox, "local.serve", "--workdir", str(tmp_path / "no-demo"), "--port", "0")
    assert ran.status == 2 and ran.out == ""
    line = ran.one_line("err")
    assert line.startswith("no demo results in ") and line.endswith("run `make demo` first, then `make serve`")


@pytest.mark.slow
def test_serve_on_a_taken_port_is_one_line_and_exit_1(sandbox: dict[str, str], tmp_path: Path) -> None:
    from local.serve.store import read_manifest

    read_manifest(minimal_store(tmp_path))  # the store itself is fine: only the port is in the way
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen(1)
        port = taken.getsockname()[1]
        ran = run(sandbox, "local.serve", "--workdir", str(tmp_path), "--port", str(port))
    assert ran.status == 1 and ran.out == ""
    line = ran.one_line("err")
    assert line.startswith(f"cannot listen on 127.0.0.1:{port}: ") and line.endswith("PORT=8081 make serve")
    assert not (tmp_path / "serve-moto.log").exists()  # refused before the moto server started


# ---- local.demo -----------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_demo_with_a_workdir_it_cannot_create_is_one_line_and_exit_2(sandbox: dict[str, str], tmp_path: Path) -> None:
    blocker = tmp_path / "a-file"
    blocker.write_text("not a directory")
    ran = run(sandbox, "local.demo", "--workdir", str(blocker / "demo"), "--report", str(tmp_path / "report.json"))
    assert ran.status == 2 and ran.out == ""
    assert ran.one_line("err") == f"the demo could not run: {blocker / 'demo' / 'engine'}: Not a directory"
    assert not (tmp_path / "report.json").exists()


def test_demo_whose_moto_server_does_not_start_is_one_line_and_exit_2(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    from local.demo import cli
    from local.emulators import atomic_moto

    def exits_at_once(**_: object) -> None:
        raise atomic_moto.AtomicMotoError("atomic moto server exited with code 1 before it was ready")

    monkeypatch.setattr(atomic_moto, "start_server_process", exits_at_once)
    status = cli.main(["--workdir", str(tmp_path / "demo"), "--report", str(tmp_path / "report.json")])
    captured = capsys.readouterr()
    assert status == 2 and "Traceback" not in captured.out + captured.err
    assert captured.err == (
        "the demo could not run: the local moto server did not start: atomic moto server exited with code 1 before"
        " it was ready\n"
    )


# ---- local.chaos ----------------------------------------------------------------------------------------------
@pytest.mark.slow
def test_chaos_without_dynamodb_local_is_one_line_and_exit_2(sandbox: dict[str, str], tmp_path: Path) -> None:
    # HOME is empty (no DynamoDB Local fetched under ~/.cache) and PATH has neither npm (to fetch it) nor java.
    argv = ["--racers", "2", "--slots", "3", "--no-control", "--workdir", str(tmp_path / "chaos")]
    ran = run(sandbox, "local.chaos", *argv, "--report", str(tmp_path / "chaos-report.json"))
    assert ran.status == 2 and ran.out == ""
    assert ran.one_line("err") == (
        f"chaos harness failed: DynamoDB Local is unavailable: npm is not on PATH: it is needed to fetch {NPM_PACKAGE}@{NPM_VERSION}"
    )
    assert not (tmp_path / "chaos-report.json").exists()
