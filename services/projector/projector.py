"""`Projector`: the live mode of the projection runner (a consumer group, followed until stopped).

The loop itself is `runner.ProjectionRunner`, shared with replay; the group, its rebalances and
its Kafka-side commits are `source_group.GroupSource`; its settings are `config.ProjectorConfig`.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable

from services.projector.config import ProjectorConfig, migrate_schema
from services.projector.metrics import Metrics
from services.projector.plan import WriteOutcome
from services.projector.runner import ProjectionRunner
from services.projector.source_group import GroupSource
from services.projector.writer import make_writer

log = logging.getLogger("projector")


class Projector:
    """Consumes the compacted topic in a consumer group and projects it, batch by batch."""

    def __init__(self, config: ProjectorConfig, metrics: Metrics | None = None) -> None:
        self.config = config
        self.metrics = metrics or Metrics()

    def run(
        self, stop: threading.Event | None = None, on_commit: Callable[[WriteOutcome], None] | None = None
    ) -> None:
        """Project until `stop` is set (SIGTERM in the service). A stop never leaves a half batch."""
        cfg = self.config
        if cfg.migrate:
            migrate_schema(cfg.dsn, cfg.schema)
        runner = ProjectionRunner(
            GroupSource(cfg, self.metrics), make_writer(cfg, self.metrics), self.metrics
        )
        try:
            runner.run(stop or threading.Event(), on_commit)
        finally:
            log.info("projector stopped")
