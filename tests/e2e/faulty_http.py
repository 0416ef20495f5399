"""A small HTTP/1.1 file server with faults, for tests/e2e/remote_http.sh.

    faulty_http.py ROOT PORT_FILE [--faults] [--delay-ms N]

Serves ROOT on 127.0.0.1 (an ephemeral port, written to PORT_FILE) with HEAD
and single-range GET (Range: bytes=A-B), keep-alive. With --faults, of the
first five GET requests for a file, the second answers 500, the third closes the
connection after half its body (a reset), and the fourth sends half its body
then stalls for 4 s (longer than the client's SL_HTTP_STALL_S=1); so every
request succeeds on a retry. A path containing "always500" always answers
500; one containing "badrec" answers 500 to every range that touches
neither end of the file (a sluice shard's records, not its header or
index). One containing "longcl" answers a range with a Content-Length 10
bytes larger than its Content-Range (and body), then holds the connection
open for 5 s; one containing "trickle" sends its body 512 bytes every
0.3 s (faster than the stall limit, slower than any deadline). With
--delay-ms N, every GET waits N ms before its answer (a
link's latency, each connection on its own thread). Counts of what was
served, and the most GETs in progress at once, go to stderr on exit
(SIGTERM).
"""
import os
import re
import signal
import socket
import sys
import threading
import time
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

ROOT, PORT_FILE = sys.argv[1], sys.argv[2]
FAULTS = "--faults" in sys.argv
DELAY = (float(sys.argv[sys.argv.index("--delay-ms") + 1]) / 1000
         if "--delay-ms" in sys.argv else 0)
lock = threading.Lock()
count = {}
served = {"ok": 0, "500": 0, "reset": 0, "stall": 0}
busy = {"now": 0, "max": 0}


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"
    # Headers and body go out in separate writes: with Nagle on, a
    # delayed ACK would add ~40 ms to every answer.
    disable_nagle_algorithm = True

    def log_message(self, *a):
        pass

    def _file(self):
        rel = self.path.split("?")[0].lstrip("/")
        for fault in ("always500/", "longcl/", "trickle/"):
            rel = rel.replace(fault, "")
        path = os.path.join(ROOT, rel)
        return path if os.path.isfile(path) else None

    def _fail(self, code):
        self.send_response(code)
        self.send_header("Content-Length", "0")
        self.end_headers()

    def do_HEAD(self):
        if "always500" in self.path:
            return self._fail(500)
        path = self._file()
        if not path:
            return self._fail(404)
        self.send_response(200)
        self.send_header("Content-Length", str(os.path.getsize(path)))
        self.send_header("Accept-Ranges", "bytes")
        self.end_headers()

    def do_GET(self):
        with lock:
            busy["now"] += 1
            busy["max"] = max(busy["max"], busy["now"])
        try:
            if DELAY:
                time.sleep(DELAY)
            self._get()
        finally:
            with lock:
                busy["now"] -= 1

    def _get(self):
        if "always500" in self.path:
            with lock:
                served["500"] += 1
            return self._fail(500)
        path = self._file()
        if not path:
            return self._fail(404)
        size = os.path.getsize(path)
        m = re.match(r"bytes=(\d+)-(\d+)$", self.headers.get("Range", ""))
        first, last = (int(m[1]), min(int(m[2]), size - 1)) if m else (0, size - 1)
        if "badrec" in self.path and 0 < first and last < size - 1:
            with lock:
                served["500"] += 1
            return self._fail(500)
        with lock:
            k = count.get(self.path, 0)
            count[self.path] = k + 1
        fault = ["", "500", "reset", "stall", ""][k] if FAULTS and k < 5 else ""
        if fault == "500":
            with lock:
                served["500"] += 1
            return self._fail(500)
        with open(path, "rb") as f:
            f.seek(first)
            body = f.read(last - first + 1)
        self.send_response(206 if m else 200)
        if m:
            self.send_header("Content-Range", f"bytes {first}-{last}/{size}")
        longcl = m and "longcl" in self.path
        self.send_header("Content-Length", str(len(body) + 10 * bool(longcl)))
        self.end_headers()
        if longcl:
            self.wfile.write(body)
            self.wfile.flush()
            time.sleep(5)
            self.close_connection = True
            return
        if "trickle" in self.path:
            for i in range(0, len(body), 512):
                self.wfile.write(body[i:i + 512])
                self.wfile.flush()
                time.sleep(0.3)
            return
        if fault in ("reset", "stall") and len(body) > 1:
            self.wfile.write(body[: len(body) // 2])
            self.wfile.flush()
            with lock:
                served[fault] += 1
            if fault == "stall":
                time.sleep(4)
            self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER,
                                       b"\x01\x00\x00\x00\x00\x00\x00\x00")
            self.close_connection = True
            return
        self.wfile.write(body)
        with lock:
            served["ok"] += 1


ThreadingHTTPServer.request_queue_size = 256  # many connections at once
srv = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
srv.daemon_threads = True


def stop(*_):
    print("served " + " ".join(f"{k}={v}" for k, v in served.items()) +
          f" concurrent={busy['max']}", file=sys.stderr, flush=True)
    os._exit(0)


signal.signal(signal.SIGTERM, stop)
with open(PORT_FILE + ".tmp", "w") as f:
    f.write(str(srv.server_address[1]))
os.rename(PORT_FILE + ".tmp", PORT_FILE)
srv.serve_forever()
