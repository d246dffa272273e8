"""Benchmarks: our fenced slot lease against its peers, side by side on the same DynamoDB endpoint.

``make bench`` (or ``.venv-bench/bin/python -m bench``) measures, on AWS DynamoDB Local and on the atomic
moto server, for the floor (one conditional PutItem), slotlock, a reference fenced lease, Powertools'
idempotency utility and python-dynamodb-lock:

1. requests per slot for the winner and each loser (botocore event hooks) and capacity units;
2. uncontended cycle latency and throughput, as a ratio to the floor;
3. contended races of 2, 8 and 32 processes released by a barrier: time until all returned, job runs;
4. takeover after SIGKILL of the holder;
5. cold start of the real handler: import time, peak RSS of one invocation, asset size;
6. Athena queries started per slot under fan-out, with our lease and with no lock.

It prints tables and writes ``bench-report.json``. Performance goals live here, never in timed tests.
Modules: ``backends`` (endpoints), ``counting`` (request hooks), ``contenders`` (adapters), ``slots`` (what every
scenario shares: slots, tables, racer processes), ``scenarios`` over ``accounting`` (1-4), ``coldstart`` and
``invoke_once`` (5), ``fanout`` (6), ``read_path`` over ``read_seed`` (7), ``cost`` (8; 9 measured by
``cost_measure``, priced by ``cost_slot`` with the one cost model, :mod:`athena_refresh.cost`), ``scaling`` (10),
``report`` (the one report writer: targets, rendering, ``bench-report.json``) over ``report_tables`` (its tables,
in the one renderer's Markdown: :func:`tools.cli.render.markdown_table`) and ``stats``.
"""
