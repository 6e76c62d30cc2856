#!/bin/sh
set -eu
host=${BROKER_HOST:-$(hostname)}
case "$BROKER_KIND" in
  tansu) exec /usr/local/bin/broker broker --listener-url tcp://0.0.0.0:9092 \
           --advertised-listener-url "tcp://$host:9092" --storage-engine memory://tansu/ ;;
  # noida advertises the address it binds (0.0.0.0 would send clients to themselves): bind
  # the container's own address on its network.
  noida) exec /usr/local/bin/broker start --data-dir /data --host "$(hostname -i | cut -d' ' -f1)" \
           --only kafka --kafka-port 9092 ;;
  *) echo "unknown BROKER_KIND $BROKER_KIND" >&2; exit 2 ;;
esac
