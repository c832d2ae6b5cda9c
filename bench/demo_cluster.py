"""What the WAN benches share (`bench/geo`, `bench/globlease`): a `meridian demo --topology PRESET` cluster, one
node per region with the preset's WAN emulated between them, started and stopped, and `meridian` commands run
against it. Standard library only.
"""

import json
import signal
import subprocess
import sys
import time
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
MERIDIAN = ROOT / "target" / "release" / "meridian"
START_TIMEOUT_S = 60


def need_binary(bench):
    if not MERIDIAN.exists():
        sys.exit(f"{bench}: {MERIDIAN} is missing: run `cargo build --release` first")


def start_demo(bench, topology, port, data):
    """Starts the demo and returns it with its nodes as (region, RESP port, HTTP port), from what it prints."""
    cmd = [str(MERIDIAN), "demo", "--topology", topology, "--port", str(port), "--data-dir", str(data)]
    demo = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
    nodes, deadline = [], time.monotonic() + START_TIMEOUT_S
    for line in demo.stdout:
        words = line.split()
        if words[:1] == ["node"] and "region" in words:
            resp = int(words[words.index("RESP") + 1].rsplit(":", 1)[1])
            http = int(words[words.index("HTTP") + 1].rsplit(":", 1)[1])
            nodes.append((words[words.index("region") + 1], resp, http))
        if line.startswith("Try:") or time.monotonic() > deadline:
            break
    if not nodes:
        demo.kill()
        sys.exit(f"{bench}: the demo did not list its nodes within {START_TIMEOUT_S} s")
    return demo, nodes


def stop_demo(demo):
    demo.send_signal(signal.SIGINT)
    try:
        demo.wait(timeout=20)
    except subprocess.TimeoutExpired:
        demo.kill()


def meridian(bench, *args, check=True):
    out = subprocess.run([str(MERIDIAN), *args], capture_output=True, text=True)
    if check and out.returncode != 0:
        sys.exit(f"{bench}: meridian {' '.join(args)} failed:\n{out.stderr}")
    return out


def wait_ready(bench, http_port):
    """Waits until the cluster has a map that shows every keyspace's chains (ctl status answers)."""
    deadline = time.monotonic() + START_TIMEOUT_S
    while time.monotonic() < deadline:
        if meridian(bench, "ctl", "--addr", f"127.0.0.1:{http_port}", "status", check=False).returncode == 0:
            return
        time.sleep(0.5)
    sys.exit(f"{bench}: the cluster did not become ready")


def protocol_events(http_port):
    """A node's `meridian_protocol_events_total` counters, by event."""
    with urllib.request.urlopen(f"http://127.0.0.1:{http_port}/metrics", timeout=10) as r:
        text = r.read().decode()
    prefix = 'meridian_protocol_events_total{event="'
    events = {}
    for line in text.splitlines():
        if line.startswith(prefix):
            name, value = line[len(prefix):].split('"}', 1)
            events[name] = float(value)
    return events


def load_json(path):
    return json.loads(Path(path).read_text())
