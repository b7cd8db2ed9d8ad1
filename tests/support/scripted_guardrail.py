#!/usr/bin/env python3
"""A scripted Amazon Bedrock ApplyGuardrail server (AWS JSON shapes), for tests.

    scripted_guardrail.py SCRIPT.json [--port N]

SCRIPT.json: {"rules": [{"match": "substring of the guard_content text", "findings": [...]}],
              "fail_first": 0, "fail_status": 503,
              "policies": {"POLICY_ARN[:VERSION]": {definition}},
              "build_workflows": {"POLICY_ARN": [{"buildWorkflowId", "status", "updatedAt",
                                                  "definition": {definition}}]}}
POST /guardrail/{id}/version/{version}/apply answers with the findings of the first rule whose
`match` occurs in the answer text (the content block qualified guard_content), inside a full
ApplyGuardrail response body; a rule with "blocked_by": {assessment members, e.g. "contentPolicy"}
answers as a guardrail whose other policies blocked the answer (`action`
GUARDRAIL_INTERVENED, those members beside the findings). The first `fail_first` requests answer `fail_status` (429 is
sent as a ThrottlingException) to exercise retries. GET /_requests returns what it received.

With "sigv4": {"access_key", "secret_key", "session_token"?, "region"} in the script, every
ApplyGuardrail request's SigV4 signature is checked the way AWS checks it, by botocore (an
implementation independent of the Rust SDK's): the signing name from botocore's own service
model, the region and access key, `host` and `x-amz-date` (and the session token, when one is
given) among the signed headers, a date within 5 minutes, and the signature over the request as
it arrived (method, raw path, headers, body). A mismatch answers 403 InvalidSignatureException,
as AWS does. "expired_first": N answers the first N signed requests 403 ExpiredTokenException.
"hang_first": {"count": N, "seconds": S} holds the first N ApplyGuardrail requests S seconds
before answering (client timeouts). "clock_offset_s": S runs this server's clock S seconds
ahead of the real one (its `Date` headers and the signature's time check): a client whose clock
is that far off. "pad_bytes": N adds N bytes of padding to every ApplyGuardrail answer;
"answer_raw": TEXT answers 200 with TEXT as an HTML page instead. Every answer reports
`guardrailCoverage` (the guard_content's characters of all the text sent); a rule's "guarded": N
reports N instead (a guardrail that checked part of the answer).
POST /model/{id}/converse (Bedrock Converse) answers from "converse_rules" [{match, reply}];
"converse_fail_first": {"count": N, "status": S} answers the first N Converse requests S (429 as
a ThrottlingException), with "message" if given; "converse_hang_first": {"count": N, "seconds": S}
holds them S seconds.

The Bedrock control plane for Automated Reasoning policies, in AWS's shapes:
GET /automated-reasoning-policies/{arn}/export (ExportAutomatedReasoningPolicyVersion),
GET .../build-workflows (ListAutomatedReasoningPolicyBuildWorkflows) and
GET .../build-workflows/{id}/result-assets?assetType=POLICY_DEFINITION; unknown ARNs and
workflows answer 404 ResourceNotFoundException.
Prints "listening on PORT" on stdout once ready.
"""
import argparse
import json
import re
import sys
import threading
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from urllib.parse import parse_qs, unquote, urlsplit

LOCK = threading.Lock()
AUTH = re.compile(r"^AWS4-HMAC-SHA256 Credential=([^/]+)/(\d{8})/([^/]+)/([^/]+)/aws4_request, "
                  r"SignedHeaders=([a-z0-9;-]+), Signature=([0-9a-f]{64})$")


def sigv4_problem(handler, raw_body, cfg):
    """Why the request's SigV4 signature is not valid for `cfg`, or None when it is."""
    import datetime

    from botocore.auth import SigV4Auth
    from botocore.awsrequest import AWSRequest
    from botocore.credentials import Credentials

    m = AUTH.match(handler.headers.get("authorization", ""))
    if not m:
        return "missing or malformed Authorization header"
    access_key, day, region, service, signed, signature = m.groups()
    signing_name = handler.server.signing_name
    if access_key != cfg["access_key"]:
        return f"unknown access key {access_key}"
    if (region, service) != (cfg["region"], signing_name):
        return f"credential scope {region}/{service}, expected {cfg['region']}/{signing_name}"
    names = signed.split(";")
    needed = ["host", "x-amz-date"] + (["x-amz-security-token"] if cfg.get("session_token") else [])
    if any(n not in names for n in needed) or names != sorted(names):
        return f"signed headers {signed} (must be sorted and include {needed})"
    if cfg.get("session_token") and handler.headers.get("x-amz-security-token") != cfg["session_token"]:
        return "wrong or missing x-amz-security-token"
    stamp = handler.headers.get("x-amz-date", "")
    try:
        at = datetime.datetime.strptime(stamp, "%Y%m%dT%H%M%SZ").replace(tzinfo=datetime.timezone.utc)
    except ValueError:
        return f"bad x-amz-date {stamp!r}"
    now = datetime.datetime.now(datetime.timezone.utc) + datetime.timedelta(
        seconds=handler.server.script.get("clock_offset_s", 0))
    # AWS's words, which a client reads to correct its clock.
    if (now - at).total_seconds() > 300:
        return f"Signature expired: {stamp} is now earlier than {now:%Y%m%dT%H%M%SZ} - 5 min."
    if (at - now).total_seconds() > 300:
        return f"Signature not yet current: {stamp} is still later than {now:%Y%m%dT%H%M%SZ} + 5 min."
    if stamp[:8] != day:
        return f"x-amz-date {stamp} is not in the scope's day {day}"
    headers = {n: handler.headers.get(n, "") for n in names}
    request = AWSRequest(method=handler.command, url=f"http://{handler.headers['host']}{handler.path}",
                         data=raw_body, headers=headers)
    request.context["timestamp"] = stamp
    signer = SigV4Auth(Credentials(cfg["access_key"], cfg["secret_key"], cfg.get("session_token")),
                       signing_name, region)
    expected = signer.signature(signer.string_to_sign(request, signer.canonical_request(request)), request)
    if expected != signature:
        return "The request signature we calculated does not match the signature you provided."
    return None

RECEIVED = []
ROUTE = re.compile(r"^/guardrail/([^/]+)/version/([^/]+)/apply$")
CONVERSE = re.compile(r"^/model/([^/]+)/converse$")
POLICY = re.compile(r"^/automated-reasoning-policies/([^/]+)(/.*)?$")


class Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"

    def log_message(self, fmt, *args):
        pass

    def date_time_string(self, timestamp=None):
        """The `Date` header, on this server's clock ("clock_offset_s" from the real one)."""
        import time
        return super().date_time_string(time.time() + self.server.script.get("clock_offset_s", 0))

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
        url = urlsplit(self.path)
        m = POLICY.match(url.path)
        if m:
            with LOCK:
                RECEIVED.append({"method": "GET", "path": url.path, "query": url.query})
            self.control_plane(unquote(m.group(1)), m.group(2) or "", parse_qs(url.query))
            return
        with LOCK:
            self.send(200, RECEIVED)

    def not_found(self, what):
        self.send(404, {"message": f"{what} not found"}, [("x-amzn-errortype", "ResourceNotFoundException")])

    def control_plane(self, arn, rest, query):
        """Bedrock's Automated Reasoning policy API (the control plane), from the script."""
        script = self.server.script
        base = re.sub(r":[0-9]+$", "", arn)
        if rest == "/export":
            definition = script.get("policies", {}).get(arn)
            if definition is None:
                return self.not_found(f"policy {arn}")
            return self.send(200, {"policyDefinition": definition})
        workflows = script.get("build_workflows", {}).get(base)
        if workflows is None:
            return self.not_found(f"policy {base}")
        if rest == "/build-workflows":
            return self.send(200, {"automatedReasoningPolicyBuildWorkflowSummaries": [
                {"policyArn": base, "buildWorkflowId": w["buildWorkflowId"], "status": w["status"],
                 "buildWorkflowType": w.get("buildWorkflowType", "INGEST_CONTENT"),
                 "createdAt": w.get("createdAt", w["updatedAt"]), "updatedAt": w["updatedAt"]}
                for w in workflows]})
        m = re.match(r"^/build-workflows/([^/]+)/result-assets$", rest)
        if m:
            if query.get("assetType") != ["POLICY_DEFINITION"]:
                return self.send(400, {"message": "scripted: only assetType=POLICY_DEFINITION"},
                                 [("x-amzn-errortype", "ValidationException")])
            w = next((w for w in workflows if w["buildWorkflowId"] == m.group(1)), None)
            if w is None:
                return self.not_found(f"build workflow {m.group(1)}")
            return self.send(200, {"policyArn": base, "buildWorkflowId": w["buildWorkflowId"],
                                   "buildWorkflowAssets": {"policyDefinition": w["definition"]}})
        return self.not_found(f"route {rest}")

    def do_POST(self):
        raw = self.rfile.read(int(self.headers.get("content-length", "0")))
        body = json.loads(raw or b"{}")
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
            RECEIVED.append({"path": self.path, "body": body,
                             "headers": {k.lower(): v for k, v in self.headers.items()}})
            n = len(RECEIVED)
        hang = script.get("hang_first", {})
        if n <= hang.get("count", 0):
            import time
            time.sleep(hang.get("seconds", 5))
        if "sigv4" in script:
            problem = sigv4_problem(self, raw, script["sigv4"])
            if problem:
                print(f"[scripted guardrail] bad signature: {problem}", file=sys.stderr, flush=True)
                self.send(403, {"message": problem}, [("x-amzn-errortype", "InvalidSignatureException")])
                return
            if n <= script.get("expired_first", 0):
                self.send(403, {"message": "The security token included in the request is expired"},
                          [("x-amzn-errortype", "ExpiredTokenException")])
                return
        if "answer_raw" in script:
            data = script["answer_raw"].encode()
            self.send_response(200)
            self.send_header("content-type", "text/html")
            self.send_header("content-length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)
            return
        if n <= script.get("fail_first", 0):
            status = script.get("fail_status", 503)
            kind = {429: "ThrottlingException", 400: "ValidationException",
                    403: "AccessDeniedException"}.get(status, "ServiceUnavailableException")
            print(f"[scripted guardrail] failing request {n} with {status}", file=sys.stderr, flush=True)
            self.send(status, {"message": "scripted failure"},
                      [("x-amzn-errortype", kind), ("x-amzn-requestid", f"req-{n}")])
            return
        answer = " ".join(
            c.get("text", {}).get("text", "") for c in body.get("content", [])
            if "guard_content" in c.get("text", {}).get("qualifiers", []))
        findings, blocked = [], None
        # As AWS reports it: the guarded content's characters, out of all the text sent; a rule's
        # "guarded" replaces the first (a guardrail that checked part of the answer).
        total = sum(len(c.get("text", {}).get("text", "")) for c in body.get("content", []))
        coverage = {"guarded": len(answer), "total": total}
        for rule in script.get("rules", []):
            if rule["match"].lower() in answer.lower():
                findings = rule["findings"]
                blocked = rule.get("blocked_by")
                if "guarded" in rule:
                    coverage["guarded"] = rule["guarded"]
                break
        print(f"[scripted guardrail] {len(findings)} recorded finding(s)", file=sys.stderr, flush=True)
        self.send(200, {
            "usage": {"topicPolicyUnits": 0, "contentPolicyUnits": 0, "wordPolicyUnits": 0,
                      "sensitiveInformationPolicyUnits": 0, "sensitiveInformationPolicyFreeUnits": 0,
                      "contextualGroundingPolicyUnits": 0, "automatedReasoningPolicyUnits": 1,
                      "automatedReasoningPolicies": 1},
            "action": "GUARDRAIL_INTERVENED" if blocked else "NONE",
            **({"actionReason": "Guardrail blocked."} if blocked else {}),
            "outputs": [{"text": "Sorry, the model cannot answer this question."}] if blocked else [],
            "assessments": [{"automatedReasoningPolicy": {"findings": findings},
                             **(blocked or {}),
                             "invocationMetrics": {"guardrailProcessingLatency": 5}}],
            "guardrailCoverage": {"textCharacters": coverage},
            **({"padding": "x" * script["pad_bytes"]} if "pad_bytes" in script else {}),
        })


    def converse(self, model_id, body):
        """Bedrock Converse: answers from `converse_rules` [{match, reply}] (RECORDED replies)."""
        with LOCK:
            RECEIVED.append({"path": self.path, "body": body})
            n = sum(1 for r in RECEIVED if CONVERSE.match(r["path"]))
        script = self.server.script
        hang = script.get("converse_hang_first", {})
        if n <= hang.get("count", 0):
            import time
            time.sleep(hang.get("seconds", 5))
        fail = script.get("converse_fail_first", {})
        if n <= fail.get("count", 0):
            status = fail.get("status", 503)
            kind = {429: "ThrottlingException", 400: "ValidationException"}.get(
                status, "ServiceUnavailableException")
            self.send(status, {"message": fail.get("message", "scripted failure")},
                      [("x-amzn-errortype", kind)])
            return
        messages = body.get("messages", [])
        # As Converse does: turns alternate, starting with the user's, and no text is blank.
        roles = [m.get("role") for m in messages]
        if not roles or roles[0] != "user" or any(a == b for a, b in zip(roles, roles[1:])):
            self.send(400, {"message": "A conversation must alternate between user and assistant roles."},
                      [("x-amzn-errortype", "ValidationException")])
            return
        if any(not block.get("text", "x").strip() for m in messages for block in m.get("content", [])):
            self.send(400, {"message": "The text field in the ContentBlock object is blank."},
                      [("x-amzn-errortype", "ValidationException")])
            return
        text = "\n".join(block.get("text", "") for m in messages
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
    if "sigv4" in server.script:
        # Loaded before "listening": botocore and its service model take a second or more to
        # load, which would otherwise land inside the first request's time.
        import botocore.auth  # noqa: F401
        import botocore.session
        server.signing_name = (botocore.session.get_session()
                               .get_service_model("bedrock-runtime").signing_name)
    print(f"listening on {server.server_address[1]}", flush=True)
    server.serve_forever()


if __name__ == "__main__":
    main()
