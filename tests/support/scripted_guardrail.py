#!/usr/bin/env python3
"""A scripted Amazon Bedrock ApplyGuardrail server (AWS JSON shapes), for tests.

    scripted_guardrail.py SCRIPT.json [--port N]

SCRIPT.json: {"rules": [{"match": "substring of the guard_content text", "findings": [...]}],
              "fail_first": 0, "fail_status": 503}
POST /guardrail/{id}/version/{version}/apply answers with the findings of the first rule whose
`match` occurs in the answer text (the content block qualified guard_content), inside a full
ApplyGuardrail response body. The first `fail_first` requests answer `fail_status` (429 is
sent as a ThrottlingException) to exercise retries. GET /_requests returns what it received.
Prints "listening on PORT" on stdout once ready.
"""
import argparse
import json
import re
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

LOCK = threading.Lock()
RECEIVED = []
ROUTE = re.compile(r"^/guardrail/([^/]+)/version/([^/]+)/apply$")
CONVERSE = re.compile(r"^/model/([^/]+)/converse$")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def send(self, status, obj, headers=()):
        data = json.dumps(obj).encode()
        self.send_response(status)
        self.send_header("content-type", "application/json")
        self.send_header("content-length", str(len(data)))
        for k, v in headers:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def do_GET(self):
        with LOCK:
            self.send(200, RECEIVED)

    def do_POST(self):
        body = json.loads(self.rfile.read(int(self.headers.get("content-length", "0"))) or b"{}")
        c = CONVERSE.match(self.path)
        if c:
            self.converse(c.group(1), body)
            return
        m = ROUTE.match(self.path)
        if not m:
            self.send(404, {"message": f"no route {self.path}"})
            return
        script = self.server.script
        with LOCK:
            RECEIVED.append({"path": self.path, "body": body})
            n = len(RECEIVED)
        if n <= script.get("fail_first", 0):
            status = script.get("fail_status", 503)
            kind = {429: "ThrottlingException", 400: "ValidationException",
                    403: "AccessDeniedException"}.get(status, "ServiceUnavailableException")
            print(f"[scripted guardrail] failing request {n} with {status}", file=sys.stderr, flush=True)
            self.send(status, {"message": "scripted failure"}, [("x-amzn-errortype", kind)])
            return
        answer = " ".join(
            c.get("text", {}).get("text", "") for c in body.get("content", [])
            if "guard_content" in c.get("text", {}).get("qualifiers", []))
        findings = []
        for rule in script.get("rules", []):
            if rule["match"].lower() in answer.lower():
                findings = rule["findings"]
                break
        print(f"[scripted guardrail] {len(findings)} recorded finding(s)", file=sys.stderr, flush=True)
        self.send(200, {
            "usage": {"topicPolicyUnits": 0, "contentPolicyUnits": 0, "wordPolicyUnits": 0,
                      "sensitiveInformationPolicyUnits": 0, "sensitiveInformationPolicyFreeUnits": 0,
                      "contextualGroundingPolicyUnits": 0, "automatedReasoningPolicyUnits": 1,
                      "automatedReasoningPolicies": 1},
            "action": "NONE",
            "outputs": [],
            "assessments": [{"automatedReasoningPolicy": {"findings": findings},
                             "invocationMetrics": {"guardrailProcessingLatency": 5}}],
        })


    def converse(self, model_id, body):
        """Bedrock Converse: answers from `converse_rules` [{match, reply}] (RECORDED replies)."""
        with LOCK:
            RECEIVED.append({"path": self.path, "body": body})
        text = "\n".join(block.get("text", "") for m in body.get("messages", [])
                         for block in m.get("content", []))
        reply = next((r["reply"] for r in self.server.script.get("converse_rules", [])
                      if r["match"].lower() in text.lower()), None)
        if reply is None:
            self.send(400, {"message": "no recorded reply matches"}, [("x-amzn-errortype", "ValidationException")])
            return
        self.send(200, {"output": {"message": {"role": "assistant", "content": [{"text": reply}]}},
                        "stopReason": "end_turn",
                        "usage": {"inputTokens": 10, "outputTokens": 5, "totalTokens": 15},
                        "metrics": {"latencyMs": 3}})


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("script")
    ap.add_argument("--port", type=int, default=0)
    args = ap.parse_args()
    server = ThreadingHTTPServer(("127.0.0.1", args.port), Handler)
    with open(args.script, encoding="utf-8") as f:
        server.script = json.load(f)
    print(f"listening on {server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
