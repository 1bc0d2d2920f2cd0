"""Failover URI grammar: parse text into an immutable value and format it back.

Installed as ``failover_client.uri``. Pure: no I/O, no third-party imports.

>>> uri = parse("failover:(stomp://a:61613,stomp://b:61613)?randomize=false")
>>> [m.key for m in uri.members], uri.options.randomize
(['a:61613', 'b:61613'], False)
"""

from __future__ import annotations

from ._address import DEFAULT_PORTS, SCHEMES, BrokerAddress, broker_key
from ._agent import AGENT_SCHEMES, DiscoveryAgent
from ._build import build, dialect_defaults
from ._explain import ExplainRow, explain
from ._format import format_uri
from ._members import MEMBER_PARAMS, RETRY_FIELDS, unused_member_params, wrote_retry_options
from ._model import Component, Dialect, FailoverURI, Form
from ._options import (
    AttemptUnit,
    ConfirmMode,
    FailoverOptions,
    SchemeMapEntries,
    ServerListAction,
)
from ._parse import parse
from ._redact import Pairs, mask_same_length, redact_value
from ._table import (
    ARTEMIS_POLICY_CLASSES,
    BUILTIN_POLICIES,
    OPTION_TABLE,
    OptionSpec,
    option_table_markdown,
)

__all__ = [
    "AGENT_SCHEMES",
    "ARTEMIS_POLICY_CLASSES",
    "BUILTIN_POLICIES",
    "DEFAULT_PORTS",
    "MEMBER_PARAMS",
    "OPTION_TABLE",
    "RETRY_FIELDS",
    "SCHEMES",
    "AttemptUnit",
    "BrokerAddress",
    "Component",
    "ConfirmMode",
    "Dialect",
    "DiscoveryAgent",
    "ExplainRow",
    "FailoverOptions",
    "FailoverURI",
    "Form",
    "OptionSpec",
    "Pairs",
    "SchemeMapEntries",
    "ServerListAction",
    "broker_key",
    "build",
    "dialect_defaults",
    "explain",
    "format_uri",
    "mask_same_length",
    "option_table_markdown",
    "parse",
    "redact_value",
    "unused_member_params",
    "wrote_retry_options",
]
