"""The golden transcript's normaliser and recorder: what they rename, what they keep, how a difference reads."""

from __future__ import annotations

import copy
import hashlib
import json
import uuid
from typing import Any

import pytest

from tests.golden.normalise import ExpressionSyntaxError, normalise_request, tokenize
from tests.golden.recorder import compare, first_difference, stabilise


def test_a_placeholder_that_prefixes_another_is_renamed_as_a_whole_token() -> None:
    # GIVEN #a and #ab, :a and :ab, where a naive replace of "#a" would also hit "#ab"
    request = {
        "ConditionExpression": "#ab = :a AND #a <> :ab",
        "UpdateExpression": "SET #a = :ab, #ab = :a",
        "ExpressionAttributeNames": {"#a": "short", "#ab": "long"},
        "ExpressionAttributeValues": {":a": {"N": "1"}, ":ab": {"N": "2"}},
    }
    # WHEN normalised
    result = normalise_request(request)
    # THEN each token is renamed whole, numbered by first appearance (the condition before the update)
    assert result["ConditionExpression"] == "#n0 = :v0 AND #n1 <> :v1"
    assert result["UpdateExpression"] == "SET #n1 = :v1, #n0 = :v0"
    assert result["ExpressionAttributeNames"] == {"#n0": "long", "#n1": "short"}
    assert result["ExpressionAttributeValues"] == {":v0": {"N": "1"}, ":v1": {"N": "2"}}


def test_requests_differing_only_in_placeholder_names_normalise_equal() -> None:
    one = {
        "ConditionExpression": "attribute_not_exists(#pk) OR #token < :token",
        "ExpressionAttributeNames": {"#pk": "pk", "#token": "fencing_token"},
        "ExpressionAttributeValues": {":token": {"N": "7"}},
    }
    other = {
        "ConditionExpression": "attribute_not_exists(#k) OR #t < :v",
        "ExpressionAttributeNames": {"#t": "fencing_token", "#k": "pk"},
        "ExpressionAttributeValues": {":v": {"N": "7"}},
    }
    assert normalise_request(one) == normalise_request(other)


def test_whitespace_and_clause_order_are_kept() -> None:
    base = {
        "ConditionExpression": "#a = :a AND #b = :b",
        "ExpressionAttributeNames": {"#a": "owner_id", "#b": "fencing_token"},
        "ExpressionAttributeValues": {":a": {"S": "x"}, ":b": {"N": "1"}},
    }
    spaced = {**base, "ConditionExpression": "#a = :a  AND #b = :b"}
    swapped = {**base, "ConditionExpression": "#b = :b AND #a = :a"}
    assert normalise_request(spaced)["ConditionExpression"] == "#n0 = :v0  AND #n1 = :v1"
    assert normalise_request(spaced) != normalise_request(base)
    assert normalise_request(swapped) != normalise_request(base)


def test_each_transact_item_is_its_own_scope_and_data_is_never_renamed() -> None:
    # GIVEN a transaction: each entry has its own maps; an item attribute looks like a placeholder or an expression key
    request = {
        "TransactItems": [
            {
                "Update": {
                    "Key": {"pk": {"S": "lock#job"}},
                    "UpdateExpression": "SET #owner = :owner",
                    "ConditionExpression": "#token = :token",
                    "ExpressionAttributeNames": {"#owner": "owner_id", "#token": "fencing_token"},
                    "ExpressionAttributeValues": {":owner": {"S": "#token"}, ":token": {"N": "3"}},
                }
            },
            {
                "Put": {
                    "Item": {"pk": {"S": "#x"}, "UpdateExpression": {"S": "SET #x = :x"}},
                    "ConditionExpression": "attribute_not_exists(#x)",
                    "ExpressionAttributeNames": {"#x": "pk"},
                }
            },
        ],
        "ClientRequestToken": "token",
    }
    before = copy.deepcopy(request)
    # WHEN normalised
    result = normalise_request(request)
    # THEN numbering restarts in each entry, the condition's placeholders first; data and other keys are untouched
    update = result["TransactItems"][0]["Update"]
    assert update["ConditionExpression"] == "#n0 = :v0"
    assert update["UpdateExpression"] == "SET #n1 = :v1"
    assert update["ExpressionAttributeNames"] == {"#n0": "fencing_token", "#n1": "owner_id"}
    assert update["ExpressionAttributeValues"] == {":v0": {"N": "3"}, ":v1": {"S": "#token"}}
    put = result["TransactItems"][1]["Put"]
    assert put["ConditionExpression"] == "attribute_not_exists(#n0)"
    assert put["Item"] == {"pk": {"S": "#x"}, "UpdateExpression": {"S": "SET #x = :x"}}
    assert result["ClientRequestToken"] == "token"
    assert request == before  # the input is not modified


def test_a_request_without_expressions_is_unchanged() -> None:
    request = {"TableName": "t", "Key": {"pk": {"S": "lock#job"}}, "ConsistentRead": True}
    assert normalise_request(request) == request


def test_batch_get_projections_are_scopes_per_table() -> None:
    request = {
        "RequestItems": {
            "t": {
                "Keys": [{"pk": {"S": "a"}}],
                "ProjectionExpression": "#b, #a",
                "ExpressionAttributeNames": {"#a": "x", "#b": "y"},
            }
        }
    }
    table = normalise_request(request)["RequestItems"]["t"]
    assert table["ProjectionExpression"] == "#n0, #n1"
    assert table["ExpressionAttributeNames"] == {"#n0": "y", "#n1": "x"}


def test_unused_and_undefined_placeholders_stay_visible() -> None:
    request = {
        "ConditionExpression": "#used = :missing",
        "ExpressionAttributeNames": {"#used": "a", "#spare": "b"},
        "ExpressionAttributeValues": {":spare": {"N": "1"}},
    }
    result = normalise_request(request)
    assert result["ConditionExpression"] == "#n0 = :v0"
    assert result["ExpressionAttributeNames"] == {"#n0": "a", "#n_unused0": "b"}
    assert result["ExpressionAttributeValues"] == {":v_unused0": {"N": "1"}}  # :v0 (":missing") is undefined


@pytest.mark.parametrize(
    "expression",
    [
        "SET #w.#me = if_not_exists(#next, :zero), #l[0] = :v REMOVE #a, #b ADD #n :one",
        "(attribute_not_exists(#s) OR #s = :s) AND #q IN (:q, :r) AND size(#x) <= :n AND NOT contains(#m, :t)",
        "#a <> :b AND #c >= :d AND #e BETWEEN :f AND :g",
    ],
)
def test_tokens_join_back_to_the_expression(expression: str) -> None:
    tokens = tokenize(expression)
    assert "".join(token.text for token in tokens) == expression
    assert {token.kind for token in tokens} <= {"name", "value", "ident", "number", "op", "space"}


@pytest.mark.parametrize("expression", ["#a = # b", "#a = :", "#a = 'x'"])
def test_a_character_that_starts_no_token_is_refused(expression: str) -> None:
    with pytest.raises(ExpressionSyntaxError):
        tokenize(expression)


def test_random_ids_are_labelled_consistently_and_tokens_by_their_form() -> None:
    record_id = uuid.uuid4().hex
    items = [{"Update": {"Key": {"pk": {"S": "k"}}, "ExpressionAttributeValues": {":id": {"S": record_id}}}}]
    digest = hashlib.sha256(json.dumps([items, 2], sort_keys=True, separators=(",", ":")).encode()).hexdigest()[:36]
    uuids: dict[str, str] = {}
    ours = stabilise("TransactWriteItems", {"TransactItems": items, "ClientRequestToken": digest}, uuids)
    botocores = stabilise(
        "TransactWriteItems", {"TransactItems": items, "ClientRequestToken": str(uuid.uuid4())}, uuids
    )
    other = stabilise("PutItem", {"Item": {"record_id": {"S": uuid.uuid4().hex}, "name": {"S": "not-a-uuid"}}}, uuids)
    assert ours["ClientRequestToken"] == "<sha256([TransactItems, 2])[:36]>"
    assert botocores["ClientRequestToken"] == "<botocore uuid4>"
    # the same id keeps its label across requests; another id gets the next one; other strings are kept
    assert ours["TransactItems"][0]["Update"]["ExpressionAttributeValues"][":id"] == {"S": "<uuid4 #1>"}
    assert botocores["TransactItems"] == ours["TransactItems"]
    assert other["Item"] == {"record_id": {"S": "<uuid4 #2>"}, "name": {"S": "not-a-uuid"}}


def test_a_difference_names_the_step_and_the_first_differing_key() -> None:
    def entry(step: str, condition: str) -> dict[str, Any]:
        request = {"TransactItems": [{"Update": {"ConditionExpression": condition}}]}
        return {"step": step, "operation": "TransactWriteItems", "request": request}

    golden = [entry("lock: A wins", "#n0 = :v0"), entry("lock: B commits", "#n0 = :v0")]
    now = [entry("lock: A wins", "#n0 = :v0"), entry("lock: B commits", "#n0 = :v0 AND #n1 = :v1")]
    message = compare(golden, now)
    assert message is not None
    assert "request #1" in message and "'lock: B commits'" in message
    assert "request.TransactItems[0].Update.ConditionExpression" in message
    assert "first differing character: 9" in message
    assert compare(golden, golden) is None
    assert "1 request(s) fewer than golden; first missing: #1 step 'lock: B commits'" in (
        compare(golden, now[:1]) or ""
    )
    assert "1 request(s) more than golden" in (compare(golden[:1], now) or "")
    assert first_difference({"a": 1}, {"a": 1, "b": 2}) == ("b", "<absent>", 2)
