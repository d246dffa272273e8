"""Child process of the cold-start figure: import the real handler, invoke it once, report and exit.

``python -m bench.invoke_once --slot 2024-01-01T00:00:00Z`` with the environment the stack gives the
function (``bench.coldstart.lambda_environment``): ``AWS_ENDPOINT_URL`` points every boto3 client of the
handler (DynamoDB, Athena, S3) at the atomic moto server, and ``LAMBDA_TASK_ROOT`` plus a trace header make
Powertools' Tracer run as in Lambda (tracing is ACTIVE in the stack). Besides the handler's own JSON logs,
prints one line ``BENCH-RESULT {"import_s": ..., "invoke_s": ..., "peak_rss_kb": ..., ...}``.

``peak_rss_kb`` is the process's high-water mark (``VmHWM``): interpreter, imports, clients and the
invocation, the figure to hold against the function's configured memory. (Not ``ru_maxrss``: Linux carries
it across ``execve``, so it would report the parent's peak at fork time.)
"""

from __future__ import annotations

import argparse
import json
import sys
import time
import uuid
from pathlib import Path

RESULT_PREFIX = "BENCH-RESULT "


def _status_kb(field: str) -> int | None:
    try:
        for line in Path("/proc/self/status").read_text().splitlines():
            if line.startswith(field + ":"):
                return int(line.split()[1])
    except OSError:
        return None
    return None


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(prog="python -m bench.invoke_once", description=__doc__.splitlines()[0])
    parser.add_argument("--slot", required=True, help="scheduled time of the slot (ISO 8601, UTC)")
    parser.add_argument("--timeout-ms", type=int, default=60_000)
    parser.add_argument("--memory-mb", type=int, default=256)
    args = parser.parse_args(argv)

    started = time.perf_counter()
    from athena_refresh.handler import lambda_handler  # the cold start: module-level Powertools objects

    imported = time.perf_counter()
    rss_after_import = _status_kb("VmRSS")
    from local.emulators.lambda_runtime import LambdaContext

    context = LambdaContext(
        aws_request_id=str(uuid.uuid4()),
        function_name="athena-refresh-bench",
        timeout_ms=args.timeout_ms,
        memory_limit_in_mb=args.memory_mb,
    )
    event = {"scheduled_time": args.slot, "execution_id": str(uuid.uuid4()), "racer": 1}
    outcome = lambda_handler(event, context)
    done = time.perf_counter()
    print(
        RESULT_PREFIX
        + json.dumps(
            {
                "import_s": imported - started,
                "invoke_s": done - imported,
                "rss_after_import_kb": rss_after_import,
                "peak_rss_kb": _status_kb("VmHWM"),
                "status": outcome.get("status"),
                "queries_started": outcome.get("queries_started"),
            }
        ),
        file=sys.__stdout__,
        flush=True,
    )
    return 0


if __name__ == "__main__":
    sys.exit(main())
