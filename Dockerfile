# The Odradek image: one node per container (`odradek server`), or the Kubernetes operator (`odradek operator`).
FROM python:3.11-slim

ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    PIP_DISABLE_PIP_VERSION_CHECK=1

WORKDIR /build
COPY pyproject.toml README.md ./
COPY src ./src
RUN pip install --no-cache-dir . \
    && rm -rf /build \
    && groupadd --gid 1000 odradek \
    && useradd --uid 1000 --gid 1000 --create-home --home-dir /home/odradek odradek \
    && mkdir -p /etc/odradek /var/lib/odradek/data \
    && chown -R 1000:1000 /etc/odradek /var/lib/odradek

USER 1000:1000
WORKDIR /var/lib/odradek

# client listener, controller quorum, replication, HTTP (metrics and console)
EXPOSE 9092 9090 9091 9644
STOPSIGNAL SIGTERM
ENTRYPOINT ["odradek"]
CMD ["server", "--config", "/etc/odradek/server.properties"]
