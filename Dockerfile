# syntax=docker/dockerfile:1
# One image, one binary: /manager runs the operator (default), the memory
# service (`manager serve`) and the maintenance jobs (`manager job`).

# --- build: a static binary (no cgo), reproducible paths ---------------------
FROM --platform=$BUILDPLATFORM golang:1.26 AS build
WORKDIR /src
# Dependencies first, so code changes reuse the module cache layer.
COPY go.mod go.sum ./
RUN --mount=type=cache,target=/go/pkg/mod go mod download
COPY api/ api/
COPY cmd/ cmd/
COPY internal/ internal/
ARG TARGETOS=linux
ARG TARGETARCH
RUN --mount=type=cache,target=/go/pkg/mod --mount=type=cache,target=/root/.cache/go-build \
    CGO_ENABLED=0 GOOS=$TARGETOS GOARCH=$TARGETARCH \
    go build -trimpath -ldflags="-s -w" -o /out/manager ./cmd/manager

# --- run: distroless static, non-root (uid 65532), nothing but the binary ----
# `make image` builds the equivalent image without Docker (hack/image): the
# same binary, user, entrypoint and labels on an empty base plus the CA
# certificates, Go's zoneinfo and the passwd entry this base provides.
FROM gcr.io/distroless/static-debian12:nonroot
ARG VERSION=dev
ARG REVISION=unknown
ARG CREATED=1970-01-01T00:00:00Z
LABEL org.opencontainers.image.title="engram" \
      org.opencontainers.image.description="Kubernetes operator for managed, isolated agent memory on PostgreSQL with pgvector" \
      org.opencontainers.image.source="https://github.com/engram-dev/engram" \
      org.opencontainers.image.licenses="Apache-2.0" \
      org.opencontainers.image.version="${VERSION}" \
      org.opencontainers.image.revision="${REVISION}" \
      org.opencontainers.image.created="${CREATED}"
COPY --from=build /out/manager /manager
USER 65532:65532
ENTRYPOINT ["/manager"]
