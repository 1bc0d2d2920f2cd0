"""``python -m failover_client.demo``."""

from __future__ import annotations

from ._app import main

raise SystemExit(main())
