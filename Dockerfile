# syntax=docker/dockerfile:1
# jobq image: a static jobq binary (CGO off) built in a Go stage, run as a
# non-root user in a small Alpine stage whose busybox wget serves the
# health check. Build: docker build -t jobq:local .   (docker-compose.yml does)
ARG GO_VERSION=1.26

FROM golang:${GO_VERSION}-bookworm AS build
WORKDIR /src
COPY go.mod go.sum ./
RUN go mod download
COPY . .
RUN CGO_ENABLED=0 GOOS=linux go build -ldflags="-s -w" -o /out/jobq ./cmd/jobq

FROM alpine:3.22
RUN addgroup -S -g 10001 jobq && adduser -S -D -H -u 10001 -G jobq jobq
COPY --from=build /out/jobq /usr/local/bin/jobq
USER 10001:10001
# The API, /healthz, /readyz and /metrics.
EXPOSE 8080
ENV JOBQ_LISTEN=0.0.0.0:8080
HEALTHCHECK --interval=5s --timeout=3s --start-period=10s --retries=12 \
  CMD wget -q -O /dev/null http://127.0.0.1:8080/readyz || exit 1
ENTRYPOINT ["/usr/local/bin/jobq"]
CMD ["serve"]
