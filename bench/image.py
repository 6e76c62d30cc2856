"""The container image's size and start-up, measured on this machine's Docker engine.

    python3 bench/image.py [--binary PATH] [--runs N]

Builds the release binary unless --binary names one (`cargo build --release -p sluice`), the
runtime image around it (`tests/services/docker.sh sluice`, stage `prebuilt` of
docker/Dockerfile), and prints a table: image size beside the Debian base it is assembled from
(debian:bookworm-slim, the baseline of the same run), the binary's size, and the median over N
runs of `docker run` to the first 200 from /health, with the container's memory once healthy.
"""
import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from harness import ROOT, TARGET, free_port  # noqa: E402

TAG = "sluice-bench/sluice:release"


def sh(*args, **kw):
    return subprocess.run(args, check=True, capture_output=True, text=True, **kw).stdout.strip()


def image_mb(tag):
    return int(sh("docker", "image", "inspect", "-f", "{{.Size}}", tag)) / 1e6


def healthy_after(tag):
    """Seconds from `docker run` to the first 200 from /health, and the container's memory then (MB)."""
    port = free_port()
    name = f"sluice-bench-image-{os.getpid()}"
    subprocess.run(["docker", "rm", "-f", name], capture_output=True)
    start = time.monotonic()
    sh("docker", "run", "-d", "--name", name, "-p", f"127.0.0.1:{port}:8083", tag)
    try:
        while True:
            try:
                with urllib.request.urlopen(f"http://127.0.0.1:{port}/health", timeout=1) as r:
                    if r.status == 200:
                        break
            except OSError:
                pass
            if time.monotonic() - start > 60:
                raise SystemExit("the container did not become healthy in 60 s")
            time.sleep(0.02)
        took = time.monotonic() - start
        mem = sh("docker", "stats", "--no-stream", "--format", "{{.MemUsage}}", name).split("/")[0].strip()
        return took, mem
    finally:
        subprocess.run(["docker", "rm", "-f", name], capture_output=True)


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("--binary", default=None)
    ap.add_argument("--runs", type=int, default=5)
    args = ap.parse_args()
    binary = args.binary
    if binary is None:
        subprocess.run(["cargo", "build", "--release", "--locked", "-p", "sluice"], cwd=ROOT, check=True)
        binary = os.path.join(TARGET, "release", "sluice")
    sh("bash", os.path.join(ROOT, "tests/services/docker.sh"), "sluice", binary, TAG)
    base = image_mb("debian:bookworm-slim")
    size = image_mb(TAG)
    runs = [healthy_after(TAG) for _ in range(args.runs)]
    start = statistics.median(t for t, _ in runs)
    print(f"{'what':<36} {'value':>12}")
    with tempfile.TemporaryDirectory() as tmp:
        stripped = os.path.join(tmp, "sluice")
        shutil.copy(binary, stripped)
        subprocess.run(["strip", stripped], check=False)
        print(f"{'binary (stripped, as in the image)':<36} {os.path.getsize(stripped) / 1e6:>10.1f} MB")
    print(f"{'sluice image':<36} {size:>10.1f} MB")
    print(f"{'debian:bookworm-slim (baseline)':<36} {base:>10.1f} MB")
    print(f"{'image / baseline':<36} {size / base:>11.2f}x")
    print(f"{'docker run to /health 200 (median)':<36} {start:>11.2f}s")
    print(f"{'memory when healthy (last run)':<36} {runs[-1][1]:>12}")


if __name__ == "__main__":
    main()
