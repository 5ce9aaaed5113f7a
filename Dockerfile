# sandboxcore worker image (docs/PRODUCTION.md): the worker and the sandboxctl
# CLI, built as static binaries (CGO_ENABLED=0: the SQLite driver is pure Go),
# on a slim Debian runtime with git, which the worker runs for every clone,
# fetch and worktree operation.
#
#   docker build -t sandboxcore-worker .
#
# CI cannot pull images, so it checks this build step with the local
# toolchain instead: the same two CGO_ENABLED=0 builds (.ci/run).

ARG GO_VERSION=1.26
ARG DEBIAN_RELEASE=bookworm

FROM golang:${GO_VERSION}-${DEBIAN_RELEASE} AS build
WORKDIR /src
# Modules first, so a source change does not download them again.
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/sandbox-worker ./worker && \
    CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/sandboxctl ./starter && \
    CGO_ENABLED=0 go build -trimpath -ldflags="-s -w" -o /out/sandbox-supervisor ./supervisor

FROM debian:${DEBIAN_RELEASE}-slim
RUN apt-get update && \
    apt-get install -y --no-install-recommends git ca-certificates && \
    rm -rf /var/lib/apt/lists/*
# sandbox-supervisor next to the worker: it runs inside every runtime.
COPY --from=build /out/sandbox-worker /out/sandboxctl /out/sandbox-supervisor /usr/local/bin/
# The data root. With the Docker runtime it must be bind-mounted at the same
# absolute path as on the host (docker-compose.yaml does); the worker runs as
# root because it talks to the Docker daemon through the mounted socket.
ENV SANDBOX_DATA_DIR=/var/lib/sandboxcore
ENTRYPOINT ["/usr/local/bin/sandbox-worker"]
