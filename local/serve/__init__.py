"""``make serve``: the read API (``results_api``) over HTTP on the demo's stored results (see :mod:`local.serve.cli`)."""
