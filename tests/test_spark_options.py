"""Spark data source options: every mistake named with its option and what would be valid."""

from __future__ import annotations

import pytest

from failover_client import ConfigurationError
from failover_client.spark import OPTIONS, SparkOptionError, sink_options, source_options

URI = "failover:(stomp://a:61613,stomp://b:61613)?randomize=false"
SECRET_URI = "failover:(stomp://app:s3cret@a:61613,stomp://b:61613)"


def sink(**options: str) -> dict[str, str]:
    """Options as Spark delivers them: lower-case keys, string values."""
    return {"uri": URI, "destination": "/queue/out", **{k.lower(): v for k, v in options.items()}}


def sink_error(raw: dict[str, str]) -> SparkOptionError:
    with pytest.raises(SparkOptionError) as caught:
        sink_options(raw)
    return caught.value


# --- the sink -----------------------------------------------------------------------------------


def test_minimal_sink_options_take_the_defaults() -> None:
    options = sink_options(sink())
    assert options.uri == URI
    assert options.destination == "/queue/out"
    assert options.destination_column is None
    assert options.body_column == "value"
    assert options.headers_column is None
    assert options.message_id_column is None
    assert options.persistent is True
    assert options.confirm_window is None
    assert options.duplicate_detection == "none"
    assert options.commit_markers is True
    assert options.commit_destination is None
    assert options.checkpoint_location is None


def test_every_sink_option_is_read() -> None:
    options = sink_options(
        {
            "uri": URI,
            "destinationColumn": "topic",
            "BODYCOLUMN": "payload",
            "headersColumn": "props",
            "messageIdColumn": "key",
            "persistent": "FALSE",
            "confirmWindow": " 64 ",
            "duplicateDetection": "Artemis",
            "commitMarkers": "false",
            "commitDestination": "/queue/commits",
            "checkpointLocation": "/tmp/ck",
        }
    )
    assert options.destination is None
    assert options.destination_column == "topic"
    assert options.body_column == "payload"
    assert options.headers_column == "props"
    assert options.message_id_column == "key"
    assert options.persistent is False
    assert options.confirm_window == 64
    assert options.duplicate_detection == "artemis"
    assert options.commit_markers is False
    assert options.commit_destination == "/queue/commits"
    assert options.checkpoint_location == "/tmp/ck"


def test_save_path_is_the_destination() -> None:
    assert sink_options({"uri": URI, "path": "/queue/from-save"}).destination == "/queue/from-save"


def test_missing_uri_says_what_a_uri_looks_like() -> None:
    error = sink_error({"destination": "/queue/out"})
    assert str(error) == (
        "failover sink: option uri is required, e.g. "
        "failover:(stomp://host1:61613,stomp://host2:61613)"
    )
    assert error.option == "uri"
    assert isinstance(error, ConfigurationError)


def test_bad_uri_keeps_the_parsers_position() -> None:
    error = sink_error(sink(uri="failover:(stomp://a:6x1613)"))
    text = str(error)
    assert text.startswith("failover sink: option uri: bad port '6x1613'")
    assert "at position 20" in text
    assert "\n  failover:(stomp://a:6x1613)\n" in text
    assert error.option == "uri"


def test_bad_uri_option_names_the_nearest_valid_one() -> None:
    error = sink_error(sink(uri=f"{URI}&maxReconectAttempts=2"))
    assert "unknown ActiveMQ Classic option 'maxReconectAttempts'" in str(error)
    assert "did you mean: maxReconnectAttempts" in str(error)


def test_bad_uri_never_shows_the_password() -> None:
    error = sink_error(sink(uri="failover:(stomp://app:s3cret@a:6x1613)"))
    assert "s3cret" not in str(error)


def test_unknown_option_is_named_with_a_suggestion_and_the_valid_ones() -> None:
    error = sink_error(sink(bodyColum="value"))
    text = str(error)
    assert text.startswith("failover sink: unknown option 'bodycolum' (did you mean bodyColumn?);")
    assert text.endswith(
        "valid options: uri, destination, destinationColumn, bodyColumn, headersColumn, "
        "messageIdColumn, persistent, confirmWindow, duplicateDetection, commitMarkers, "
        "commitDestination, onRowError, allowNullBody, allowAnyDestination"
    )
    assert error.option == "bodycolum"


def test_unknown_option_far_from_any_has_no_suggestion() -> None:
    text = str(sink_error(sink(zzz="1")))
    assert "unknown option 'zzz'; valid options: uri," in text


def test_source_option_given_to_the_sink_says_where_it_belongs() -> None:
    error = sink_error(sink(selector="color = 'red'"))
    assert str(error).startswith("failover sink: option selector belongs to readStream;")
    assert error.option == "selector"


def test_destination_and_destination_column_exclude_each_other() -> None:
    error = sink_error(sink(destinationColumn="topic"))
    assert str(error) == "failover sink: give destination or destinationColumn, not both"


def test_a_destination_is_required() -> None:
    error = sink_error({"uri": URI})
    assert str(error) == (
        "failover sink: option destination (or destinationColumn) is required: "
        "where should rows go?"
    )


@pytest.mark.parametrize("value", ["", "  ", "/queue/a\nb"])
def test_a_destination_must_be_a_name(value: str) -> None:
    error = sink_error({"uri": URI, "destination": value})
    assert "option destination:" in str(error)
    assert "valid: a name such as /queue/orders or /topic/prices" in str(error)


@pytest.mark.parametrize(
    ("key", "value", "message"),
    [
        ("persistent", "yes", "option persistent: 'yes'; valid values: true, false"),
        ("commitMarkers", "1", "option commitMarkers: '1'; valid values: true, false"),
        ("confirmWindow", "0", "option confirmWindow: '0'; valid values: a positive integer"),
        ("confirmWindow", "-5", "option confirmWindow: '-5'; valid values: a positive integer"),
        ("confirmWindow", "ten", "option confirmWindow: 'ten'; valid values: a positive integer"),
        (
            "duplicateDetection",
            "kafka",
            "option duplicateDetection: 'kafka'; valid values: none, artemis",
        ),
        ("bodyColumn", " ", "option bodyColumn: a column name is required, got ''"),
    ],
)
def test_a_bad_value_names_the_option_and_the_valid_values(
    key: str, value: str, message: str
) -> None:
    error = sink_error(sink(**{key: value}))
    assert str(error) == f"failover sink: {message}"
    assert error.option == key


def test_repr_shows_the_redacted_uri_only() -> None:
    options = sink_options({"uri": SECRET_URI, "destination": "/queue/out"})
    assert "s3cret" not in repr(options)
    assert "stomp://app:***@a:61613" in repr(options)
    assert options.uri == SECRET_URI  # the connection needs the real one


def test_connection_key_separates_what_shapes_a_connection() -> None:
    first = sink_options(sink())
    assert first.connection_key() == sink_options(sink(persistent="false")).connection_key()
    assert first.connection_key() != sink_options(sink(confirmWindow="8")).connection_key()


# --- the source ---------------------------------------------------------------------------------


def test_source_options_with_defaults() -> None:
    options = source_options({"uri": URI, "destination": "/queue/in"})
    assert options.destinations == ("/queue/in",)
    assert options.selector is None
    assert options.max_messages_per_batch == 10_000
    assert options.receive_timeout == 1.0
    assert options.body_as_string is False


def test_every_source_option_is_read() -> None:
    options = source_options(
        {
            "uri": URI,
            "destination": "/queue/a, /topic/b",
            "selector": "color = 'red'",
            "maxMessagesPerBatch": "500",
            "receiveTimeout": "250ms",
            "bodyAsString": "true",
        }
    )
    assert options.destinations == ("/queue/a", "/topic/b")
    assert options.selector == "color = 'red'"
    assert options.max_messages_per_batch == 500
    assert options.receive_timeout == 0.25
    assert options.body_as_string is True


@pytest.mark.parametrize(("text", "seconds"), [("2", 2.0), ("1.5", 1.5), ("2s", 2.0)])
def test_receive_timeout_takes_seconds(text: str, seconds: float) -> None:
    raw = {"uri": URI, "destination": "/queue/in", "receivetimeout": text}
    assert source_options(raw).receive_timeout == seconds


@pytest.mark.parametrize("text", ["0", "-1", "soon", "inf", "nan", "ms"])
def test_bad_receive_timeout_says_what_is_valid(text: str) -> None:
    with pytest.raises(SparkOptionError) as caught:
        source_options({"uri": URI, "destination": "/queue/in", "receivetimeout": text})
    assert str(caught.value) == (
        f"failover source: option receiveTimeout: {text!r}; "
        "valid values: seconds > 0 such as 1.5, 500ms, 2s or 5m"
    )


def test_source_needs_a_destination_and_a_non_empty_selector() -> None:
    with pytest.raises(SparkOptionError, match="option destination is required"):
        source_options({"uri": URI})
    with pytest.raises(SparkOptionError, match="option selector is empty"):
        source_options({"uri": URI, "destination": "/queue/in", "selector": " "})


def test_sink_option_given_to_the_source_says_where_it_belongs() -> None:
    with pytest.raises(SparkOptionError) as caught:
        source_options({"uri": URI, "destination": "/queue/in", "bodycolumn": "v"})
    assert str(caught.value).startswith(
        "failover source: option bodyColumn belongs to write / writeStream;"
    )


def test_source_repr_redacts_the_uri() -> None:
    options = source_options({"uri": SECRET_URI, "destination": "/queue/in"})
    assert "s3cret" not in repr(options)


# --- the table ----------------------------------------------------------------------------------


def test_option_table_names_are_unique_and_every_role_takes_a_uri() -> None:
    keys = [info.key for info in OPTIONS]
    assert len(keys) == len(set(keys))
    uri = next(info for info in OPTIONS if info.name == "uri")
    assert uri.roles == {"sink", "source"}
    assert all(info.values and info.help for info in OPTIONS)
