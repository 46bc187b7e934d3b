# Engram in a container: the server from the wheel, as a non-root user. Point ENGRAM_DATABASE_URL at a
# PostgreSQL with pgvector and pg_trgm (compose.yaml runs one); without it the embedded PostgreSQL
# starts under /data. The same image runs workers: `docker run … engram worker`.

FROM python:3.12-slim-bookworm AS build
WORKDIR /src
RUN pip install --no-cache-dir "build==1.6.1"
COPY pyproject.toml README.md ./
COPY src ./src
RUN python -m build --wheel --outdir /dist

FROM python:3.12-slim-bookworm
ENV PYTHONDONTWRITEBYTECODE=1 \
    PYTHONUNBUFFERED=1 \
    ENGRAM_HOST=0.0.0.0 \
    ENGRAM_PORT=8888 \
    ENGRAM_HOME=/data
RUN useradd --create-home --uid 10001 --user-group engram \
    && mkdir /data \
    && chown engram:engram /data
COPY --from=build /dist/ /tmp/dist/
RUN pip install --no-cache-dir /tmp/dist/*.whl \
    && rm -rf /tmp/dist
USER 10001:10001
WORKDIR /home/engram
# The faster embedder build (ENGRAM_FAST_EMBEDDER), made now instead of at the first start.
RUN python -m engram.models.fast_model
VOLUME ["/data"]
EXPOSE 8888
HEALTHCHECK --interval=10s --timeout=3s --start-period=60s \
    CMD ["python", "-c", "import urllib.request; urllib.request.urlopen('http://127.0.0.1:8888/health/ready', timeout=2)"]
CMD ["engram", "serve"]
