"""The ``url`` topology source (ActiveMQ's ``updateURIsURL``) on a fake clock.

Lists are read from files and from a real HTTP(S) server on loopback (a real peer, in a thread);
time only moves when a test advances the fake clock. Waits on the reading thread use its read
counter with a real-time safety net, never a sleep.
"""

from __future__ import annotations

import base64
import http.server
import logging
import ssl
import threading
from collections.abc import Iterable, Iterator, Mapping

import pytest
import trustme
from failover_client.uri import BrokerAddress, ServerListAction

from failover_client import (
    ConfigurationError,
    Connected,
    Disconnected,
    Event,
    FailoverConnection,
    ReconnectAttempt,
)
from failover_client.testing import EventRecorder, FakeClock, FakeConnector
from failover_client.topology import (
    BaseSink,
    UrlSource,
    parse_broker_list,
    registered_topology_sources,
    topology_source_factory,
)
from failover_client.topology._url import starts_reconnect_pass

SAFETY = 5.0  # real seconds, only against a hung test
PASSWORD = "s3cretPW"
A = BrokerAddress("stomp", "a", 61613)
B = BrokerAddress("stomp", "b", 61613)
C = BrokerAddress("stomp", "c", 61614)

Update = tuple[tuple[BrokerAddress, ...], str, ServerListAction | None, bool]


class Sink(BaseSink):
    """Records updates and rebalance requests; ``fail`` makes the next update raise."""

    def __init__(self) -> None:
        self.cond = threading.Condition()
        self.updates: list[Update] = []
        self.rebalances: list[str] = []
        self.failures: list[tuple[int, float | None]] = []
        self.fail = False

    def source_failed(
        self, *, source: str, error: str, failures: int, retry_in: float | None
    ) -> None:
        with self.cond:
            self.failures.append((failures, retry_in))

    def update_brokers(
        self,
        update: Iterable[BrokerAddress],
        *,
        source: str,
        action: ServerListAction | None = None,
        tiers: Mapping[str, int] | None = None,
        weights: Mapping[str, float] | None = None,
        pushed: bool = False,
    ) -> None:
        with self.cond:
            self.updates.append((tuple(update), source, action, pushed))
            self.cond.notify_all()
            if self.fail:
                self.fail = False
                raise RuntimeError("sink bug")

    def request_rebalance(self, *, source: str) -> None:
        with self.cond:
            self.rebalances.append(source)

    def lists(self) -> list[tuple[BrokerAddress, ...]]:
        with self.cond:
            return [brokers for brokers, _, _, _ in self.updates]


class FollowedSink(Sink):
    """A sink that, like a connection's, has listeners it emits events to."""

    follows_connection = True

    def __init__(self) -> None:
        super().__init__()
        self.listeners: list[object] = []

    def add_listener(self, listener: object) -> None:
        self.listeners.append(listener)

    def remove_listener(self, listener: object) -> None:
        self.listeners.remove(listener)

    def emit(self, event: Event) -> None:
        for listener in list(self.listeners):
            listener(event)  # type: ignore[operator]


# --- an HTTP server on loopback ------------------------------------------------------------------


class Route:
    def __init__(
        self,
        status: int = 200,
        body: bytes = b"",
        headers: Mapping[str, str] | None = None,
        *,
        length: bool = True,
    ) -> None:
        self.status, self.body, self.headers, self.length = (
            status,
            body,
            dict(headers or {}),
            length,
        )


class Server:
    """An HTTP(S) server in a thread: answers each path from ``routes``, records requests."""

    def __init__(self, tls: ssl.SSLContext | None = None) -> None:
        self.routes: dict[str, Route] = {}
        self.requests: list[tuple[str, dict[str, str]]] = []
        owner = self

        class Handler(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                owner.requests.append((self.path, dict(self.headers.items())))
                route = owner.routes.get(self.path, Route(404, b"no such list"))
                self.send_response(route.status)
                for name, value in route.headers.items():
                    self.send_header(name, value)
                if route.length:
                    self.send_header("Content-Length", str(len(route.body)))
                self.end_headers()
                self.wfile.write(route.body)

            def log_message(self, format: str, *args: object) -> None:
                pass  # the test reads the requests list, not stderr

        self.httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        if tls is not None:
            self.httpd.socket = tls.wrap_socket(self.httpd.socket, server_side=True)
        self.scheme = "http" if tls is None else "https"
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()

    def url(self, path: str, userinfo: str = "") -> str:
        return f"{self.scheme}://{userinfo}127.0.0.1:{self.httpd.server_address[1]}{path}"

    def close(self) -> None:
        self.httpd.shutdown()
        self.httpd.server_close()
        self.thread.join(SAFETY)


@pytest.fixture
def server() -> Iterator[Server]:
    running = Server()
    try:
        yield running
    finally:
        running.close()


@pytest.fixture(scope="module")
def ca() -> trustme.CA:
    return trustme.CA()


@pytest.fixture
def tls_server(ca: trustme.CA) -> Iterator[Server]:
    context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    ca.issue_cert("127.0.0.1").configure_cert(context)
    running = Server(context)
    try:
        yield running
    finally:
        running.close()


@pytest.fixture
def trusting(ca: trustme.CA) -> ssl.SSLContext:
    context = ssl.create_default_context()
    ca.configure_trust(context)
    return context


@pytest.fixture
def clock() -> FakeClock:
    return FakeClock()


def started(source: UrlSource, sink: Sink, reads: int = 1) -> UrlSource:
    source.start(sink)
    assert source.wait_reads(reads, SAFETY)
    return source


@pytest.fixture
def stopping() -> Iterator[list[UrlSource]]:
    sources: list[UrlSource] = []
    yield sources
    for source in sources:
        source.stop()


# --- the list format -----------------------------------------------------------------------------


def test_a_list_is_separated_by_commas_and_or_newlines_with_comments_and_blanks():
    text = (
        "# the cluster\n"
        "stomp://a:61613,stomp://b:61613 ,, # comments end a line\n"
        "\n"
        " stomp://c:61614\n"
        "stomp://a:61613\n"  # a duplicate counts once
    )
    assert parse_broker_list(text, "list") == (A, B, C)


def test_activemq_s_one_line_comma_list_parses():
    assert parse_broker_list("stomp://a:61613,stomp://b:61613,stomp://c:61614", "x") == (A, B, C)


def test_a_comma_inside_a_failover_list_belongs_to_that_list():
    text = "failover:(stomp://a:61613,stomp://b:61613)?randomize=false,stomp://c:61614"
    assert parse_broker_list(text, "x") == (A, B, C)


def test_a_bad_entry_is_logged_with_its_line_and_column_and_skipped(caplog):
    text = "stomp://a:61613\nstomp://b:61613, stomp://c:bad ,stomp://c:61614\nnot a uri\n"
    with caplog.at_level(logging.WARNING, logger="failover_client.topology"):
        assert parse_broker_list(text, "brokers.txt") == (A, B, C)
    first, second = (r.getMessage() for r in caplog.records)
    assert first.startswith("brokers.txt:2: skipped entry at column 18, not a broker URI")
    assert "bad port 'bad'" in first
    assert second.startswith("brokers.txt:3: skipped, not a broker URI")


def test_a_bad_entry_never_logs_its_password(caplog):
    with caplog.at_level(logging.WARNING, logger="failover_client.topology"):
        assert parse_broker_list(f"stomp://user:{PASSWORD}@a:bad,stomp://a:61613", "x") == (A,)
    assert ":1: skipped" in caplog.text
    assert PASSWORD not in caplog.text


def test_a_scheme_map_turns_activemq_s_openwire_entries_into_this_protocol():
    text = "tcp://a:61616?wireFormat.maxInactivityDuration=0,ssl://b:61617,stomp://c:61614"
    rewrite = {"tcp": ("stomp", 61613), "ssl": ("stomp+ssl", None)}
    assert parse_broker_list(text, "x", scheme_map=rewrite) == (
        A,
        BrokerAddress("stomp+ssl", "b", 61617),
        C,
    )


# --- where the list is ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "spelling",
    [
        lambda p: p,
        str,
        lambda p: f"file:{p}",
        lambda p: f"file://{p}",
        lambda p: f"file://localhost{p}",
    ],
    ids=["Path", "str", "file:/", "file:///", "file://localhost/"],
)
def test_a_path_and_every_file_url_spelling_are_read(tmp_path, clock, stopping, spelling):
    path = tmp_path / "brokers.txt"
    path.write_text("stomp://a:61613\n")
    sink = Sink()
    stopping.append(started(UrlSource(spelling(path), clock=clock), sink))
    assert sink.lists() == [(A,)]


@pytest.mark.parametrize(
    ("url", "message"),
    [
        ("file://otherhost/etc/brokers.txt", "a file on another host"),
        ("ftp://example.com/brokers.txt", "give a path, a file: URL or an http"),
        ("http:///brokers.txt", "has no host"),
        (f"http://u:{PASSWORD}@h:notaport/x", "is not a URL"),
    ],
)
def test_urls_that_cannot_be_read_are_refused_at_once(url, message):
    with pytest.raises(ConfigurationError, match=message) as info:
        UrlSource(url)
    assert PASSWORD not in str(info.value)


@pytest.mark.parametrize(
    ("settings", "message"),
    [
        ({"interval": 0}, "interval must be a number > 0"),
        ({"min_interval": 0}, "min_interval must be a number > 0"),
        ({"min_interval": 60}, r"min_interval \(60\) must be <= interval"),
        ({"timeout": -1}, "timeout must be a number > 0"),
        ({"max_bytes": 0}, "max_bytes must be a whole number >= 1"),
        ({"name": ""}, "name must be a name"),
    ],
)
def test_bad_settings_are_refused(settings, message):
    with pytest.raises(ConfigurationError, match=message):
        UrlSource("brokers.txt", **settings)


def test_url_is_a_registered_built_in_source(tmp_path):
    assert "url" in registered_topology_sources()
    source = topology_source_factory("url")(url=tmp_path / "b.txt", interval=5.0)
    assert isinstance(source, UrlSource)


# --- when it reads and pushes --------------------------------------------------------------------


def test_pushes_with_replace_at_start_and_then_only_when_the_list_changed(
    tmp_path, clock, stopping
):
    path = tmp_path / "brokers.txt"
    path.write_text("stomp://a:61613\n")
    sink = Sink()
    source = started(UrlSource(path, interval=10.0, clock=clock, name="list"), sink)
    stopping.append(source)
    assert sink.updates == [((A,), "list", "replace", False)]  # the user's list: not pushed
    assert clock.wait_for_deadline(10.0)
    clock.advance(10.0)
    assert source.wait_reads(2, SAFETY)  # read, unchanged: not pushed
    path.write_text("# same brokers, other text\nstomp://a:61613\n")
    assert clock.wait_for_deadline(20.0)
    clock.advance(10.0)
    assert source.wait_reads(3, SAFETY)
    assert sink.lists() == [(A,)]
    path.write_text("stomp://a:61613,stomp://b:61613\n")
    assert clock.wait_for_deadline(30.0)
    clock.advance(10.0)
    assert source.wait_reads(4, SAFETY)
    assert sink.lists() == [(A,), (A, B)]
    assert "brokers=2" in repr(source)


def test_a_failed_read_keeps_the_last_list_and_retries_sooner_and_sooner(
    tmp_path, clock, stopping, caplog
):
    path = tmp_path / "brokers.txt"
    path.write_text("stomp://a:61613\n")
    sink = Sink()
    source = started(UrlSource(path, interval=10.0, min_interval=2.0, clock=clock), sink)
    stopping.append(source)
    path.unlink()
    with caplog.at_level(logging.DEBUG, logger="failover_client.topology"):
        for reads, wait in ((2, 10.0), (3, 2.0), (4, 4.0), (5, 8.0), (6, 10.0)):
            assert clock.wait_for_deadline(clock.monotonic() + wait)
            clock.advance(wait)
            assert source.wait_reads(reads, SAFETY)
    warnings = [r for r in caplog.records if r.levelno == logging.WARNING]
    assert len(warnings) == 1  # the first failure of a streak; the rest at debug level
    assert "keeping the last list (1 brokers)" in warnings[0].getMessage()
    assert sink.failures == [(1, 2.0), (2, 4.0), (3, 8.0), (4, 10.0), (5, 10.0)]
    assert "FileNotFoundError" in (source.last_error or "")
    path.write_text("stomp://b:61613\n")
    with caplog.at_level(logging.INFO, logger="failover_client.topology"):
        assert clock.wait_for_deadline(clock.monotonic() + 10.0)
        clock.advance(10.0)
        assert source.wait_reads(7, SAFETY)
    assert "read again after 5 failures" in caplog.text
    assert sink.lists() == [(A,), (B,)]
    assert source.last_error is None


def test_a_list_naming_no_broker_keeps_the_last_list(tmp_path, clock, stopping):
    path = tmp_path / "brokers.txt"
    path.write_text("stomp://a:61613\n")
    sink = Sink()
    source = started(UrlSource(path, interval=10.0, clock=clock), sink)
    stopping.append(source)
    path.write_text("# emptied by mistake\nstomp://a:oops\n")
    assert clock.wait_for_deadline(10.0)
    clock.advance(10.0)
    assert source.wait_reads(2, SAFETY)
    assert "names no broker" in (source.last_error or "")
    assert sink.lists() == [(A,)]


def test_a_list_over_max_bytes_is_refused_with_a_clear_reason(tmp_path, clock, stopping):
    path = tmp_path / "brokers.txt"
    path.write_text("stomp://a:61613\n" + "#" * 100 + "\n")
    source = started(UrlSource(path, clock=clock, max_bytes=64), Sink())
    stopping.append(source)
    assert source.last_error == "the list is larger than max_bytes (64 bytes)"


def test_text_that_is_not_utf8_is_refused_and_a_byte_order_mark_is_skipped(
    tmp_path, clock, stopping
):
    path = tmp_path / "brokers.txt"
    path.write_bytes(b"stomp://a:61613\n\xff\xfe")
    source = started(UrlSource(path, clock=clock), Sink())
    stopping.append(source)
    assert "not utf-8 text" in (source.last_error or "")
    bom = tmp_path / "bom.txt"
    bom.write_bytes(b"\xef\xbb\xbfstomp://a:61613\n")
    sink = Sink()
    stopping.append(started(UrlSource(bom, clock=clock), sink))
    assert sink.lists() == [(A,)]


def test_a_sink_that_raises_does_not_stop_the_source(tmp_path, clock, stopping, caplog):
    path = tmp_path / "brokers.txt"
    path.write_text("stomp://a:61613\n")
    sink = Sink()
    sink.fail = True
    with caplog.at_level(logging.ERROR, logger="failover_client.topology"):
        source = started(UrlSource(path, interval=10.0, clock=clock), sink)
    stopping.append(source)
    assert "sink failed" in caplog.text
    path.write_text("stomp://b:61613\n")
    assert clock.wait_for_deadline(10.0)
    clock.advance(10.0)
    assert source.wait_reads(2, SAFETY)
    assert sink.lists() == [(A,), (B,)]


def test_stop_ends_the_thread_without_time_passing_and_is_idempotent(tmp_path, clock):
    path = tmp_path / "brokers.txt"
    path.write_text("stomp://a:61613\n")
    sink = FollowedSink()
    source = started(UrlSource(path, clock=clock, name="brokers-url"), sink)
    assert len(sink.listeners) == 1
    source.stop()
    source.stop()
    assert sink.listeners == []
    assert clock.waiters() == 0
    assert clock.monotonic() == 0.0
    assert repr(source).endswith("stopped)")
    assert not [
        t for t in threading.enumerate() if t.name == "failover-client-topology-brokers-url"
    ]
    with pytest.raises(RuntimeError, match="already started"):
        source.start(sink)


# --- rebalancing (rebalanceUpdateURIs) -----------------------------------------------------------


def test_a_list_whose_brokers_changed_asks_the_sink_to_rebalance(tmp_path, clock, stopping):
    path = tmp_path / "brokers.txt"
    path.write_text("stomp://a:61613,stomp://b:61613\n")
    sink = Sink()
    source = started(UrlSource(path, interval=10.0, clock=clock, rebalance=True), sink)
    stopping.append(source)
    assert sink.rebalances == []  # the first list is the configuration, not a change
    for reads, text in ((2, "stomp://b:61613,stomp://a:61613"), (3, "stomp://a:61613")):
        path.write_text(text)
        assert clock.wait_for_deadline(clock.monotonic() + 10.0)
        clock.advance(10.0)
        assert source.wait_reads(reads, SAFETY)
    assert sink.lists() == [(A, B), (B, A), (A,)]
    assert sink.rebalances == ["url"]  # the new order alone moved nobody


def test_without_rebalance_a_changed_list_only_updates(tmp_path, clock, stopping):
    path = tmp_path / "brokers.txt"
    path.write_text("stomp://a:61613\n")
    sink = Sink()
    source = started(UrlSource(path, interval=10.0, clock=clock), sink)
    stopping.append(source)
    path.write_text("stomp://b:61613\n")
    assert clock.wait_for_deadline(10.0)
    clock.advance(10.0)
    assert source.wait_reads(2, SAFETY)
    assert (sink.lists(), sink.rebalances) == ([(A,), (B,)], [])


# --- reconnect passes ----------------------------------------------------------------------------


def test_a_pass_starts_on_a_loss_and_after_each_back_off():
    assert starts_reconnect_pass(Disconnected("stomp://a:61613", None))
    assert starts_reconnect_pass(ReconnectAttempt("stomp://a:61613", 3, 0.5))
    assert not starts_reconnect_pass(ReconnectAttempt("stomp://b:61613", 3, 0.0))
    assert not starts_reconnect_pass(Connected("stomp://a:61613", 1, 0.0))


def test_a_loss_of_the_fed_connection_rereads_the_list_at_once(tmp_path, clock, stopping):
    path = tmp_path / "brokers.txt"
    path.write_text("stomp://a:61613\n")
    sink = FollowedSink()
    source = started(UrlSource(path, interval=30.0, min_interval=1.0, clock=clock), sink)
    stopping.append(source)
    path.write_text("stomp://a:61613\nstomp://b:61613\n")
    assert clock.wait_for_deadline(30.0)
    clock.advance(5.0)
    sink.emit(Disconnected("stomp://a:61613", None))
    assert source.wait_reads(2, SAFETY)
    assert clock.monotonic() == 5.0
    assert sink.lists() == [(A,), (A, B)]
    assert clock.wait_for_deadline(35.0)  # the interval starts again from this read


def test_reads_woken_by_passes_are_at_least_min_interval_apart(tmp_path, clock, stopping):
    path = tmp_path / "brokers.txt"
    path.write_text("stomp://a:61613\n")
    sink = FollowedSink()
    source = started(UrlSource(path, interval=30.0, min_interval=2.0, clock=clock), sink)
    stopping.append(source)
    assert clock.wait_for_deadline(30.0)
    sink.emit(ReconnectAttempt("stomp://a:61613", 2, 0.01))
    assert clock.wait_for_deadline(2.0)  # woken at 0, the read waits until 2
    assert source.reads == 1
    clock.advance(2.0)
    assert source.wait_reads(2, SAFETY)


def test_a_real_connection_moves_to_a_broker_added_to_the_list_when_it_loses_its_own(
    tmp_path,
):
    clock = FakeClock()
    connector = FakeConnector(clock=clock)
    connector.behave(A, "accept", "refuse")
    path = tmp_path / "brokers.txt"
    path.write_text("stomp://a:61613\n")
    events = EventRecorder()
    conn = FailoverConnection(
        f"failover:()?updateURIsURL=file:{path}&initialReconnectDelay=60000"
        "&reconnectDelay=60000&maxReconnectDelay=60000&heartbeat=0",
        connector=connector,
        clock=clock,
        listeners=[events],
    )
    with conn:
        assert conn.broker == str(A)
        clock.advance(5.0)  # nothing is due: the next read is at 30 s
        path.write_text("stomp://b:61613\n")
        connector.session(A).kill()
        assert connector.wait_until(lambda: conn.broker == str(B))
        # Neither the 30 s interval nor the 60 s back-off passed: the loss woke the reader.
        assert clock.monotonic() == 5.0
        assert events.wait_for(Connected, 2).broker == str(B)
        assert [key for key, _ in connector.attempts] == [A.key, B.key]


# --- HTTP ----------------------------------------------------------------------------------------


def test_a_list_is_read_over_http(server, clock, stopping):
    server.routes["/brokers"] = Route(200, b"stomp://a:61613,stomp://b:61613")
    sink = Sink()
    source = started(UrlSource(server.url("/brokers"), clock=clock), sink)
    stopping.append(source)
    assert sink.lists() == [(A, B)]
    (path, headers), *_ = server.requests
    assert path == "/brokers"
    assert headers["User-Agent"] == "failover-client"
    assert "Authorization" not in headers


@pytest.mark.parametrize(
    ("status", "reason"),
    [(204, "HTTP 204 No Content (only 200 carries a list)"), (404, "HTTP 404 Not Found")],
)
def test_a_status_other_than_200_keeps_the_last_list(server, clock, stopping, status, reason):
    server.routes["/brokers"] = Route(200, b"stomp://a:61613")
    sink = Sink()
    source = started(UrlSource(server.url("/brokers"), interval=10.0, clock=clock), sink)
    stopping.append(source)
    server.routes["/brokers"] = Route(status, b"" if status == 204 else b"gone")
    assert clock.wait_for_deadline(10.0)
    clock.advance(10.0)
    assert source.wait_reads(2, SAFETY)
    assert source.last_error == reason
    assert sink.lists() == [(A,)]


@pytest.mark.parametrize("length", [True, False], ids=["announced", "streamed"])
def test_an_http_body_over_max_bytes_is_refused(server, clock, stopping, length):
    server.routes["/big"] = Route(200, b"stomp://a:61613," * 100, length=length)
    source = started(UrlSource(server.url("/big"), clock=clock, max_bytes=1000), Sink())
    stopping.append(source)
    assert source.last_error == "the list is larger than max_bytes (1000 bytes)"


def test_credentials_in_the_url_are_basic_auth_and_never_shown(server, clock, stopping, caplog):
    token = base64.b64encode(f"app:{PASSWORD}".encode()).decode()
    server.routes["/brokers"] = Route(200, b"stomp://a:61613")
    sink = Sink()
    with caplog.at_level(logging.DEBUG, logger="failover_client.topology"):
        source = started(UrlSource(server.url("/brokers", f"app:{PASSWORD}@"), clock=clock), sink)
    stopping.append(source)
    assert sink.lists() == [(A,)]
    assert server.requests[0][1]["Authorization"] == f"Basic {token}"
    assert PASSWORD not in repr(source)
    assert "app:***@" in repr(source)
    assert caplog.text
    assert PASSWORD not in caplog.text


def test_credentials_are_not_sent_after_a_redirect(server, clock, stopping):
    server.routes["/old"] = Route(302, headers={"Location": "/new"})
    server.routes["/new"] = Route(200, b"stomp://a:61613")
    sink = Sink()
    source = started(UrlSource(server.url("/old", f"app:{PASSWORD}@"), clock=clock), sink)
    stopping.append(source)
    assert sink.lists() == [(A,)]
    (old, old_headers), (new, new_headers) = server.requests
    assert (old, new) == ("/old", "/new")
    assert "Authorization" in old_headers
    assert "Authorization" not in new_headers


def test_a_redirect_out_of_http_is_refused(server, clock, stopping, tmp_path):
    secret = tmp_path / "secret.txt"
    secret.write_text("stomp://c:61614\n")
    server.routes["/brokers"] = Route(302, headers={"Location": f"file://{secret}"})
    sink = Sink()
    source = started(UrlSource(server.url("/brokers"), clock=clock), sink)
    stopping.append(source)
    assert "refused the redirect (302) from http to 'file://" in (source.last_error or "")
    assert sink.lists() == []


def test_the_credentials_of_a_failing_url_never_reach_logs_or_repr(clock, stopping, caplog):
    server = Server()
    url = server.url("/brokers", f"app:{PASSWORD}@")
    server.close()  # nothing listens there now: connection refused
    with caplog.at_level(logging.DEBUG, logger="failover_client.topology"):
        source = started(UrlSource(url, clock=clock), Sink())
    stopping.append(source)
    assert "cannot read" in caplog.text
    assert PASSWORD not in caplog.text
    assert PASSWORD not in repr(source)
    assert PASSWORD not in (source.last_error or "")


# --- HTTPS ---------------------------------------------------------------------------------------


def test_https_is_verified_by_default(tls_server, clock, stopping):
    tls_server.routes["/brokers"] = Route(200, b"stomp://a:61613")
    sink = Sink()
    source = started(UrlSource(tls_server.url("/brokers"), clock=clock), sink)
    stopping.append(source)
    assert "CERTIFICATE_VERIFY_FAILED" in (source.last_error or "")
    assert sink.lists() == []


def test_https_is_read_with_the_given_trust(tls_server, trusting, clock, stopping):
    tls_server.routes["/brokers"] = Route(200, b"stomp://a:61613")
    sink = Sink()
    stopping.append(started(UrlSource(tls_server.url("/brokers"), clock=clock, tls=trusting), sink))
    assert sink.lists() == [(A,)]


def test_a_redirect_from_https_to_http_is_refused(tls_server, server, trusting, clock, stopping):
    server.routes["/brokers"] = Route(200, b"stomp://c:61614")
    tls_server.routes["/brokers"] = Route(301, headers={"Location": server.url("/brokers")})
    sink = Sink()
    source = started(UrlSource(tls_server.url("/brokers"), clock=clock, tls=trusting), sink)
    stopping.append(source)
    assert "refused the redirect (301) from https to 'http://127.0.0.1" in (source.last_error or "")
    assert server.requests == []  # the plain-text server was never asked
    assert sink.lists() == []


def test_a_redirect_within_https_is_followed(tls_server, trusting, clock, stopping):
    tls_server.routes["/old"] = Route(307, headers={"Location": tls_server.url("/new")})
    tls_server.routes["/new"] = Route(200, b"stomp://b:61613")
    sink = Sink()
    stopping.append(started(UrlSource(tls_server.url("/old"), clock=clock, tls=trusting), sink))
    assert sink.lists() == [(B,)]
