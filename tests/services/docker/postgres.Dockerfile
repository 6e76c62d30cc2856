# PostgreSQL 15 for the container tests, on the locally made Debian base (no registry here).
# It honours the official postgres image's environment contract, so docker/compose.yaml runs
# unchanged against it: POSTGRES_PASSWORD, POSTGRES_USER, POSTGRES_DB,
# POSTGRES_HOST_AUTH_METHOD, /docker-entrypoint-initdb.d/*.sql|*.sh, `postgres -c key=value`.
FROM debian:bookworm-slim
RUN mkdir -p /etc/postgresql-common \
 && echo 'create_main_cluster = false' >/etc/postgresql-common/createcluster.conf \
 && apt-get update \
 && DEBIAN_FRONTEND=noninteractive apt-get install -y --no-install-recommends postgresql-15 \
 && rm -rf /var/lib/apt/lists/* \
 && mkdir -p /var/lib/postgresql/data /var/run/postgresql /docker-entrypoint-initdb.d \
 && chown -R postgres:postgres /var/lib/postgresql /var/run/postgresql
ENV PATH=/usr/lib/postgresql/15/bin:$PATH \
    PGDATA=/var/lib/postgresql/data
COPY postgres-entrypoint.sh /usr/local/bin/docker-entrypoint.sh
VOLUME /var/lib/postgresql/data
EXPOSE 5432
STOPSIGNAL SIGINT
ENTRYPOINT ["/usr/local/bin/docker-entrypoint.sh"]
CMD ["postgres"]
