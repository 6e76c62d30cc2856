#!/usr/bin/env bash
# Container images for the tests, made on this machine (there is no registry to pull from).
#
#   docker.sh check                 exit 0 when the Docker engine answers (else says why)
#   docker.sh base                  make sure the image debian:bookworm-slim exists: a minbase
#                                   debootstrap of Debian 12, imported under the name the
#                                   Dockerfiles use (the rootfs tarball is cached)
#   docker.sh sluice BINARY [TAG]   the runtime image of docker/Dockerfile (stage `prebuilt`)
#                                   around BINARY (default tag sluice-test/sluice:latest);
#                                   prints the tag
#   docker.sh postgres [TAG]        PostgreSQL 15 with the official image's environment
#                                   contract (POSTGRES_PASSWORD, POSTGRES_USER, POSTGRES_DB,
#                                   /docker-entrypoint-initdb.d); default tag
#                                   sluice-test/postgres:15; prints the tag
#   docker.sh broker KIND [TAG]     a Kafka-protocol test broker (noida or tansu, the binaries
#                                   kafka.sh installs) listening on :9092 and advertising the
#                                   container's host name; default tag sluice-test/broker:KIND
#   docker.sh clean PREFIX          remove every container, network and volume whose name
#                                   starts with PREFIX (tests call it before and after a run)
#
# Every image is rebuilt only when its inputs change: an image carries the hash of its inputs
# in the label sluice.inputs and is kept while that matches. The debootstrapped tarball, and
# a saved copy of the Postgres and broker images (loaded again when the engine lost them),
# live in $SLUICE_DOCKER_CACHE (default $HOME/.cache/sluice-test/docker). What the engine on these
# machines allows is written down in docker-engine.md beside this script.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
ROOT=$(cd "$HERE/../.." && pwd)
CACHE=${SLUICE_DOCKER_CACHE:-$HOME/.cache/sluice-test/docker}
SUITE=bookworm
BASE_TAG=debian:bookworm-slim
# The legacy builder is what the engine offers here (no buildx plugin); say so instead of
# printing its deprecation notice on every build.
export DOCKER_BUILDKIT=0

usage() {
  echo "usage: $0 check | base | sluice BINARY [TAG] | postgres [TAG] | broker noida|tansu [TAG] | clean PREFIX" >&2
  exit 2
}

check() {
  command -v docker >/dev/null || { echo "docker: the docker client is not installed" >&2; return 1; }
  docker info >/dev/null 2>&1 || { echo "docker: the engine does not answer (is the daemon running?)" >&2; return 1; }
}

# The Debian mirror apt uses on this machine (deb822 or one-line sources), else Debian's own.
mirror() {
  local uri
  uri=$(grep -hsE '^URIs:' /etc/apt/sources.list.d/*.sources | awk '{print $2}' | grep -v security | head -1 || true)
  [[ -n "$uri" ]] || uri=$(grep -hsE '^deb ' /etc/apt/sources.list | awk '{print $2}' | grep -v security | head -1 || true)
  echo "${uri:-http://deb.debian.org/debian}"
}

# inputs_hash FILE... : one hash over the named files' contents and any extra words on stdin
inputs_hash() {
  { cat "$@"; cat; } | sha256sum | cut -c1-16
}

# image_current TAG HASH: exit 0 when TAG exists and was built from inputs HASH
image_current() {
  [[ "$(docker image inspect --format '{{ index .Config.Labels "sluice.inputs" }}' "$1" 2>/dev/null)" == "$2" ]]
}

base() {
  check
  # The recipe below is the input: change it and the tarball is made again.
  local mirror_url key tarball rootfs
  mirror_url=$(mirror)
  key=$(echo "$SUITE minbase $mirror_url trim-v1" | sha256sum | cut -c1-16)
  if image_current "$BASE_TAG" "$key"; then return 0; fi
  if docker image inspect "$BASE_TAG" >/dev/null 2>&1 \
    && [[ -z "$(docker image inspect --format '{{ index .Config.Labels "sluice.inputs" }}' "$BASE_TAG" 2>/dev/null)" ]] \
    && [[ -n "$(docker image inspect --format '{{ .RepoDigests }}' "$BASE_TAG" | tr -d '[]')" ]]; then
    return 0 # a real debian:bookworm-slim pulled from a registry: use it as is
  fi
  tarball="$CACHE/$SUITE-minbase-$key.tar"
  mkdir -p "$CACHE"
  exec 9>"$CACHE/base.lock"
  flock 9
  if [[ ! -s "$tarball" ]]; then
    if ! command -v debootstrap >/dev/null; then
      local SUDO=""; [[ $(id -u) -eq 0 ]] || SUDO=sudo
      $SUDO apt-get update -qq
      DEBIAN_FRONTEND=noninteractive $SUDO apt-get install -y -qq debootstrap >/dev/null
    fi
    rootfs=$(mktemp -d "$CACHE/rootfs.XXXXXX")
    echo "docker.sh: debootstrap $SUITE from $mirror_url (once; cached in $tarball)" >&2
    debootstrap --variant=minbase "$SUITE" "$rootfs" "$mirror_url" >"$CACHE/debootstrap.log" 2>&1 \
      || { echo "debootstrap failed; see $CACHE/debootstrap.log" >&2; rm -rf "$rootfs"; exit 1; }
    # As slim as Debian's own -slim image: no package caches, lists, docs, man pages or locales.
    rm -rf "$rootfs"/var/cache/apt/archives/*.deb "$rootfs"/var/lib/apt/lists/* \
      "$rootfs"/usr/share/doc/* "$rootfs"/usr/share/man/* "$rootfs"/usr/share/info/* "$rootfs"/usr/share/locale/*
    tar -C "$rootfs" -c . >"$tarball.tmp"
    mv "$tarball.tmp" "$tarball"
    rm -rf "$rootfs"
  fi
  docker import --change "LABEL sluice.inputs=$key" --change 'CMD ["bash"]' "$tarball" "$BASE_TAG" >/dev/null
  exec 9>&-
}

# build TAG HASH CONTEXT DOCKERFILE [docker build args...]: build unless current
build() {
  local tag=$1 hash=$2 context=$3 dockerfile=$4; shift 4
  if image_current "$tag" "$hash"; then return 0; fi
  # Tests run in parallel: one builds a tag, the others wait and find it current.
  mkdir -p "$CACHE"
  exec 7>"$CACHE/build-${tag//[^a-zA-Z0-9]/_}.lock"
  flock 7
  if image_current "$tag" "$hash"; then exec 7>&-; return 0; fi
  # A saved copy of the same inputs (the engine's images were removed, ~/.cache was kept).
  local saved="$CACHE/images/${tag//[^a-zA-Z0-9]/_}-$hash.tar"
  if [[ -n "${SAVE_IMAGE:-}" && -s "$saved" ]] && docker load -q -i "$saved" >/dev/null 2>&1 && image_current "$tag" "$hash"; then
    exec 7>&-; return 0
  fi
  local log; log=$(mktemp)
  if ! docker build -q --label "sluice.inputs=$hash" -t "$tag" -f "$dockerfile" "$@" "$context" >"$log" 2>&1; then
    echo "docker build of $tag failed:" >&2; cat "$log" >&2; rm -f "$log"; exit 1
  fi
  rm -f "$log"
  if [[ -n "${SAVE_IMAGE:-}" ]]; then
    mkdir -p "$CACHE/images"
    rm -f "$CACHE/images/${tag//[^a-zA-Z0-9]/_}"-*.tar
    docker save -o "$saved.tmp" "$tag" && mv "$saved.tmp" "$saved"
  fi
  exec 7>&-
}

sluice_image() {
  local binary=$1 tag=${2:-sluice-test/sluice:latest}
  [[ -x "$binary" ]] || { echo "no executable at $binary" >&2; exit 1; }
  base
  local hash ctx
  hash=$(inputs_hash "$ROOT/docker/Dockerfile" "$binary" </dev/null)
  # The context is the binary and docker/ alone: the `prebuilt` stage copies
  # docker/bin/sluice, and nothing before it reads the source tree.
  if ! image_current "$tag" "$hash"; then
    ctx=$(mktemp -d)
    mkdir -p "$ctx/docker/bin"
    cp "$ROOT/docker/Dockerfile" "$ctx/docker/Dockerfile"
    cp "$binary" "$ctx/docker/bin/sluice"
    # A debug build carries line tables; the image gets a stripped program, as a release is.
    strip "$ctx/docker/bin/sluice" 2>/dev/null || true
    build "$tag" "$hash" "$ctx" "$ctx/docker/Dockerfile" --target prebuilt
    rm -rf "$ctx"
  fi
  echo "$tag"
}

postgres_image() {
  local tag=${1:-sluice-test/postgres:15}
  base
  local hash
  hash=$(inputs_hash "$HERE/docker/postgres.Dockerfile" "$HERE/docker/postgres-entrypoint.sh" </dev/null)
  SAVE_IMAGE=1 build "$tag" "$hash" "$HERE/docker" "$HERE/docker/postgres.Dockerfile"
  echo "$tag"
}

broker_image() {
  local kind=${1:-} tag=${2:-}
  [[ "$kind" == noida || "$kind" == tansu ]] || usage
  tag=${tag:-sluice-test/broker:$kind}
  base
  "$HERE/kafka.sh" install "$kind" >/dev/null
  local bin ctx hash
  bin=$("$HERE/kafka.sh" binary "$kind")
  hash=$(inputs_hash "$HERE/docker/broker.Dockerfile" "$HERE/docker/broker-entrypoint.sh" "$bin" <<<"$kind")
  if ! image_current "$tag" "$hash"; then
    ctx=$(mktemp -d)
    cp "$bin" "$ctx/broker"
    cp "$HERE/docker/broker.Dockerfile" "$HERE/docker/broker-entrypoint.sh" "$ctx/"
    SAVE_IMAGE=1 build "$tag" "$hash" "$ctx" "$ctx/broker.Dockerfile" --build-arg "KIND=$kind"
    rm -rf "$ctx"
  fi
  echo "$tag"
}

clean() {
  local prefix=$1
  [[ ${#prefix} -ge 6 ]] || { echo "clean: a prefix of at least 6 characters, please" >&2; exit 2; }
  local ids
  ids=$(docker ps -aq --filter "name=^/$prefix" || true)
  [[ -z "$ids" ]] || docker rm -f -v $ids >/dev/null 2>&1 || true
  ids=$(docker network ls -q --filter "name=^$prefix" || true)
  [[ -z "$ids" ]] || docker network rm $ids >/dev/null 2>&1 || true
  ids=$(docker volume ls -q --filter "name=^$prefix" || true)
  [[ -z "$ids" ]] || docker volume rm -f $ids >/dev/null 2>&1 || true
}

case "${1:-}" in
  check) check ;;
  base) base ;;
  sluice) [[ -n "${2:-}" ]] || usage; sluice_image "$2" "${3:-}" ;;
  postgres) postgres_image "${2:-}" ;;
  broker) broker_image "${2:-}" "${3:-}" ;;
  clean) [[ -n "${2:-}" ]] || usage; clean "$2" ;;
  *) usage ;;
esac
