"""What every benchmark script shares: a free loopback port, a JSON HTTP call, the CPU seconds
and peak RSS of a process read from /proc, and a standalone worker to run a pipeline in."""
import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.error
import urllib.request

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
TARGET = os.environ.get("CARGO_TARGET_DIR", os.path.expanduser("~/.cache/sluice-target"))
CLK_TCK = os.sysconf("SC_CLK_TCK")


def free_port():
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def http(method, url, body=None):
    data = None if body is None else json.dumps(body).encode()
    req = urllib.request.Request(url, data=data, method=method, headers={"Content-Type": "application/json"})
    try:
        with urllib.request.urlopen(req, timeout=30) as r:
            text = r.read().decode()
            return r.status, (json.loads(text) if text else None)
    except urllib.error.HTTPError as e:
        return e.code, json.loads(e.read().decode() or "null")


def proc_system_cpu(pid):
    """System (kernel) CPU seconds of a running process."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return int(fields[12]) / CLK_TCK


def proc_usage(pid):
    """(user+system CPU seconds, peak RSS in MB) of a running process."""
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    cpu = (int(fields[11]) + int(fields[12])) / CLK_TCK
    rss_kb = 0
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmHWM:"):
                rss_kb = int(line.split()[1])
    return cpu, rss_kb / 1024


class StandaloneWorker:
    """`sluice standalone` in a fresh temporary directory with JsonConverter and a 200 ms
    offset flush (`props` override them): healthy when entered, stopped with SIGTERM and its
    directory removed when left."""

    def __init__(self, binary, props, prefix="sluice-bench-"):
        self.binary, self.props, self.prefix = binary, props, prefix

    def __enter__(self):
        self.work = tempfile.mkdtemp(prefix=self.prefix)
        port = free_port()
        config = {
            "listeners": f"http://127.0.0.1:{port}",
            "data.dir": os.path.join(self.work, "data"),
            "offset.flush.interval.ms": "200",
            "key.converter": "org.apache.kafka.connect.json.JsonConverter",
            "value.converter": "org.apache.kafka.connect.json.JsonConverter",
            **self.props,
        }
        worker = os.path.join(self.work, "worker.properties")
        with open(worker, "w") as f:
            f.writelines(f"{k}={v}\n" for k, v in config.items())
        env = dict(os.environ, RUST_LOG="warn")
        self.proc = subprocess.Popen([self.binary, "standalone", worker], cwd=self.work, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        self.url = f"http://127.0.0.1:{port}"
        for _ in range(600):
            try:
                if http("GET", self.url + "/health")[0] == 200:
                    return self
            except OSError:
                pass
            self.check_alive()
            time.sleep(0.05)
        self.__exit__(None, None, None)
        raise RuntimeError("sluice did not become healthy in 30 s")

    def __exit__(self, *_):
        self.proc.terminate()
        self.proc.wait(timeout=30)
        shutil.rmtree(self.work, ignore_errors=True)

    def usage(self):
        return proc_usage(self.proc.pid)

    def create(self, name, config):
        code, body = http("POST", self.url + "/connectors", {"name": name, "config": config})
        assert code == 201, body

    def check_alive(self):
        if self.proc.poll() is not None:
            raise RuntimeError(f"sluice exited: {self.proc.stderr.read().decode()}")

    def sink_committed(self, sink="sink"):
        """Records the sink connector has committed, over all its partitions."""
        _, body = http("GET", f"{self.url}/connectors/{sink}/offsets")
        return sum(o["offset"]["kafka_offset"] for o in (body or {}).get("offsets", []))
