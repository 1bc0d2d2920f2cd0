"""``python -m failover_client.cli``: the same as the ``failover-client`` command."""

from __future__ import annotations

from ._app import main

raise SystemExit(main())
