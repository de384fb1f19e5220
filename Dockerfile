# frontier-crawl in a container: one crawl per container, its output directory a volume.
#
#   docker build -t frontier-crawl .
#   docker run --rm -v "$PWD/config:/etc/frontier-crawl:ro" -v "$PWD/crawl:/crawl" \
#       --stop-timeout 60 frontier-crawl
#
# /etc/frontier-crawl/crawl.toml is the crawl's configuration, with output_dir = "/crawl" (a
# spider's source sits beside it). /crawl must belong to the image's user (uid 10001) and be
# writable by nobody else: `chown 10001 crawl && chmod 0755 crawl` for a bind mount; a named
# volume gets it from the image. Running the same container (or a new one on the same volume)
# again resumes the crawl. See docs/operating.md, "Containers".
#
# Signals: tini is PID 1. `docker stop` sends SIGTERM to it, and tini (-g) passes it on to the
# crawler's process group, where only the main process acts on it: one graceful stop, then the
# report and exit status 0. Give the stop more time than crawl.stop_timeout_s (30 s by default):
# `docker run --stop-timeout 60`, compose's stop_grace_period. `docker kill -s HUP` reloads
# crawl.toml. `docker run --init` is not needed (and harmless: tini then runs under docker's).

ARG PYTHON_IMAGE=python:3.11-slim-bookworm

FROM ${PYTHON_IMAGE} AS build
# A compiler and libcurl's headers, in case pycurl (or another dependency) has no wheel for
# this platform and pip builds it from its sdist; none of it reaches the final image.
RUN apt-get update \
 && apt-get install -y --no-install-recommends gcc libc6-dev libcurl4-openssl-dev libssl-dev \
 && rm -rf /var/lib/apt/lists/*
WORKDIR /src
COPY pyproject.toml README.md LICENSE ./
COPY frontier_crawl ./frontier_crawl
RUN python -m venv /opt/frontier-crawl \
 && /opt/frontier-crawl/bin/pip install --no-cache-dir --disable-pip-version-check . \
 && /opt/frontier-crawl/bin/frontier-crawl --version

FROM ${PYTHON_IMAGE}
# tini: an init that reaps and forwards signals; libcurl4: for a pycurl built from source.
RUN apt-get update \
 && apt-get install -y --no-install-recommends tini libcurl4 ca-certificates \
 && rm -rf /var/lib/apt/lists/* \
 && useradd --system --uid 10001 --user-group --home-dir /crawl --no-create-home \
      --shell /usr/sbin/nologin crawler \
 && install -d -o crawler -g crawler -m 0755 /crawl \
 && install -d -m 0755 /etc/frontier-crawl
COPY --from=build /opt/frontier-crawl /opt/frontier-crawl
ENV PATH=/opt/frontier-crawl/bin:$PATH \
    PYTHONUNBUFFERED=1
USER crawler
WORKDIR /crawl
VOLUME ["/crawl"]
# The control API and dashboard, when crawl.toml's [control] listen is "0.0.0.0:8740" (they
# listen on loopback by default, which is unreachable from outside the container).
EXPOSE 8740
STOPSIGNAL SIGTERM
ENTRYPOINT ["/usr/bin/tini", "-g", "--", "frontier-crawl"]
CMD ["--config", "/etc/frontier-crawl/crawl.toml"]
