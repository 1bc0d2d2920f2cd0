"""broker.xml and log4j.properties for one ActiveMQ Classic broker (pure text rendering).

Every value that comes from a caller (names, paths, passwords) goes through ``quoteattr``, so
``&``, ``<``, ``>`` and quotes in a password reach the broker as the characters themselves.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from xml.sax.saxutils import quoteattr

from ._model import BrokerUser, Connector, TlsOptions

__all__ = ["LOCK_ACQUIRE_SLEEP_MS", "LOG4J_PROPERTIES", "ActiveMQConfig", "render_broker_xml"]

# The network flags that make a broker tell clients about its peers (see BROKERS.md).
_CLUSTER_FLAGS = (
    'updateClusterClients="true" rebalanceClusterClients="true" updateClusterClientsOnRemove="true"'
)

# A bridge to a peer that went away is retried quickly and at a steady pace; the default
# (exponential back-off to 30 s) would make a restarted peer invisible for seconds.
NETWORK_RECONNECT = "initialReconnectDelay=100&maxReconnectDelay=1000&useExponentialBackOff=false"

# The Debian build logs through log4j 1.2 (slf4j-log4j12 in lib/optional), so this file name
# and syntax, found on the classpath through the conf directory.
LOG4J_PROPERTIES = """\
log4j.rootLogger=INFO, out
log4j.logger.org.springframework=WARN
log4j.logger.org.apache.xbean=WARN
log4j.appender.out=org.apache.log4j.ConsoleAppender
log4j.appender.out.layout=org.apache.log4j.PatternLayout
log4j.appender.out.layout.ConversionPattern=%d{HH:mm:ss,SSS} %-5p [%t] %c{1} | %m%n
"""


@dataclass(frozen=True)
class ActiveMQConfig:
    """Everything that differs between brokers of a cluster."""

    broker_name: str
    data_dir: str
    host: str
    stomp_port: int
    openwire_port: int
    network_peers: Sequence[str] = ()  # peer OpenWire addresses "host:port"
    advertise: str = "stomp"
    tls: TlsOptions | None = None
    ssl_port: int | None = None
    extra: Mapping[Connector, int] | None = None
    users: Sequence[BrokerUser] = ()  # empty: no authentication
    # discoveryUri of one connector ("openwire" or "stomp"): the broker announces that
    # connector's URL there (multicast://default: ActiveMQ's multicast discovery).
    discovery_uri: str | None = None
    discovery_connector: str = "openwire"
    shared_store: str | None = None
    """A KahaDB directory this broker shares with others (shared-storage master/slave): the
    one holding its lock is the master; the others wait on the lock with their connectors
    stopped. None: the broker's own ``<data_dir>/kahadb``."""
    max_page_size: int | None = None
    """Every queue's ``maxPageSize`` (messages paged in per wake-up); None: the broker's 200."""


def _authentication(users: Sequence[BrokerUser]) -> list[str]:
    """``simpleAuthenticationPlugin`` with ``users``; lines to put inside ``<plugins>``.

    Authentication only, no authorization map: any account may use any destination, which is
    all a test of logins needs. ``groups`` is given because the plugin builds each user's group
    principals from it.
    """
    if not users:
        return []
    accounts = [
        f"          <authenticationUser username={quoteattr(u.name)}"
        f' password={quoteattr(u.password)} groups="users"/>'
        for u in users
    ]
    return [
        '      <simpleAuthenticationPlugin anonymousAccessAllowed="false">',
        "        <users>",
        *accounts,
        "        </users>",
        "      </simpleAuthenticationPlugin>",
    ]


def _network_login(users: Sequence[BrokerUser]) -> str:
    """Attributes that make a network bridge log in to a peer that requires authentication."""
    if not users:
        return ""
    return f" userName={quoteattr(users[0].name)} password={quoteattr(users[0].password)}"


def _connector(name: str, uri: str, flags: bool, discovery: str | None = None) -> str:
    extra = f" {_CLUSTER_FLAGS}" if flags else ""
    if discovery is not None:
        extra += f" discoveryUri={quoteattr(discovery)}"
    return f"      <transportConnector name={quoteattr(name)} uri={quoteattr(uri)}{extra}/>"


def _transport_connectors(cfg: ActiveMQConfig) -> list[str]:
    flags = bool(cfg.network_peers)

    def discovery(name: str) -> str | None:
        return cfg.discovery_uri if cfg.discovery_connector == name else None

    stomp = _connector("stomp", f"stomp://{cfg.host}:{cfg.stomp_port}", flags, discovery("stomp"))
    openwire = _connector(
        "openwire", f"tcp://{cfg.host}:{cfg.openwire_port}", flags, discovery("openwire")
    )
    # A broker advertises the FIRST connector that carries the update flags.
    lines = [stomp, openwire] if cfg.advertise == "stomp" else [openwire, stomp]
    if cfg.tls is not None and cfg.ssl_port is not None:
        query = "?needClientAuth=true" if cfg.tls.need_client_auth else ""
        lines.append(
            _connector("stomp+ssl", f"stomp+ssl://{cfg.host}:{cfg.ssl_port}{query}", False)
        )
    for conn, port in (cfg.extra or {}).items():
        query = f"?{conn.query}" if conn.query else ""
        lines.append(_connector(conn.name, f"{conn.scheme}://{cfg.host}:{port}{query}", False))
    return lines


def _ssl_context(tls: TlsOptions) -> list[str]:
    attrs = [
        f"keyStore={quoteattr('file:' + str(tls.keystore))}",
        f"keyStorePassword={quoteattr(tls.keystore_password)}",
        'keyStoreType="pkcs12"',
    ]
    if tls.truststore is not None:
        attrs += [
            f"trustStore={quoteattr('file:' + str(tls.truststore))}",
            f"trustStorePassword={quoteattr(tls.truststore_password or '')}",
            'trustStoreType="pkcs12"',
        ]
    return ["    <sslContext>", f"      <sslContext {' '.join(attrs)}/>", "    </sslContext>"]


# How often a slave tries the shared store's lock. ActiveMQ's default (10 s) would put up to
# 10 s of waiting between a master's death and the slave's start; 200 ms keeps a takeover
# close to the slave's own start-up time, which is what the master/slave tests measure.
LOCK_ACQUIRE_SLEEP_MS = 200


def _kahadb(cfg: ActiveMQConfig) -> list[str]:
    if cfg.shared_store is None:
        return [f"      <kahaDB directory={quoteattr(cfg.data_dir + '/kahadb')}/>"]
    return [
        f"      <kahaDB directory={quoteattr(cfg.shared_store)}>",
        "        <locker>",
        f'          <shared-file-locker lockAcquireSleepInterval="{LOCK_ACQUIRE_SLEEP_MS}"/>',
        "        </locker>",
        "      </kahaDB>",
    ]


def render_broker_xml(cfg: ActiveMQConfig) -> str:
    """The Spring/xbean file for ``xbean:file:``. Elements are in alphabetical order, which
    every ActiveMQ schema version accepts."""
    out = [
        '<beans xmlns="http://www.springframework.org/schema/beans"',
        '       xmlns:xsi="http://www.w3.org/2001/XMLSchema-instance"',
        '       xsi:schemaLocation="http://www.springframework.org/schema/beans'
        " http://www.springframework.org/schema/beans/spring-beans.xsd"
        " http://activemq.apache.org/schema/core"
        ' http://activemq.apache.org/schema/core/activemq-core.xsd">',
        '  <broker xmlns="http://activemq.apache.org/schema/core"'
        f" brokerName={quoteattr(cfg.broker_name)} dataDirectory={quoteattr(cfg.data_dir)}"
        ' useJmx="false" schedulerSupport="false" persistent="true" advisorySupport="true">',
    ]
    if cfg.max_page_size is not None:
        out.append(
            "    <destinationPolicy><policyMap><policyEntries>"
            f'<policyEntry queue="&gt;" maxPageSize="{cfg.max_page_size}"/>'
            "</policyEntries></policyMap></destinationPolicy>"
        )
    if cfg.network_peers:
        out.append("    <networkConnectors>")
        for peer in cfg.network_peers:
            uri = f"static:(tcp://{peer})?{NETWORK_RECONNECT}"
            out.append(
                f"      <networkConnector name={quoteattr('bridge-to-' + peer)}"
                f' uri={quoteattr(uri)} duplex="false"{_network_login(cfg.users)}/>'
            )
        out.append("    </networkConnectors>")
    out += [
        "    <persistenceAdapter>",
        *_kahadb(cfg),
        "    </persistenceAdapter>",
        # Answers queue-depth questions over STOMP (ActiveMQ.Statistics.Destination.<name>).
        "    <plugins>",
        *_authentication(cfg.users),
        "      <statisticsBrokerPlugin/>",
        "    </plugins>",
    ]
    if cfg.tls is not None:
        out += _ssl_context(cfg.tls)
    out += [
        # Limits that fit a test machine; the defaults (100 GB store) only produce warnings.
        "    <systemUsage>",
        "      <systemUsage>",
        '        <memoryUsage><memoryUsage percentOfJvmHeap="70"/></memoryUsage>',
        '        <storeUsage><storeUsage limit="2 gb"/></storeUsage>',
        '        <tempUsage><tempUsage limit="1 gb"/></tempUsage>',
        "      </systemUsage>",
        "    </systemUsage>",
        "    <transportConnectors>",
        *_transport_connectors(cfg),
        "    </transportConnectors>",
        "  </broker>",
        "</beans>",
        "",
    ]
    return "\n".join(out)
