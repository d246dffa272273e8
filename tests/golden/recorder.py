"""Record every DynamoDB request a client sends, labelled by scenario step, and compare transcripts.

:class:`Recorder` hooks botocore's ``before-call`` event (as ``RequestLog`` in tests/integration/slotlock/conftest.py
does): it fires once per API call the caller makes, botocore's own resends are below it, and its ``body`` is the
JSON request as it goes on the wire. Each entry is ``{"step", "operation", "request"}``.

A transcript must be the same on every run, so the few values that are random by design are replaced by stable
labels (:func:`stabilise`), each only after checking it has the random form expected:

- ``record_id`` of a MISSED record (``slotlock._missed``: ``uuid.uuid4().hex``, how a racer recognises its own
  resent write): any String attribute value that is a version-4 UUID in hex becomes ``<uuid4 #k>``, numbered by
  first appearance across the transcript, so a value sent twice keeps one label;
- ``ClientRequestToken`` of a ``TransactWriteItems``: botocore fills a random ``uuid4`` when the caller sends
  none (the field is an idempotency token in the service model): ``<botocore uuid4>``; slotlock's own token
  (``_client.LockTableClient.transact(idempotent=True)``) is a digest of the raw ``TransactItems`` and the attempt
  number, and so changes with any placeholder rename: it is recomputed here from the items as sent and replaced
  by ``<sha256([TransactItems, n])[:36]>`` (n the attempt), or left raw when it matches neither form.

Then placeholders are renamed canonically (:func:`tests.golden.normalise.normalise_request`).
"""

from __future__ import annotations

import hashlib
import json
import re
import uuid
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any, Self

from tests.golden.normalise import normalise_request

_UUID4_HEX = re.compile(r"[0-9a-f]{12}4[0-9a-f]{3}[89ab][0-9a-f]{15}")
MAX_DIGEST_ATTEMPT = 20  # slotlock's max_transient_attempts is 1..20


class Recorder:
    """Collects ``(step, operation, body)`` for every call of ``client`` while registered."""

    def __init__(self, client: Any) -> None:
        self.client = client
        self.step = "(no step)"
        self.calls: list[tuple[str, str, dict[str, Any]]] = []

    def __enter__(self) -> Self:
        self.client.meta.events.register("before-call.dynamodb", self._before_call)
        return self

    def __exit__(self, *_: object) -> None:
        self.client.meta.events.unregister("before-call.dynamodb", self._before_call)

    def _before_call(self, model: Any, params: dict[str, Any], **_: Any) -> None:
        body = params.get("body") or b"{}"
        self.calls.append((self.step, model.name, json.loads(body)))
        # Returning None matters: a value returned from before-call would short-circuit the request.

    @contextmanager
    def labelled(self, step: str) -> Iterator[None]:
        """Label the requests sent inside the block with ``step``."""
        self.step = step
        try:
            yield
        finally:
            self.step = "(no step)"

    def transcript(self) -> list[dict[str, Any]]:
        """The calls so far, stabilised and normalised: ``[{"step", "operation", "request"}, ...]``."""
        uuids: dict[str, str] = {}
        return [
            {"step": step, "operation": operation, "request": normalise_request(stabilise(operation, body, uuids))}
            for step, operation, body in self.calls
        ]


def stabilise(operation: str, body: dict[str, Any], uuids: dict[str, str]) -> dict[str, Any]:
    """``body`` with its random values labelled (module docstring); ``uuids`` carries the labels across calls."""
    result: dict[str, Any] = _label_uuids(body, uuids)
    token = body.get("ClientRequestToken")
    if operation == "TransactWriteItems" and isinstance(token, str):
        result["ClientRequestToken"] = _token_label(token, body["TransactItems"])
    return result


def _label_uuids(value: Any, uuids: dict[str, str]) -> Any:
    if isinstance(value, list):
        return [_label_uuids(item, uuids) for item in value]
    if not isinstance(value, dict):
        return value
    if set(value) == {"S"} and isinstance(value["S"], str) and _UUID4_HEX.fullmatch(value["S"]):
        return {"S": uuids.setdefault(value["S"], f"<uuid4 #{len(uuids) + 1}>")}
    return {key: _label_uuids(item, uuids) for key, item in value.items()}


def _token_label(token: str, items: list[Any]) -> str:
    for attempt in range(1, MAX_DIGEST_ATTEMPT + 1):
        canonical = json.dumps([items, attempt], sort_keys=True, separators=(",", ":"), default=repr)
        if hashlib.sha256(canonical.encode()).hexdigest()[:36] == token:
            return f"<sha256([TransactItems, {attempt}])[:36]>"
    try:
        if uuid.UUID(token).version == 4:
            return "<botocore uuid4>"
    except ValueError:
        pass
    return token


def first_difference(golden: Any, now: Any, path: str = "") -> tuple[str, Any, Any] | None:
    """The first key path (``a.b[2].c``) where ``now`` differs from ``golden``, with both values; ``None`` when
    equal. Mapping keys are visited in the golden's order, then the keys only ``now`` has."""
    if isinstance(golden, dict) and isinstance(now, dict):
        for key in [*golden, *(key for key in now if key not in golden)]:
            where = f"{path}.{key}" if path else str(key)
            if key not in now:
                return where, golden[key], "<absent>"
            if key not in golden:
                return where, "<absent>", now[key]
            found = first_difference(golden[key], now[key], where)
            if found:
                return found
        return None
    if isinstance(golden, list) and isinstance(now, list):
        for index, (old, new) in enumerate(zip(golden, now, strict=False)):
            found = first_difference(old, new, f"{path}[{index}]")
            if found:
                return found
        if len(golden) != len(now):
            return f"{path} (length)", len(golden), len(now)
        return None
    return None if golden == now else (path or "(root)", golden, now)


def compare(golden: list[dict[str, Any]], now: list[dict[str, Any]]) -> str | None:
    """A readable report of the first request of ``now`` that differs from its golden twin (same position), or
    of a missing/extra request; ``None`` when the transcripts are equal."""
    for index, (old, new) in enumerate(zip(golden, now, strict=False)):
        found = first_difference(old, new)
        if found is None:
            continue
        where, expected, got = found
        return (
            f"request #{index} differs, step {old['step']!r} ({old['operation']}), now step {new['step']!r} "
            f"({new['operation']}):\n  first differing key: {where}\n  golden: {_short(expected)}\n"
            f"  now:    {_short(got)}{_text_difference(expected, got)}"
        )
    if len(golden) == len(now):
        return None
    if len(now) > len(golden):
        extra = now[len(golden)]
        return f"{len(now) - len(golden)} request(s) more than golden; first: #{len(golden)} step {extra['step']!r} ({extra['operation']})"
    missing = golden[len(now)]
    return f"{len(golden) - len(now)} request(s) fewer than golden; first missing: #{len(now)} step {missing['step']!r} ({missing['operation']})"


def _text_difference(expected: Any, got: Any, context: int = 30) -> str:
    """Where two strings first differ, with a little text around it (empty for other values)."""
    if not (isinstance(expected, str) and isinstance(got, str)):
        return ""
    at = next((i for i, (a, b) in enumerate(zip(expected, got, strict=False)) if a != b), min(len(expected), len(got)))
    start = max(0, at - context)
    return (
        f"\n  first differing character: {at}\n  golden: ...{expected[start : at + context]!r}\n"
        f"  now:    ...{got[start : at + context]!r}"
    )


def _short(value: Any, limit: int = 600) -> str:
    text = json.dumps(value, sort_keys=True)
    return text if len(text) <= limit else text[:limit] + "..."
