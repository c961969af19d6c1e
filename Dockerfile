# tend as a container's entrypoint: static binaries, no libc needed.
#   docker build -t tend .
#   docker run --rm -v $PWD/deploy/docker:/etc/tend tend
# deploy/docker/tend.toml sets forward_output = true, so `docker logs` shows
# every program's output as "NAME:K | line" beside tend's event lines.
FROM golang:1.26-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
# Two files (docs/cli.md#two-files): tend, the lean CLI, and tend-daemon, the
# whole of tend, which tend up runs in its place (PID 1 stays PID 1).
RUN v=$(git describe --always 2>/dev/null || echo dev) && \
    CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X github.com/tend-sh/tend/internal/cli.Version=$v" -o /out/tend ./cmd/tend-lean && \
    CGO_ENABLED=0 go build -trimpath -ldflags "-s -w -X github.com/tend-sh/tend/internal/cli.Version=$v" -o /out/tend-daemon ./cmd/tend

# The runtime image needs only what the supervised programs need; tend itself
# is static. Debian slim keeps /bin/sh for `shell =` programs and probes.
FROM debian:bookworm-slim
COPY --from=build /out/tend /out/tend-daemon /usr/local/bin/
# tend up is PID 1 here: it reaps every orphan and stops the fleet on SIGTERM.
# For a single command instead of a fleet, use: ENTRYPOINT ["tend", "init", "--"]
ENTRYPOINT ["tend"]
CMD ["up", "-c", "/etc/tend/tend.toml"]
