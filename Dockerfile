# replay-ledger in a container: `serve` by default.
#
#   docker build -t replay-ledger .
#   docker run --rm --env-file /etc/replay-ledger/env -p 9187:9187 replay-ledger
#   docker stop -t 45 <container>      # SIGTERM; serve exits 0 within its 30 s grace period
#
# The example jobs are baked in at /etc/replay-ledger/jobs; mount your own over them
# (-v ./jobs:/etc/replay-ledger/jobs:ro). Secrets come from the environment, never the image.
# Untested on the machine this was written on (no container engine there); see README.

# --- build ---
FROM rust:1-bookworm AS build
WORKDIR /src
# Dependencies first, so editing the sources does not rebuild them.
COPY Cargo.toml Cargo.lock ./
# The core crate is built with the binary; the workspace's other members (test rigs, the demo's
# program) are not built, but cargo reads their manifests.
COPY core/Cargo.toml core/
COPY testkit/Cargo.toml testkit/
COPY demo/Cargo.toml demo/
RUN mkdir -p src core/src testkit/src demo/src && echo 'fn main() {}' > src/main.rs \
    && touch src/lib.rs core/src/lib.rs testkit/src/lib.rs && echo 'fn main() {}' > demo/src/main.rs \
    && cargo build --release --locked --bin replay-ledger \
    && rm -rf src core/src
COPY src src
COPY core/src core/src
COPY migrations migrations
COPY jobs jobs
# touch: make cargo see the real sources as newer than the placeholder build.
RUN touch src/main.rs src/lib.rs core/src/lib.rs \
    && cargo build --release --locked --bin replay-ledger

# --- runtime ---
FROM debian:bookworm-slim
RUN apt-get update \
    && apt-get install -y --no-install-recommends ca-certificates \
    && rm -rf /var/lib/apt/lists/* \
    && useradd --system --uid 10001 --home-dir /nonexistent --shell /usr/sbin/nologin replay-ledger
COPY --from=build /src/target/release/replay-ledger /usr/local/bin/replay-ledger
COPY jobs /etc/replay-ledger/jobs
USER 10001
# Inside a container the metrics port must listen beyond loopback to be scraped.
ENV METRICS_ADDR=0.0.0.0:9187 \
    LOG_FORMAT=json
EXPOSE 9187
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/local/bin/replay-ledger", "--jobs-dir", "/etc/replay-ledger/jobs"]
CMD ["serve"]
