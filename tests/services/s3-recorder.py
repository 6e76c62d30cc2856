#!/usr/bin/env python3
"""A pass-through HTTP proxy in front of an S3 server, for tests.

    s3-recorder.py LISTEN_PORT UPSTREAM_PORT LOG_FILE

Forwards every request to 127.0.0.1:UPSTREAM_PORT unchanged and appends one JSON line per
request to LOG_FILE: {"method", "path" (with the query), "headers" (the x-amz-* request
headers, names lowercase)}. Lets a test check what a writer sent where the server does not
keep it (moto accepts SSE-C headers and forgets them). Runs until killed.
"""
import http.client
import http.server
import json
import sys

listen, upstream, log = int(sys.argv[1]), int(sys.argv[2]), sys.argv[3]
HOP = {"connection", "keep-alive", "transfer-encoding", "host"}


class Forward(http.server.BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def forward(self):
        n = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(n) if n else None
        headers = {k: v for k, v in self.headers.items() if k.lower() not in HOP}
        conn = http.client.HTTPConnection("127.0.0.1", upstream, timeout=120)
        conn.request(self.command, self.path, body=body, headers=headers)
        resp = conn.getresponse()
        data = resp.read()
        amz = {k.lower(): v for k, v in self.headers.items() if k.lower().startswith("x-amz-")}
        with open(log, "a") as f:
            f.write(json.dumps({"method": self.command, "path": self.path, "headers": amz}) + "\n")
        self.send_response(resp.status)
        for k, v in resp.getheaders():
            if k.lower() in HOP or (k.lower() == "content-length" and self.command != "HEAD"):
                continue
            self.send_header(k, v)
        if self.command != "HEAD":
            self.send_header("Content-Length", str(len(data)))
        self.end_headers()
        if self.command != "HEAD":
            self.wfile.write(data)
        conn.close()

    do_GET = do_PUT = do_POST = do_DELETE = do_HEAD = forward

    def log_message(self, *args):
        pass


http.server.ThreadingHTTPServer(("127.0.0.1", listen), Forward).serve_forever()
