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
FROM gcr.io/distroless/static-debian12:nonroot
LABEL org.opencontainers.image.title="engram" \
      org.opencontainers.image.description="Kubernetes operator for managed, isolated agent memory on PostgreSQL with pgvector" \
      org.opencontainers.image.source="https://github.com/engram-dev/engram"
COPY --from=build /out/manager /manager
USER 65532:65532
ENTRYPOINT ["/manager"]
