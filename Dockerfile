# One image for every service: `incident-memory-service ingest|compactor|projector|agent|telemetry-mcp|migrate`.
# Build: docker build -t incident-memory:0.1.0 .   (deploy/README.md)

# --- build: compile wheels into a self-contained virtualenv -------------------------------
FROM python:3.11-slim-bookworm AS build
ENV PIP_NO_CACHE_DIR=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1 \
    PYTHONDONTWRITEBYTECODE=1
# A compiler only for the rare dependency without a wheel; it never reaches the runtime image.
RUN apt-get update \
    && apt-get install -y --no-install-recommends build-essential \
    && rm -rf /var/lib/apt/lists/*
RUN python -m venv /opt/venv
ENV PATH=/opt/venv/bin:$PATH
WORKDIR /src
# Dependencies first, so a source-only change reuses this layer.
COPY pyproject.toml README.md ./
# Production code only: the contract and the services. The dev tools (deploy/local's stack, seed and
# demo, benchmarks/) are not copied, so `pip install .` finds no such package and the image has none
# (tests/deploy/test_manifests.py builds that wheel and checks).
COPY schemas ./schemas
COPY services ./services
RUN pip install --upgrade pip setuptools wheel \
    && pip install . \
    && rm /opt/venv/bin/incident-memory \
    && incident-memory-service --help >/dev/null

# --- runtime: the virtualenv and a non-root user, nothing else ----------------------------
FROM python:3.11-slim-bookworm AS runtime
ENV PATH=/opt/venv/bin:$PATH \
    PYTHONUNBUFFERED=1 \
    PYTHONDONTWRITEBYTECODE=1 \
    HOME=/var/lib/incident-memory \
    INCIDENT_MEMORY_STATE_DIR=/var/lib/incident-memory
RUN groupadd --system --gid 10001 incident-memory \
    && useradd --system --uid 10001 --gid 10001 --home-dir /var/lib/incident-memory \
       --shell /usr/sbin/nologin incident-memory \
    && install -d -o 10001 -g 10001 -m 0750 /var/lib/incident-memory
COPY --from=build /opt/venv /opt/venv
# Working directory is the only writable path the services need (faust's data dir is relative).
WORKDIR /var/lib/incident-memory
USER 10001:10001
# ingest HTTP; compactor, projector, agent health+metrics (deploy/README.md, "Ports").
EXPOSE 8080 9101 9102 9103
# The production CLI (services/cli.py). The dev CLI `incident-memory` (deploy/local/devcli.py) needs the dev
# tree, which is not copied, so its script is deleted above rather than left to fail.
ENTRYPOINT ["incident-memory-service"]
CMD ["--help"]
