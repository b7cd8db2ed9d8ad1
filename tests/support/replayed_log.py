#!/usr/bin/env python3
"""Serves recorded GET responses, as a cache or anyone replaying a server's old answers would.

    replayed_log.py RESPONSES.json

RESPONSES.json maps a path (without its query) to the body served for it, with status 200.
Prints "listening on PORT" on stdout once ready.
"""
import json
import sys
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer


class Handler(BaseHTTPRequestHandler):
    def log_message(self, *args):
        pass

    def do_GET(self):
        body = self.server.responses.get(self.path.split("?")[0])
        data = (body if body is not None else "not recorded").encode()
        self.send_response(200 if body is not None else 404)
        self.send_header("content-length", str(len(data)))
        self.end_headers()
        self.wfile.write(data)


def main():
    with open(sys.argv[1], encoding="utf-8") as f:
        responses = json.load(f)
    server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
    server.responses = responses
    print(f"listening on {server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
