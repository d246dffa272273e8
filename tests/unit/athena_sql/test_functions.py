"""The function catalog (athena_sql/functions.toml): Trino's function list as pinned, minus Athena's documented
differences. Pure: reads only the toml. Expected names come from Trino's docs (functions/list.md and the topic
pages at the commits recorded in [source]); DuckDB-only names were checked absent from that list."""

from __future__ import annotations

import tomllib

import pytest

from athena_sql import functions
from athena_sql.functions import CATALOG_PATH, FunctionCatalogError, parse_signature

RAW = tomllib.loads(CATALOG_PATH.read_text(encoding="utf-8"))


def test_catalog_loads_with_its_source() -> None:
    source = functions.source()
    assert source["trino_release"] == "483"
    assert len(source["trino_commit"]) == 40
    assert source["athena_differences"].startswith("https://docs.aws.amazon.com/athena/")
    assert source["retrieved"]
    assert set(source["pages"]) >= {"aggregate", "window", "datetime", "string", "math", "json", "array", "map"}
    assert all(len(commit) == 40 for commit in source["pages"].values())


def test_count_sanity_against_list_md() -> None:
    # list.md at trino_commit names 470 functions (operators, predicates and ROW::fields left out, see the header).
    listed = [name for name, entry in RAW["functions"].items() if entry.get("listed", True)]
    assert functions.source()["trino_list_size"] == 470
    assert len(listed) == 470
    # Athena's not-supported ones are excluded; at least 90% of list.md remains.
    assert len([name for name in listed if functions.lookup(name)]) >= 0.9 * 470
    assert len(functions.catalog()) >= 470
    assert sum(len(function.signatures) for function in functions.catalog().values()) >= 500


@pytest.mark.parametrize(
    ("name", "kind"),
    [
        ("count", "aggregate"),
        ("map_agg", "aggregate"),
        ("approx_distinct", "aggregate"),
        ("array_agg", "aggregate"),
        ("listagg", "aggregate"),
        ("geometry_union_agg", "aggregate"),
        ("qdigest_agg", "aggregate"),
        ("row_number", "window"),
        ("rank", "window"),
        ("lag", "window"),
        ("format_datetime", "scalar"),
        ("with_timezone", "scalar"),
        ("date_add", "scalar"),
        ("date_diff", "scalar"),
        ("from_unixtime", "scalar"),
        ("regexp_replace", "scalar"),
        ("json_extract_scalar", "scalar"),
        ("ST_Point", "scalar"),
        ("exclude_columns", "table"),
    ],
)
def test_known_trino_functions_present_with_kind(name: str, kind: str) -> None:
    function = functions.lookup(name)
    assert function is not None
    assert function.kind == kind
    assert function.name == name.lower()


@pytest.mark.parametrize(
    ("name", "form"),
    [
        ("cast", "special"),
        ("try_cast", "special"),
        ("extract", "special"),
        ("if", "special"),
        ("coalesce", "special"),
        ("nullif", "special"),
        ("try", "special"),
        ("json_query", "special"),
        ("current_date", "niladic"),
        ("current_timestamp", "niladic"),
        ("localtimestamp", "niladic"),
        ("current_user", "niladic"),
        ("date_trunc", "call"),
    ],
)
def test_special_forms_and_niladic_names_are_marked(name: str, form: str) -> None:
    function = functions.lookup(name)
    assert function is not None and function.form == form


# Checked absent from Trino's list.md: DuckDB's (and PostgreSQL's) names for Trino's format_datetime/date_format,
# from_unixtime, array[...], split, regexp_like, coalesce.
@pytest.mark.parametrize(
    "name", ["strftime", "strptime", "epoch_ms", "list_value", "string_split", "regexp_matches", "ifnull", "len"]
)
def test_duckdb_only_names_are_absent(name: str) -> None:
    assert functions.lookup(name) is None


def test_not_supported_names_are_excluded_by_lookup_with_a_reason() -> None:
    unsupported = functions.not_supported()
    assert set(unsupported) == set(RAW["athena"]["not_supported"])
    assert {"ai_gen", "random_string", "theta_sketch_union", "objectid"} <= set(unsupported)
    for name, why in unsupported.items():
        assert name in RAW["functions"], name  # a Trino function ...
        assert functions.lookup(name) is None  # ... that Athena does not have
        assert "connector" in why and "Limitations" in why


def test_unverified_functions_stay_in_the_catalog_with_why() -> None:
    transform = functions.lookup("ST_Transform")
    assert transform is not None and "483" in transform.unverified
    assert functions.lookup("format_datetime").unverified == ""  # type: ignore[union-attr]
    for name in RAW["athena"]["unverified"]:
        assert functions.lookup(name) is not None, name


@pytest.mark.parametrize("name", ["to_char", "char2hexint", "learn_classifier", "classify"])
def test_plugin_sections_athena_lists_are_supported(name: str) -> None:
    # Athena's "Functions in Amazon Athena" lists Trino's Teradata and Machine learning sections for engine v3.
    function = functions.lookup(name)
    assert function is not None and function.unverified == ""


def test_athena_documented_changes_and_limits() -> None:
    concat = functions.lookup("concat")
    assert concat is not None and "two or more" in concat.changed
    assert concat.accepts(1) is False and concat.accepts(2) is True and concat.accepts(127) is True
    assert concat.accepts(128) is False
    assert functions.max_arguments() == 127
    assert "null treatment" in functions.lookup("bool_or").changed  # type: ignore[union-attr]
    assert functions.lookup("abs").accepts(2) is False  # type: ignore[union-attr]
    assert functions.lookup("cast").accepts(1) is None  # type: ignore[union-attr]  # special form: not judged
    assert functions.lookup("json_scalar").accepts(1) is None  # type: ignore[union-attr]  # no signature
    assert RAW["athena"]["additions"] == []


def test_suggestions_for_a_misspelling() -> None:
    assert functions.suggestions("format_date_time")[0] == "format_datetime"
    assert "date_diff" in functions.suggestions("datediff")


def test_every_signature_parses_and_names_its_function() -> None:
    for name, entry in RAW["functions"].items():
        for text in entry.get("signatures", []):
            signature = parse_signature(text)
            assert text.split("(", 1)[0].lower() == name
            assert signature.arguments is not None


@pytest.mark.parametrize(
    ("name", "arities"),
    [
        ("abs", {1}),
        ("count", {0, 1}),  # count() is Trino's count(*) (TestAnalyzer.testNullTreatment resolves it)
        ("substr", {2, 3}),
        ("date_add", {3}),
        ("date_diff", {3}),
        ("from_unixtime", {1, 2, 3}),
        ("regexp_replace", {2, 3}),
        ("lead", {1, 2, 3}),
        ("row_number", {0}),
        ("approx_percentile", {2, 3}),
        ("map", {0, 2}),
        ("if", {2, 3}),
    ],
)
def test_arities(name: str, arities: set[int]) -> None:
    function = functions.lookup(name)
    assert function is not None and function.arities == frozenset(arities)


@pytest.mark.parametrize("name", ["concat", "coalesce", "greatest", "zip", "format"])
def test_variadic_functions_have_no_fixed_arity(name: str) -> None:
    function = functions.lookup(name)
    assert function is not None and function.arities is None


def test_optional_argument_groups_are_expanded() -> None:
    signature = parse_signature("lead(x[, offset [, default_value]]) -> [same as input]")
    assert signature.arguments == ("x", "offset", "default_value")
    assert signature.arities == frozenset({1, 2, 3})
    assert parse_signature("theta_sketch_union(sketch [, nominal_entries, seed]) -> varbinary").arities == {1, 3}
    assert parse_signature("split_to_map(s, e, k) -> map<varchar, varchar>").arguments == ("s", "e", "k")
    assert parse_signature("cast(value AS type) -> type").arities == {1}


def test_a_malformed_signature_is_a_catalog_error() -> None:
    with pytest.raises(FunctionCatalogError, match="not a signature"):
        parse_signature("row.fields() -> array(varchar)")


@pytest.mark.parametrize(
    ("entry", "message"),
    [
        ({"kind": "scalarish"}, "unknown kind"),
        ({"form": "macro"}, "unknown form"),
        ({"signatures": ["other(x) -> x"]}, "signature of another name"),
    ],
)
def test_a_malformed_entry_is_a_catalog_error(entry: dict[str, object], message: str) -> None:
    with pytest.raises(FunctionCatalogError, match=message):
        functions._entry("f", entry, "", "")


def test_aggregates_and_window_functions_take_over_scalars_do_not() -> None:
    assert functions.lookup("sum").windowable  # type: ignore[union-attr]
    assert functions.lookup("row_number").windowable  # type: ignore[union-attr]
    assert not functions.lookup("abs").windowable  # type: ignore[union-attr]


def test_normalize_with_a_form_keyword_is_a_special_form() -> None:
    normalize = functions.lookup("normalize")
    assert normalize is not None and normalize.form == "special" and "keyword" in normalize.notes
