"""Names in scope: the relations of a query's FROM clause (tables, WITH queries, subqueries, UNNEST, VALUES) and the
columns and types each one has, for :mod:`athena_sql.typecheck`.

A relation's columns are ``None`` when they cannot be known (a table the check was given no schema for): every name
then resolves, with no type, and what depends on it is not judged.
"""

from __future__ import annotations

from dataclasses import dataclass, field

from athena_sql.types import TrinoType

__all__ = ["Columns", "Relation", "Scope"]

#: Column name (lowercase) -> its type (``None``: not known), in output order.
Columns = dict[str, TrinoType | None]


@dataclass
class Relation:
    """One FROM item: the ``name`` it is qualified by (its alias, else the table's name) and its ``columns``."""

    name: str
    columns: Columns | None


@dataclass
class Scope:
    """What a query's expressions see: its relations, the WITH queries visible, the enclosing query's scope
    (correlated subqueries) and the lambda parameters bound around an expression."""

    relations: list[Relation] = field(default_factory=list)
    ctes: dict[str, Columns | None] = field(default_factory=dict)
    parent: Scope | None = None
    lambdas: dict[str, TrinoType | None] = field(default_factory=dict)
    #: the select list's aliases -> types (ORDER BY may name them)
    outputs: Columns = field(default_factory=dict)
    #: the columns of ``JOIN ... USING (...)``: one column, never ambiguous
    using: set[str] = field(default_factory=set)

    def child(self) -> Scope:
        """A subquery's scope: the same WITH queries, this scope as its parent."""
        return Scope(ctes=dict(self.ctes), parent=self)

    def with_lambdas(self, names: dict[str, TrinoType | None]) -> Scope:
        return Scope(self.relations, self.ctes, self.parent, {**self.lambdas, **names}, self.outputs)

    def resolve(self, name: str, qualifier: str | None) -> tuple[bool, TrinoType | None]:
        """(found, type) of column ``name`` (qualified by ``qualifier`` when given). Not found: (False, None);
        a relation of unknown columns resolves every name, without a type."""
        key = name.lower()
        if qualifier is None and key in self.lambdas:
            return True, self.lambdas[key]
        scope: Scope | None = self
        while scope is not None:
            found = scope._resolve_here(key, qualifier.lower() if qualifier else None)
            if found[0]:
                return found
            scope = scope.parent
        return False, None

    def _resolve_here(self, key: str, qualifier: str | None) -> tuple[bool, TrinoType | None]:
        candidates = [r for r in self.relations if qualifier is None or r.name == qualifier]
        for relation in candidates:
            if relation.columns is None:
                return True, None
            if key in relation.columns:
                return True, relation.columns[key]
        if qualifier is None:
            if key in self.outputs:
                return True, self.outputs[key]
            # a row-typed column's field written without its relation: ``col.field`` arrives as qualifier=col
        elif not candidates:
            found, row = self._resolve_here(qualifier, None)
            if found and row is not None and row.name == "row" and key in row.fields:
                return True, row.children[row.fields.index(key)]
            if found:
                return True, None
        return False, None

    def resolves_here(self, name: str, qualifier: str | None) -> bool:
        """Whether ``name`` is found in this scope itself (its relations, outputs or lambdas), not an enclosing one."""
        if qualifier is None and name.lower() in self.lambdas:
            return True
        return self._resolve_here(name.lower(), qualifier.lower() if qualifier else None)[0]

    def ambiguous(self, name: str) -> bool:
        """Whether the unqualified ``name`` names a column of more than one relation where it is first found
        (Trino: AMBIGUOUS_NAME); never when a relation's columns are unknown."""
        key = name.lower()
        scope: Scope | None = self
        while scope is not None:
            if key in scope.lambdas or key in scope.outputs or key in scope.using:
                return False
            if any(relation.columns is None for relation in scope.relations):
                return False
            having = [r for r in scope.relations if r.columns is not None and key in r.columns]
            if having:
                return len(having) > 1
            scope = scope.parent
        return False

    def visible_names(self) -> list[str]:
        """Every column name this scope and its parents see (for "did you mean")."""
        names: list[str] = []
        scope: Scope | None = self
        while scope is not None:
            for relation in scope.relations:
                names.extend(relation.columns or {})
            scope = scope.parent
        return names

    def all_columns(self) -> Columns | None:
        """Every column of every relation (``SELECT *``), ``None`` when one relation's columns are unknown."""
        columns: Columns = {}
        for relation in self.relations:
            if relation.columns is None:
                return None
            columns.update(relation.columns)
        return columns

    def relation_named(self, name: str) -> Relation | None:
        """The relation this scope or a parent calls ``name`` (``t`` of ``SELECT t.*``), nearest first."""
        scope: Scope | None = self
        while scope is not None:
            found = next((r for r in scope.relations if r.name == name.lower()), None)
            if found is not None:
                return found
            scope = scope.parent
        return None

    def knows_every_column(self) -> bool:
        """Whether the columns of every relation in this scope and its parents are known."""
        scope: Scope | None = self
        while scope is not None:
            if any(relation.columns is None for relation in scope.relations):
                return False
            scope = scope.parent
        return True
