#!/usr/bin/env python3
"""proofgate in front of an ordinary modern chatbot, with the official clients (issue 13).

    drop_in_clients.py OPENAI_PROXY_URL ANTHROPIC_PROXY_URL UNPINNED_OPENAI UNPINNED_ANTHROPIC

OPENAI_PROXY_URL is a proofgate whose upstream is OpenAI-shaped, ANTHROPIC_PROXY_URL one whose
upstream is Anthropic-shaped (both scripted: crates/proxy/tests/drop_in.rs); both pin the
upstream's model. The last two are the same without a model pinned (their model lists are
the upstream's). Every check
prints one line; any failure raises. The clients never retry (max_retries=0): a retry that
happens is proofgate's.
"""
import sys

import anthropic
import openai

SENIOR = "As a visitor aged 70 you are in the senior age class."
SYSTEM = "You are ParkBot, the park's assistant. Always answer in English, in one sentence."
TOOLS = [{"type": "function", "function": {
    "name": "lookup_visitor_age", "description": "The visitor's age from their ticket",
    "parameters": {"type": "object", "properties": {}}}}]


def check(cond, what):
    if not cond:
        raise AssertionError(what)


def verdict_of(raw):
    return raw.headers.get("x-proofgate-verdict")


def openai_checks(url):
    client = openai.OpenAI(base_url=url + "/v1", api_key="unused-no-auth", max_retries=0)

    # 1. A tool call passes through unchanged, marked TOOL_CALL.
    first = [{"role": "system", "content": SYSTEM},
             {"role": "user", "content": "tool-case: which age class am I in?"}]
    raw = client.chat.completions.with_raw_response.create(
        model="m", messages=first, tools=TOOLS)
    reply = raw.parse()
    check(verdict_of(raw) == "TOOL_CALL", f"tool call verdict {verdict_of(raw)}")
    call = reply.choices[0].message.tool_calls[0]
    check(call.function.name == "lookup_visitor_age", f"tool call {call}")
    check(reply.choices[0].finish_reason == "tool_calls", reply.choices[0].finish_reason)
    print("openai tool call: TOOL_CALL lookup_visitor_age")

    # Streaming: the same tool call as chunks.
    stream = client.chat.completions.create(model="m", messages=first, tools=TOOLS, stream=True)
    names = [tc.function.name for chunk in stream for tc in (chunk.choices[0].delta.tool_calls or [])
             if tc.function and tc.function.name]
    check(names == ["lookup_visitor_age"], f"streamed tool calls {names}")
    print("openai tool call, streaming: lookup_visitor_age")

    # 1b. A request that forces a tool call: its arguments would be the answer, unverified, so
    #     a clear 400 (structured-output libraries force one to get an answer as arguments).
    try:
        client.chat.completions.create(model="m", messages=first, tools=TOOLS, tool_choice={
            "type": "function", "function": {"name": "lookup_visitor_age"}})
        raise AssertionError("a forced tool call was accepted")
    except openai.BadRequestError as e:
        check(e.body["code"] == "forced_tool_call", f"body {e.body}")
        print("openai forced tool_choice: 400 forced_tool_call")

    # 1c. The upstream calls a tool the request never offered: refused, not passed to the app.
    try:
        client.chat.completions.create(model="m", tools=TOOLS, messages=[
            {"role": "user", "content": "foreign-tool-case: which age class am I in?"}])
        raise AssertionError("a call of a tool not offered was returned")
    except openai.APIStatusError as e:
        check(e.status_code == 502 and "transfer_funds" in str(e.body), f"{e.status_code} {e.body}")
        print("openai call of a tool not offered: 502")

    # 2. The follow-up with the tool result is answered and verified.
    follow = first + [
        {"role": "assistant", "content": None, "tool_calls": [call.model_dump()]},
        {"role": "tool", "tool_call_id": call.id, "content": "visitor age is 70"}]
    raw = client.chat.completions.with_raw_response.create(model="m", messages=follow, tools=TOOLS)
    reply = raw.parse()
    check(verdict_of(raw) == "VALID", f"after the tool result: {verdict_of(raw)}")
    check(reply.choices[0].message.content == SENIOR, reply.choices[0].message.content)
    print("openai tool result: VALID")

    # 3. A fact from an earlier turn reaches the translators: VALID with no follow-up question.
    raw = client.chat.completions.with_raw_response.create(model="m", messages=[
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "earlier-case: I am 70 years old."},
        {"role": "assistant", "content": "Thanks, noted."},
        {"role": "user", "content": "earlier-case: and which age class is that?"}])
    reply = raw.parse()
    check(verdict_of(raw) == "VALID", f"earlier turn: {verdict_of(raw)} {reply.choices[0].message.content}")
    print("openai earlier turn: VALID")

    # 4. A rewrite is made in the app's own request (checked on the LLM's side by the test);
    # the rewriter's first call gets a 429 and is retried. The client's stop sequence, logit
    # bias and metadata reach the upstream, not the rewriter (a stop at "DECISION" would cut
    # every rewrite off).
    raw = client.chat.completions.with_raw_response.create(
        model="m", temperature=0.3, stop=["DECISION"], logit_bias={"1734": -100},
        metadata={"app": "drop-in"}, messages=[
        {"role": "system", "content": SYSTEM},
        {"role": "user", "content": "rewrite-case: I am 70, which age class am I in?"}])
    reply = raw.parse()
    check(verdict_of(raw) == "VALID", f"rewrite: {verdict_of(raw)}")
    check(reply.choices[0].message.content == SENIOR, reply.choices[0].message.content)
    print("openai rewrite in the app's voice: VALID")

    # 5. One 429 from the upstream, one from a translator: retried, verified.
    for case in ("retry-upstream-case", "retry-translator-case"):
        raw = client.chat.completions.with_raw_response.create(
            model="m", messages=[{"role": "user", "content": f"{case}: I am 70, my age class?"}])
        check(verdict_of(raw) == "VALID", f"{case}: {verdict_of(raw)}")
        print(f"openai {case}: VALID")

    # 6. A persistent 5xx still fails closed with the documented error, streamed too: the
    # SDK gets it by its status when it sends the request (it was an SSE event with status
    # 200, which the SDK neither raised as a status error nor retried by status).
    try:
        client.chat.completions.create(
            model="m", stream=True,
            messages=[{"role": "user", "content": "always-down-case: my class?"}])
        raise AssertionError("a persistent 5xx returned an answer or a stream")
    except openai.APIStatusError as e:
        check(e.status_code == 502, f"status {e.status_code}")
        check(e.body["code"] == "upstream_unavailable", f"body {e.body}")
        print("openai persistent 5xx: 502 upstream_unavailable")

    # 7. n > 1: a clear 400.
    try:
        client.chat.completions.create(
            model="m", n=2, messages=[{"role": "user", "content": "n-case: my class?"}])
        raise AssertionError("n=2 was accepted")
    except openai.BadRequestError as e:
        check("only n = 1 is supported" in str(e), str(e))
        print("openai n=2: 400 only n = 1 is supported")

    # 7b. An image part: the translators read text only, so a clear 400, not an answer
    #     verified against a conversation without the image.
    try:
        client.chat.completions.create(
            model="m", messages=[{"role": "user", "content": [
                {"type": "text", "text": "image-case: what does my ticket say?"},
                {"type": "image_url", "image_url": {"url": "data:image/png;base64,iVBORw0KGgo="}}]}])
        raise AssertionError("an image part was accepted")
    except openai.BadRequestError as e:
        check("`image_url` are not supported" in str(e), str(e))
        print("openai image part: 400 not supported")

    # 8. The Responses API, JSON and streaming.
    raw = client.responses.with_raw_response.create(
        model="m", instructions=SYSTEM, input="responses-case: I am 70, which age class am I in?")
    resp = raw.parse()
    check(verdict_of(raw) == "VALID", f"responses: {verdict_of(raw)}")
    check(resp.output_text == SENIOR, resp.output_text)
    print("openai responses.create: VALID")
    with client.responses.stream(
            model="m", instructions=SYSTEM,
            input="responses-case: I am 70, which age class am I in?") as stream:
        deltas = "".join(e.delta for e in stream if e.type == "response.output_text.delta")
        final = stream.get_final_response()
    check(deltas == SENIOR and final.output_text == SENIOR, f"{deltas!r} {final.output_text!r}")
    print("openai responses.stream: VALID")

    # A function call through the Responses API passes through too.
    resp = client.responses.create(model="m", input="tool-case: which age class am I in?", tools=[
        {"type": "function", "name": "lookup_visitor_age", "parameters": {"type": "object", "properties": {}}}])
    check(resp.output[0].type == "function_call" and resp.output[0].name == "lookup_visitor_age",
          f"{resp.output}")
    print("openai responses function call: passed through")

    # A legacy `function_call` reply is a call on the Responses and Messages APIs too (it was
    # dropped: no output); a call cut off at the token limit is `incomplete` on the Responses
    # API, and a 502 on the Messages API, whose `input` must be an object (it was `{}`).
    price = {"type": "function", "name": "price", "parameters": {"type": "object", "properties": {}}}
    resp = client.responses.create(model="m", input="legacy-fn-case: my price?", tools=[price])
    check([(o.type, o.name, o.arguments) for o in resp.output] == [("function_call", "price", '{"age":70}')],
          f"{resp.output}")
    claude = anthropic.Anthropic(base_url=url, api_key="unused-no-auth", max_retries=0)
    price_tool = [{"name": "price", "input_schema": {"type": "object", "properties": {}}}]
    msg = claude.messages.create(model="m", max_tokens=100, tools=price_tool,
                                 messages=[{"role": "user", "content": "legacy-fn-case: my price?"}])
    check([(b.type, b.name, b.input) for b in msg.content] == [("tool_use", "price", {"age": 70})]
          and msg.stop_reason == "tool_use", f"{msg}")
    print("legacy function_call: a Responses function_call item and a Messages tool_use block")
    resp = client.responses.create(model="m", input="truncated-call-case: my price?", tools=[price])
    check(resp.status == "incomplete" and resp.incomplete_details.reason == "max_output_tokens"
          and resp.output[0].call_id == "call_cut", f"{resp}")
    try:
        claude.messages.create(model="m", max_tokens=100, tools=price_tool,
                               messages=[{"role": "user", "content": "truncated-call-case: my price?"}])
        raise AssertionError("a tool call cut off at the token limit was passed on")
    except anthropic.APIStatusError as e:
        check(e.status_code == 502 and "max_tokens" in str(e), f"{e.status_code} {e}")
    print("tool call cut off: Responses incomplete, Messages 502")
    try:
        client.responses.create(model="m", input="tool-case: which age class am I in?", tool_choice="required",
                                tools=[{"type": "function", "name": "lookup_visitor_age",
                                        "parameters": {"type": "object", "properties": {}}}])
        raise AssertionError("a forced Responses function call was accepted")
    except openai.BadRequestError as e:
        check("forces a tool call" in str(e), str(e))
        print("openai responses tool_choice required: 400")


def anthropic_checks(url):
    client = anthropic.Anthropic(base_url=url, api_key="unused-no-auth", max_retries=0)
    question = [{"role": "user", "content": "anthropic-case: I am 70, which age class am I in?"}]

    raw = client.messages.with_raw_response.create(
        model="claude-test", max_tokens=200, system=SYSTEM, messages=question)
    msg = raw.parse()
    check(verdict_of(raw) == "VALID", f"anthropic: {verdict_of(raw)}")
    check(msg.content[0].text == SENIOR, f"{msg.content}")
    print("anthropic messages.create: VALID")

    with client.messages.stream(model="claude-test", max_tokens=200, system=SYSTEM,
                                messages=question) as stream:
        text = "".join(stream.text_stream)
        final = stream.get_final_message()
    check(text == SENIOR and final.content[0].text == SENIOR, f"{text!r}")
    check(final.stop_reason == "end_turn", final.stop_reason)
    print("anthropic messages.stream: VALID")

    tools = [{"name": "lookup_visitor_age", "description": "The visitor's age from their ticket",
              "input_schema": {"type": "object", "properties": {}}}]
    first = [{"role": "user", "content": "anthropic-tool-case: which age class am I in?"}]
    raw = client.messages.with_raw_response.create(
        model="claude-test", max_tokens=200, system=SYSTEM, messages=first, tools=tools)
    msg = raw.parse()
    check(verdict_of(raw) == "TOOL_CALL", f"anthropic tool use: {verdict_of(raw)}")
    use = [b for b in msg.content if b.type == "tool_use"]
    check(msg.stop_reason == "tool_use" and use and use[0].name == "lookup_visitor_age", f"{msg}")
    print("anthropic tool use: TOOL_CALL lookup_visitor_age")
    try:
        client.messages.create(model="claude-test", max_tokens=200, system=SYSTEM, messages=first,
                               tools=tools, tool_choice={"type": "tool", "name": "lookup_visitor_age"})
        raise AssertionError("a forced tool use was accepted")
    except anthropic.BadRequestError as e:
        check("forces a tool call" in str(e), str(e))
        print("anthropic forced tool_choice: 400")

    with client.messages.stream(model="claude-test", max_tokens=200, system=SYSTEM,
                                messages=first, tools=tools) as stream:
        final = stream.get_final_message()
    check(final.stop_reason == "tool_use" and final.content[0].type == "tool_use", f"{final}")
    print("anthropic tool use, streaming: tool_use")

    follow = first + [
        {"role": "assistant", "content": [b.model_dump() for b in msg.content]},
        {"role": "user", "content": [{"type": "tool_result", "tool_use_id": use[0].id,
                                      "content": "visitor age is 70"}]}]
    raw = client.messages.with_raw_response.create(
        model="claude-test", max_tokens=200, system=SYSTEM, messages=follow, tools=tools)
    msg = raw.parse()
    check(verdict_of(raw) == "VALID", f"anthropic after the tool result: {verdict_of(raw)}")
    check(msg.content[0].text == SENIOR, f"{msg.content}")
    print("anthropic tool result: VALID")


def model_list_checks(pinned_openai, pinned_anthropic, upstream_openai, upstream_anthropic):
    """`models.list()` / `retrieve()`, which chat UIs call on connecting: the pinned model, or
    the upstream's list, in the shape of the SDK that asks."""
    def openai_client(url):
        return openai.OpenAI(base_url=url + "/v1", api_key="unused-no-auth", max_retries=0)

    def anthropic_client(url):
        return anthropic.Anthropic(base_url=url, api_key="unused-no-auth", max_retries=0)

    ids = [m.id for m in openai_client(pinned_openai).models.list()]
    check(ids == ["recorded-chatbot"], f"pinned openai list {ids}")
    ids = [m.id for m in anthropic_client(pinned_openai).models.list()]
    check(ids == ["recorded-chatbot"], f"pinned list for the anthropic client {ids}")
    ids = [m.id for m in anthropic_client(pinned_anthropic).models.list()]
    check(ids == ["claude-recorded"], f"pinned anthropic list {ids}")
    try:
        openai_client(pinned_openai).models.retrieve("gpt-4o")
        raise AssertionError("a model not served was found")
    except openai.NotFoundError as e:
        check("gpt-4o" in str(e), str(e))
    print("models, pinned: the pinned model only, in both SDKs' shapes")

    models = list(openai_client(upstream_openai).models.list())
    check([m.id for m in models] == ["recorded", "org/recorded-2"], f"relayed list {models}")
    check(models[1].model_extra.get("max_model_len") == 8192, f"{models[1]}")
    got = openai_client(upstream_openai).models.retrieve("org/recorded-2")
    check(got.id == "org/recorded-2" and got.created == 1739923200, f"{got}")
    claude = list(anthropic_client(upstream_openai).models.list())
    check([m.id for m in claude] == ["recorded", "org/recorded-2"], f"{claude}")
    check(claude[0].created_at.year == 2025, f"{claude[0]}")
    print("models, openai upstream: its list, to both SDKs")

    claude = list(anthropic_client(upstream_anthropic).models.list())
    check([m.id for m in claude] == ["claude-recorded-1"], f"{claude}")
    check(claude[0].display_name == "claude-recorded-1", f"{claude[0]}")
    gpts = list(openai_client(upstream_anthropic).models.list())
    check([(m.id, m.created) for m in gpts] == [("claude-recorded-1", 1739923200)], f"{gpts}")
    got = anthropic_client(upstream_anthropic).models.retrieve("claude-recorded-1")
    check(got.display_name == "claude-recorded-1", f"{got}")
    print("models, anthropic upstream: its list, to both SDKs")


def main():
    openai_checks(sys.argv[1])
    anthropic_checks(sys.argv[2])
    model_list_checks(*sys.argv[1:5])
    print("all drop-in checks passed")


if __name__ == "__main__":
    main()
