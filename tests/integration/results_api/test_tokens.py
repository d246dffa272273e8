"""``results_api.tokens``: a history page's ``next_token`` rebuilds exactly the ``LastEvaluatedKey`` DynamoDB gave
(taken from real Queries on both backends), and anything else is refused as ``next_token`` before any request."""

from __future__ import annotations

import base64
import json
from collections.abc import Iterator
from typing import Any

import pytest

from results_api import tokens
from results_api.errors import BadParameterError
from results_api.reader import ResultsReader
from slotlock import Slot, SlotHistory

pytestmark = pytest.mark.backends("moto", "dynamodb-local")

JOB = "flights-dashboard"
OTHER_JOB = "carrier-on-time"
S0 = Slot.parse("2026-11-22T00:00:00Z")
S1 = Slot.parse("2026-11-22T00:30:00Z")
S3 = Slot.parse("2026-11-22T01:30:00Z")
DIGEST = tokens.query_digest(JOB, None, None, None)
URL_SAFE = set("ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_")


def forge(document: Any) -> str:
    """A token as the API writes one (URL-safe base64 of compact JSON, no padding) around any document."""
    raw = document if isinstance(document, bytes) else json.dumps(document, separators=(",", ":")).encode()
    return base64.urlsafe_b64encode(raw).decode().rstrip("=")


def document(key: str = f"slot#{JOB}#{S0.iso}", epoch: Any = S0.epoch_s, **changes: Any) -> dict[str, Any]:
    return {"v": 1, "k": key, "e": epoch, "q": DIGEST, **changes}


GOOD = forge(document())


@pytest.fixture
def last_keys(ddb: Any) -> Iterator[list[dict[str, Any]]]:
    """Every ``LastEvaluatedKey`` DynamoDB answers a Query with during the test, as botocore parsed it."""
    seen: list[dict[str, Any]] = []

    def remember(parsed: dict[str, Any], **_: Any) -> None:
        if "LastEvaluatedKey" in parsed:
            seen.append(json.loads(json.dumps(parsed["LastEvaluatedKey"])))

    ddb.meta.events.register("after-call.dynamodb.Query", remember)
    yield seen
    ddb.meta.events.unregister("after-call.dynamodb.Query", remember)


# ---------------------------------------------------------------------------------------------------
# round trip (both backends)
# ---------------------------------------------------------------------------------------------------
def test_a_token_rebuilds_exactly_the_key_dynamodb_gave(ddb: Any, world: Any) -> None:
    # GIVEN every position in the job's history, as DynamoDB's own LastEvaluatedKeys of one-item pages,
    # for the whole history and for a selection (bounds and a status)
    history = SlotHistory(world.lock_table, client=ddb)
    selections: list[dict[str, Any]] = [{}, {"since": S1, "until": S3, "status": "SUCCEEDED"}]
    checked = []
    for selection in selections:
        digest = tokens.query_digest(JOB, selection.get("since"), selection.get("until"), selection.get("status"))
        start_key = None
        for _ in range(20):
            page = history.page(JOB, limit=1, start_key=start_key, **selection)
            if page.next_key is None:
                break
            # WHEN the key is encoded as a token and decoded for the same query
            token = tokens.encode(page.next_key, digest)
            rebuilt = tokens.decode(token, job=JOB, digest=digest)
            # THEN the ExclusiveStartKey is DynamoDB's key, attribute for attribute, and the token is URL-safe
            assert rebuilt == page.next_key
            assert set(token) <= URL_SAFE and len(token) <= tokens.MAX_TOKEN_LENGTH
            checked.append(page.next_key["pk"]["S"])
            start_key = rebuilt
    # (positions of the live run and of manual generations were both among them)
    assert len(checked) >= 8
    assert any("#g" in key for key in checked) and any("#g" not in key for key in checked)
    assert all(key.startswith(f"slot#{JOB}#") for key in checked)


def test_the_readers_next_token_is_the_querys_last_evaluated_key(
    reader: ResultsReader, world: Any, last_keys: list[dict[str, Any]], request_log: Any
) -> None:
    # WHEN the history is read page by page through the reader
    token = None
    pages = 0
    while True:
        view = reader.history(JOB, limit=2, next_token=token)
        pages += 1
        if view.next_token is None:
            break
        # THEN each token decodes to the LastEvaluatedKey DynamoDB returned for that page ...
        assert tokens.decode(view.next_token, job=JOB, digest=DIGEST) == last_keys[-1]
        token = view.next_token
    # ... and is handed back to DynamoDB as the next page's ExclusiveStartKey, unchanged
    starts = [query["ExclusiveStartKey"] for query in request_log.requests("Query")[1:]]
    assert starts == last_keys[: len(starts)] and len(starts) == pages - 1 >= 3


def test_a_token_may_continue_with_another_limit(reader: ResultsReader, world: Any) -> None:
    # GIVEN the first page of two records
    first = reader.history(JOB, limit=2)
    assert first.next_token is not None
    # WHEN the rest is read with another limit (the limit is not part of the query's identity)
    rest = reader.history(JOB, limit=10, next_token=first.next_token)
    # THEN the two pages hold every record once
    keys = [(entry["slot"], entry["generation"]) for entry in first.entries + rest.entries]
    assert len(keys) == len(set(keys)) == len(world.history) and rest.next_token is None


@pytest.mark.backends("dynamodb-local")  # moto accepts any start key
def test_a_token_outside_the_querys_bounds_is_refused_by_dynamodb_as_next_token(
    reader: ResultsReader, world: Any
) -> None:
    # GIVEN a well-formed token of this job and query (from S3 on), naming a position before S3
    digest = tokens.query_digest(JOB, S3, None, None)
    token = forge(document(key=f"slot#{JOB}#{S0.iso}", epoch=S0.epoch_s, q=digest))
    # WHEN / THEN DynamoDB refuses the start key, and the reader blames next_token (400), not the backend
    with pytest.raises(BadParameterError) as caught:
        reader.history(JOB, since=S3.iso, next_token=token)
    assert caught.value.parameter == "next_token"


# ---------------------------------------------------------------------------------------------------
# refusals: before any request
# ---------------------------------------------------------------------------------------------------
def flipped(token: str, index: int) -> str:
    alphabet = "ABCDEFGHIJKLMNOPQRSTUVWXYZabcdefghijklmnopqrstuvwxyz0123456789-_"
    replacement = alphabet[(alphabet.index(token[index]) + 17) % len(alphabet)]
    return token[:index] + replacement + token[index + 1 :]


REFUSED: dict[str, str] = {
    "random text": "hello, world",
    "random base64 alphabet": "QUJDREVGR0hJSktMTU5PUA",
    "non-ascii": "ééééééé",
    "percent-encoded": "%7B%22v%22%3A1%7D",
    "truncated": GOOD[:-6],
    "truncated to half": GOOD[: len(GOOD) // 2],
    "one character": GOOD[:1],
    "empty": "",
    "binary": forge(b"\x00\xff\xfe binary \x80"),
    "SQL": forge(b"SELECT 1"),
    "JSON list": forge([1, 2]),
    "JSON string": forge("slot#flights-dashboard#2026-11-22T00:00:00Z"),
    "JSON number": forge(1),
    "JSON null": forge(None),
    "extra field": forge({**document(), "x": 1}),
    "missing v": forge({k: v for k, v in document().items() if k != "v"}),
    "missing k": forge({k: v for k, v in document().items() if k != "k"}),
    "missing e": forge({k: v for k, v in document().items() if k != "e"}),
    "missing q": forge({k: v for k, v in document().items() if k != "q"}),
    "version 2": forge(document(v=2)),
    "version 0": forge(document(v=0)),
    "version text": forge(document(v="1")),
    "version true": forge(document(v=True)),
    "version 1.0": forge(document(v=1.0)),
    "version null": forge(document(v=None)),
    "another job's key": forge(document(key=f"slot#{OTHER_JOB}#{S0.iso}")),
    "a longer job name's key": forge(document(key=f"slot#{JOB}-2#{S0.iso}")),
    "the lock item's key": forge(document(key=f"lock#{JOB}")),
    "the manual lock item's key": forge(document(key=f"manual#{JOB}")),
    "a generation counter's key": forge(document(key=f"generations#{JOB}#{S0.iso}")),
    "a key of another slot than the epoch": forge(document(key=f"slot#{JOB}#{S1.iso}")),
    "a key in another ISO form": forge(document(key=f"slot#{JOB}#2026-11-22T00:00:00+00:00")),
    "key not text": forge(document(key=5)),
    "key null": forge(document(key=None)),
    "key in DynamoDB JSON": forge(document(key={"S": f"slot#{JOB}#{S0.iso}"})),
    "epoch not on a minute": forge(document(epoch=S0.epoch_s + 30)),
    "epoch before 2000": forge(document(key=f"slot#{JOB}#1999-12-31T23:59:00Z", epoch=946_684_740)),
    "epoch in 2100": forge(document(key=f"slot#{JOB}#2100-01-01T00:00:00Z", epoch=4_102_444_800)),
    "epoch zero": forge(document(key=f"slot#{JOB}#1970-01-01T00:00:00Z", epoch=0)),
    "epoch negative": forge(document(epoch=-60)),
    "epoch huge": forge(document(epoch=10**40)),
    "epoch of 300 digits": forge(document(epoch=int("9" * 300))),
    "epoch as text": forge(document(epoch=str(S0.epoch_s))),
    "epoch as float": forge(document(epoch=float(S0.epoch_s))),
    "epoch true": forge(document(epoch=True)),
    "generation #g0": forge(document(key=f"slot#{JOB}#{S0.iso}#g0")),
    "generation #g01": forge(document(key=f"slot#{JOB}#{S0.iso}#g01")),
    "generation #g1": forge(document(key=f"slot#{JOB}#{S0.iso}#g1")),
    "generation #gx": forge(document(key=f"slot#{JOB}#{S0.iso}#gx")),
    "generation #g": forge(document(key=f"slot#{JOB}#{S0.iso}#g")),
    "generation #g-2": forge(document(key=f"slot#{JOB}#{S0.iso}#g-2")),
    "generation #g+2": forge(document(key=f"slot#{JOB}#{S0.iso}#g+2")),
    "generation #g 2": forge(document(key=f"slot#{JOB}#{S0.iso}#g 2")),
    "generation #g2 with a newline": forge(document(key=f"slot#{JOB}#{S0.iso}#g2\n")),
    "generation #g² (a Unicode digit)": forge(document(key=f"slot#{JOB}#{S0.iso}#g²")),
    "generation #g２ (a fullwidth digit)": forge(document(key=f"slot#{JOB}#{S0.iso}#g２")),
    "generation above the maximum": forge(document(key=f"slot#{JOB}#{S0.iso}#g1000001")),
    "generation twice": forge(document(key=f"slot#{JOB}#{S0.iso}#g2#g3")),
    "another query's status": forge(document(q=tokens.query_digest(JOB, None, None, "FAILED"))),
    "another query's from": forge(document(q=tokens.query_digest(JOB, S0, None, None))),
    "another query's to": forge(document(q=tokens.query_digest(JOB, None, S3, None))),
    "another job's query": forge(document(q=tokens.query_digest(OTHER_JOB, None, None, None))),
    "digest not text": forge(document(q=12)),
    "513 characters": GOOD + "A" * (tokens.MAX_TOKEN_LENGTH + 1 - len(GOOD)),
    "10 KB": "A" * 10_240,
    "10 KB of a token": (GOOD * 300)[:10_240],
}


@pytest.mark.parametrize("token", list(REFUSED.values()), ids=list(REFUSED))
def test_a_token_not_issued_for_this_query_is_refused_before_any_request(
    offline_reader: ResultsReader, offline_requests: Any, token: str
) -> None:
    # WHEN the history is asked for with the token
    with pytest.raises(BadParameterError) as caught:
        offline_reader.history(JOB, next_token=token)
    # THEN it is refused as next_token, with a short message that never echoes the token, and nothing was sent
    assert caught.value.parameter == "next_token" and caught.value.status == 400
    assert len(caught.value.message) < 200 and (len(token) < 8 or token not in caught.value.message)
    assert offline_requests.operations == []


def test_the_good_token_of_the_table_above_is_accepted() -> None:
    # (the refusals above differ from this one token in what they name)
    assert tokens.decode(GOOD, job=JOB, digest=DIGEST) == {
        "pk": {"S": f"slot#{JOB}#{S0.iso}"},
        "job": {"S": JOB},
        "slot_epoch_s": {"N": str(S0.epoch_s)},
    }


def test_every_one_character_change_is_refused_or_changes_nothing(
    offline_reader: ResultsReader, offline_requests: Any
) -> None:
    # GIVEN a real token (a position of the live run), each of its characters changed in turn
    token = tokens.encode(tokens.decode(GOOD, job=JOB, digest=DIGEST), DIGEST)
    assert token == GOOD
    refused = 0
    for index in range(len(token)):
        changed = flipped(token, index)
        try:
            rebuilt = tokens.decode(changed, job=JOB, digest=DIGEST)
        except BadParameterError as error:
            assert error.parameter == "next_token"
            refused += 1
            continue
        # THEN the only change that passes is one base64 ignores (the unused low bits of the last character):
        # it names the very same position
        assert index == len(token) - 1 and rebuilt == tokens.decode(GOOD, job=JOB, digest=DIGEST)
    assert refused >= len(token) - 1
    # AND through the reader none of them was sent to DynamoDB
    for index in range(len(token) - 1):
        with pytest.raises(BadParameterError):
            offline_reader.history(JOB, next_token=flipped(token, index))
    assert offline_requests.operations == []


def test_a_forged_token_naming_a_real_position_of_the_same_history_is_accepted() -> None:
    # The digest is not a secret MAC (tokens.py): a hand-made token that passes every check names a position in
    # the same job's history of the same query, which the caller may read anyway.
    key = f"slot#{JOB}#{S0.iso}#g2"
    assert tokens.decode(forge(document(key=key)), job=JOB, digest=DIGEST) == {
        "pk": {"S": key},
        "job": {"S": JOB},
        "slot_epoch_s": {"N": str(S0.epoch_s)},
    }
    maximum = f"slot#{JOB}#{S0.iso}#g1000000"
    assert tokens.decode(forge(document(key=maximum)), job=JOB, digest=DIGEST)["pk"] == {"S": maximum}


@pytest.mark.parametrize(
    "key",
    [{}, {"pk": {"S": "slot#x"}}, {"slot_epoch_s": {"N": "1"}}, {"pk": "x", "slot_epoch_s": {"N": "1"}}],
)
def test_encoding_anything_but_a_history_key_is_a_programming_error(key: Any) -> None:
    with pytest.raises(ValueError, match="not a history index key"):
        tokens.encode(key, DIGEST)


def test_the_query_digest_binds_job_bounds_and_status_only() -> None:
    digests = tokens.query_digest
    variants = {
        digests(JOB, None, None, None),
        digests(OTHER_JOB, None, None, None),
        digests(JOB, S0, None, None),
        digests(JOB, None, S0, None),
        digests(JOB, S0, S3, None),
        digests(JOB, None, None, "FAILED"),
        digests(JOB, None, None, "MISSED"),
    }
    assert len(variants) == 7
    assert digests(JOB, S0, S3, "FAILED") == digests(JOB, Slot(S0.epoch_s + 59), S3, "FAILED")  # the same slot
    assert all(len(digest) == 16 and set(digest) <= set("0123456789abcdef") for digest in variants)
