"""Where each part of a message sits in the DataFrame: columns found and type-checked once.

``writer(schema, ...)`` runs on the driver when the query starts; it turns the options' column
names into positions here, so a missing column or a wrong type fails the query at once with the
column's name, its type and the types that would do (and a cast that gets there), instead of
every task failing on its first row.
"""

from __future__ import annotations

from dataclasses import dataclass

from pyspark.sql.types import (
    BinaryType,
    DataType,
    IntegralType,
    MapType,
    StringType,
    StructType,
)

from failover_client.spark._options import SinkOptions, SparkOptionError

__all__ = ["RowLayout", "row_layout"]


@dataclass(frozen=True)
class RowLayout:
    """Column positions of one sink's message parts (picklable; carried by the writers)."""

    body: int
    destination: int | None = None
    headers: int | None = None
    message_id: int | None = None


def row_layout(schema: StructType, options: SinkOptions) -> RowLayout:
    """The positions of the columns ``options`` name in ``schema``, each of a type that fits."""
    names = list(schema.names)
    body = _find(names, "bodyColumn", options.body_column)
    _expect(
        schema,
        body,
        "bodyColumn",
        (StringType, BinaryType),
        wanted="string or binary",
        cast="string",
    )
    layout = RowLayout(body=body)
    if options.destination_column is not None:
        at = _find(names, "destinationColumn", options.destination_column)
        _expect(schema, at, "destinationColumn", (StringType,), wanted="string", cast="string")
        layout = RowLayout(body, destination=at)
    if options.headers_column is not None:
        at = _find(names, "headersColumn", options.headers_column)
        kind = schema.fields[at].dataType
        if not (
            isinstance(kind, MapType)
            and isinstance(kind.keyType, StringType)
            and isinstance(kind.valueType, StringType)
        ):
            raise _wrong_type(schema, at, "headersColumn", "map<string,string>")
        layout = RowLayout(layout.body, layout.destination, headers=at)
    if options.message_id_column is not None:
        at = _find(names, "messageIdColumn", options.message_id_column)
        _expect(
            schema,
            at,
            "messageIdColumn",
            (StringType, IntegralType),
            wanted="string or integer",
            cast="string",
        )
        layout = RowLayout(layout.body, layout.destination, layout.headers, message_id=at)
    return layout


def _find(names: list[str], option: str, column: str) -> int:
    """The column's position: an exact match, else the one case-insensitive match (Spark's
    default resolution)."""
    if column in names:
        return names.index(column)
    folded = [i for i, name in enumerate(names) if name.lower() == column.lower()]
    if len(folded) == 1:
        return folded[0]
    raise SparkOptionError(
        f"failover sink: option {option}: no column {column!r}; "
        f"the DataFrame has: {', '.join(names) or '(no columns)'}",
        option=option,
    )


def _expect(
    schema: StructType,
    at: int,
    option: str,
    kinds: tuple[type[DataType], ...],
    *,
    wanted: str,
    cast: str,
) -> None:
    if not isinstance(schema.fields[at].dataType, kinds):
        raise _wrong_type(schema, at, option, wanted, cast)


def _wrong_type(
    schema: StructType, at: int, option: str, wanted: str, cast: str | None = None
) -> SparkOptionError:
    field = schema.fields[at]
    target = cast if cast is not None else wanted
    hint = f"; cast it, e.g. col({field.name!r}).cast({target!r})" if target else ""
    return SparkOptionError(
        f"failover sink: option {option}: column {field.name!r} is "
        f"{field.dataType.simpleString()}, must be {wanted}{hint}",
        option=option,
    )
