#!/usr/bin/env python3
"""Real clients against a running proofgate: the official OpenAI Python client (streaming and
not) on /v1/chat/completions, the official Anthropic client on /v1/messages, and boto3's
bedrock-runtime apply_guardrail on the local ApplyGuardrail-compatible endpoint.

    PROOFGATE_KEY=pg_... official_clients.py PROXY_URL [LIMITED_URL]   (exit 0 when all pass)

LIMITED_URL, when given, is a proofgate with tight limits (a small body, a short deadline, a
few requests a minute) and the same key: boto3 must read its 413, 504 and 429 as AWS errors.

Both pass a proofgate API key the way their users would: the OpenAI client as its api_key
(sent as `Authorization: Bearer`), boto3 as an Amazon Bedrock API key
(AWS_BEARER_TOKEN_BEDROCK, also sent as `Authorization: Bearer`).
"""
import os
import sys

import boto3
import botocore.config
import botocore.exceptions
import anthropic
import openai

URL = sys.argv[1]
KEY = os.environ["PROOFGATE_KEY"]
Q1 = ("I am 70 and visit in the low season without credits. "
      "What is my admission fee after the senior discount?")
REWRITTEN = ("In the low season the fee is $37.50; your 40% senior discount brings it to $22.50, "
             "plus a $10 discount processing fee, so $32.50 before tax.")

# Without a key, or with a wrong one, nothing is answered.
try:
    openai.OpenAI(base_url=URL + "/v1", api_key="sk-not-a-proofgate-key", max_retries=0) \
        .chat.completions.create(model="gpt-test", messages=[{"role": "user", "content": Q1}])
    raise AssertionError("a wrong key must be refused")
except openai.AuthenticationError as e:
    assert e.status_code == 401 and e.body["code"] == "invalid_api_key", e.body
print("openai client, wrong key: 401 invalid_api_key")

client = openai.OpenAI(base_url=URL + "/v1", api_key=KEY, max_retries=0)

# Non-streaming: a verified answer, with proofgate's verdict in the headers and body.
raw = client.chat.completions.with_raw_response.create(
    model="gpt-test", messages=[{"role": "user", "content": Q1}])
completion = raw.parse()
assert raw.headers["x-proofgate-verdict"] == "VALID", raw.headers
assert completion.choices[0].message.content == REWRITTEN, completion
assert completion.model_extra["proofgate"]["verified"] is True
print("openai client, non-streaming: VALID answer received")

# Streaming: only the verified answer arrives, then the stream ends.
stream = client.chat.completions.create(
    model="gpt-test", stream=True, messages=[{"role": "user", "content": Q1}])
text = "".join(chunk.choices[0].delta.content or "" for chunk in stream if chunk.choices)
assert text == REWRITTEN, text
print("openai client, streaming: VALID answer received")

# The official Anthropic client on /v1/messages, the key as its api_key (sent as x-api-key):
# answered; a wrong key and a body over the limit come back as Anthropic's error types, with
# proofgate's code beside.
anthropic_client = anthropic.Anthropic(base_url=URL, api_key=KEY, max_retries=0)
raw = anthropic_client.messages.with_raw_response.create(
    model="claude-test", max_tokens=300, messages=[{"role": "user", "content": Q1}])
message = raw.parse()
assert raw.headers["x-proofgate-verdict"] == "VALID", raw.headers
assert message.content[0].text == REWRITTEN, message
try:
    anthropic.Anthropic(base_url=URL, api_key="sk-ant-not-a-proofgate-key", max_retries=0) \
        .messages.create(model="claude-test", max_tokens=300,
                         messages=[{"role": "user", "content": Q1}])
    raise AssertionError("a wrong key must be refused")
except anthropic.AuthenticationError as e:
    assert e.status_code == 401, e
    assert e.body["error"]["type"] == "authentication_error", e.body
    assert e.body["error"]["code"] == "invalid_api_key", e.body
try:
    anthropic_client.messages.create(model="claude-test", max_tokens=300,
                                     messages=[{"role": "user", "content": "x" * (2 << 20)}])
    raise AssertionError("a body over the limit must be refused")
except anthropic.APIStatusError as e:
    assert e.status_code == 413, e
    assert e.body["error"]["type"] == "request_too_large", e.body
    assert e.body["error"]["code"] == "body_too_large", e.body
print("anthropic client: VALID answer received; 401 authentication_error and 413 request_too_large")

# boto3 pointed at the local ApplyGuardrail endpoint, with the key as a Bedrock API key.
os.environ["AWS_BEARER_TOKEN_BEDROCK"] = KEY
bedrock = boto3.client("bedrock-runtime", endpoint_url=URL, region_name="us-east-1",
                       aws_access_key_id="AKIDEXAMPLE", aws_secret_access_key="secret")
resp = bedrock.apply_guardrail(
    guardrailIdentifier="local", guardrailVersion="1", source="OUTPUT",
    content=[{"text": {"text": Q1, "qualifiers": ["query"]}},
             {"text": {"text": "Seniors get 40% off the $50 fee, so you pay $30 after the discount.",
                       "qualifiers": ["guard_content"]}}])
findings = resp["assessments"][0]["automatedReasoningPolicy"]["findings"]
assert "invalid" in findings[0], findings
rules = [r["identifier"] for r in findings[0]["invalid"].get("contradictingRules", [])]
assert rules, findings
print(f"boto3 apply_guardrail: INVALID, contradicting rules {rules}")

try:
    bedrock.apply_guardrail(guardrailIdentifier="local", guardrailVersion="1", source="OUTPUT",
                            content=[{"text": {"text": "Q?", "qualifiers": ["query"]}}])
    raise AssertionError("a request without guard_content must fail")
except bedrock.exceptions.ValidationException as e:
    assert "guard_content" in str(e), e
print("boto3 apply_guardrail: malformed request refused with ValidationException")

# The guard's own refusals (a key, a NUL) are AWS-shaped too: boto3 names their type and
# message (it showed only "An error occurred (401)" for proofgate's own error shape).
os.environ["AWS_BEARER_TOKEN_BEDROCK"] = "pg_not_a_key"
stranger = boto3.client("bedrock-runtime", endpoint_url=URL, region_name="us-east-1",
                        aws_access_key_id="AKIDEXAMPLE", aws_secret_access_key="secret")
os.environ["AWS_BEARER_TOKEN_BEDROCK"] = KEY
keyed = boto3.client("bedrock-runtime", endpoint_url=URL, region_name="us-east-1",
                     aws_access_key_id="AKIDEXAMPLE", aws_secret_access_key="secret")
for client, text, code, words in [
        (stranger, "Q?", "UnrecognizedClientException", "API key"),
        (keyed, "Q\u0000?", "ValidationException", "NUL")]:
    try:
        client.apply_guardrail(guardrailIdentifier="local", guardrailVersion="1", source="OUTPUT",
                               content=[{"text": {"text": text, "qualifiers": ["guard_content"]}}])
        raise AssertionError(f"{code} expected")
    except botocore.exceptions.ClientError as e:
        assert e.response["Error"]["Code"] == code, e.response
        assert words in e.response["Error"]["Message"], e.response
print("boto3 apply_guardrail: the guard's refusals as UnrecognizedClientException and ValidationException")

# An image, which nothing here checks, is refused rather than skipped under a full coverage.
try:
    keyed.apply_guardrail(guardrailIdentifier="local", guardrailVersion="1", source="OUTPUT",
                          content=[{"image": {"format": "png", "source": {"bytes": b"\x89PNG"}}},
                                   {"text": {"text": "The fee is $50.", "qualifiers": ["guard_content"]}}])
    raise AssertionError("an image block must be refused")
except botocore.exceptions.ClientError as e:
    assert e.response["Error"]["Code"] == "ValidationException", e.response
    assert "`image`" in e.response["Error"]["Message"], e.response
print("boto3 apply_guardrail: an image block refused with ValidationException")

# Text that shows otherwise than it reads (a right-to-left override) is refused, not checked.
try:
    keyed.apply_guardrail(guardrailIdentifier="local", guardrailVersion="1", source="OUTPUT",
                          content=[{"text": {"text": "Seniors pay $\u202e05\u202c.",
                                             "qualifiers": ["guard_content"]}}])
    raise AssertionError("a bidirectional control must be refused")
except botocore.exceptions.ClientError as e:
    assert e.response["Error"]["Code"] == "ValidationException", e.response
    assert "bidirectional control" in e.response["Error"]["Message"], e.response
print("boto3 apply_guardrail: a bidirectional control refused with ValidationException")

if len(sys.argv) > 2:
    # The guard's limits in AWS's shape, as boto3 reads them (its own retries off, so each
    # refusal is seen as sent).
    os.environ["AWS_BEARER_TOKEN_BEDROCK"] = os.environ["PROOFGATE_LIMITED_KEY"]
    limited = boto3.client("bedrock-runtime", endpoint_url=sys.argv[2], region_name="us-east-1",
                           aws_access_key_id="AKIDEXAMPLE", aws_secret_access_key="secret",
                           config=botocore.config.Config(
                               retries={"mode": "standard", "total_max_attempts": 1}))

    def refused(content, code, words):
        try:
            limited.apply_guardrail(guardrailIdentifier="local", guardrailVersion="1",
                                    source="OUTPUT", content=content)
        except botocore.exceptions.ClientError as e:
            assert e.response["Error"]["Code"] == code, e.response
            assert words in e.response["Error"]["Message"], e.response
            return e.response
        raise AssertionError(f"{code} expected")

    answer = [{"text": {"text": "The fee is $50.", "qualifiers": ["guard_content"]}}]
    got = refused([{"text": {"text": "x" * 20000, "qualifiers": ["query"]}}] + answer,
                  "ValidationException", "limits.max_body_bytes")
    assert got["ResponseMetadata"]["HTTPStatusCode"] == 413, got
    got = refused([{"text": {"text": "slow-case: I am 70.", "qualifiers": ["query"]}}] + answer,
                  "ServiceUnavailableException", "limits.request_timeout_ms")
    assert got["ResponseMetadata"]["HTTPStatusCode"] == 504, got
    # An image is refused at once, before any LLM call: a cheap request to spend the rate on.
    image = [{"image": {"format": "png", "source": {"bytes": b"\x89PNG"}}}] + answer
    for attempt in range(20):
        try:
            limited.apply_guardrail(guardrailIdentifier="local", guardrailVersion="1",
                                    source="OUTPUT", content=image)
            raise AssertionError("an image block must be refused")
        except botocore.exceptions.ClientError as e:
            if e.response["Error"]["Code"] == "ValidationException":
                continue
            assert e.response["Error"]["Code"] == "ThrottlingException", e.response
            assert "requests in a minute" in e.response["Error"]["Message"], e.response
            assert int(e.response["ResponseMetadata"]["HTTPHeaders"]["retry-after"]) >= 1, e.response
            break
    else:
        raise AssertionError("the rate limit never answered")
    print("boto3 apply_guardrail: 413, 504 and 429 as ValidationException, "
          "ServiceUnavailableException and ThrottlingException")
