#!/usr/bin/env bash
# Installs what building sluice and running its tests need, skipping what is present:
#   - Debian packages to build the bundled librdkafka (cmake, OpenSSL and SASL headers, …)
#     and the openssl tool (postgres.sh makes the TLS test cluster's certificates with it);
#   - the test services' own installs (the Kafka-protocol broker's and the S3 server's venvs).
# PostgreSQL 15 comes from the machine (/usr/lib/postgresql/15/bin); postgres.sh checks it.
# usage: setup.sh [build]   (build: only what compiling needs)
set -euo pipefail
cd "$(dirname "$0")"
BUILD_PACKAGES=(cmake pkg-config libssl-dev libsasl2-dev libcurl4-openssl-dev openssl)
if ! dpkg -s "${BUILD_PACKAGES[@]}" >/dev/null 2>&1; then
  SUDO=""; [[ $(id -u) -eq 0 ]] || SUDO=sudo
  $SUDO apt-get update -qq
  $SUDO apt-get install -y -qq "${BUILD_PACKAGES[@]}"
fi
[[ "${1:-}" == build ]] && exit 0
./kafka.sh install noida
./s3.sh install
