# syntax=docker/dockerfile:1
# The platform's image: wal-producer, wal-consumer, wal-control-plane, wal-writer and walctl in
# /usr/local/bin, on Debian slim, run as an unprivileged user (uid 10001, as the Helm chart's
# securityContext expects). The chart sets each container's command.
#
#   docker build -t wal:dev .
#   docker run --rm wal:dev wal-producer --help

FROM rust:1.95-bookworm AS build
# The commit, for wal_build_info: docker build --build-arg WAL_COMMIT=$(git rev-parse --short HEAD)
ARG WAL_COMMIT=unknown
WORKDIR /src
COPY . .
# librdkafka is compiled from source by rdkafka-sys (C toolchain and make come with this image)
# and links the image's OpenSSL (libssl-dev, found by pkg-config) for Kafka TLS and SASL.
RUN --mount=type=cache,target=/usr/local/cargo/registry \
    --mount=type=cache,target=/src/target \
    WAL_COMMIT=$WAL_COMMIT cargo build --release --locked \
      -p wal-producer -p wal-consumer -p wal-control-plane -p wal-writer -p walctl --bins \
 && mkdir /out \
 && cp target/release/wal-producer target/release/wal-consumer \
       target/release/wal-control-plane target/release/wal-writer target/release/walctl /out/

FROM debian:bookworm-slim
# zlib and OpenSSL for librdkafka; CA certificates for TLS to AWS and other HTTPS endpoints.
RUN apt-get update \
 && apt-get install -y --no-install-recommends ca-certificates libssl3 zlib1g \
 && rm -rf /var/lib/apt/lists/* \
 && groupadd --gid 10001 wal \
 && useradd --uid 10001 --gid wal --no-create-home --shell /usr/sbin/nologin wal
COPY --from=build /out/ /usr/local/bin/
USER 10001:10001
# The gRPC and metrics ports the binaries listen on inside a pod (the chart sets the addresses).
EXPOSE 50051 50052 50060 50070 9464 9465 9470
CMD ["wal-producer", "--help"]
