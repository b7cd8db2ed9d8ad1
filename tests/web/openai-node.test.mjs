// The official `openai` Node client against `proofgate serve` (issue 13), with the demo's
// scripted LLM (RECORDED replies): a tool call passes through, the follow-up with the tool's
// result is verified, a fact from an earlier turn makes the answer VALID without a follow-up
// question, and `client.responses.create` returns the verified answer. No browser needed.
import { test, before, after } from 'node:test';
import assert from 'node:assert/strict';
import { spawn } from 'node:child_process';
import { mkdtempSync, rmSync } from 'node:fs';
import { tmpdir } from 'node:os';
import path from 'node:path';
import OpenAI from 'openai';
import { root } from './harness.mjs';

const SYSTEM = "You are ParkBot, the park's assistant. Answer in one friendly sentence.";
const TOOLS = [{
  type: 'function',
  function: {
    name: 'lookup_ticket', description: "Ticket details: the holder's age",
    parameters: { type: 'object', properties: { ticket: { type: 'string' } } },
  },
}];

let children = [];
let work;
let client;
let llmUrl;

function line(child, pattern, what) {
  return new Promise((resolve, reject) => {
    let seen = '';
    const timer = setTimeout(() => reject(new Error(`${what} did not start: ${seen}`)), 60000);
    child.stdout.on('data', (d) => {
      seen += d;
      const m = seen.match(pattern);
      if (m) { clearTimeout(timer); resolve(m); }
    });
    child.on('exit', (code) => reject(new Error(`${what} exited with ${code}: ${seen}`)));
  });
}

before(async () => {
  const bin = process.env.PROOFGATE_BIN || path.join(process.env.CARGO_TARGET_DIR || path.join(root, 'target'), 'debug', 'proofgate');
  work = mkdtempSync(path.join(tmpdir(), 'proofgate-openai-node-'));
  const llm = spawn('python3', [path.join(root, 'tests/support/scripted_llm.py'), path.join(root, 'examples/demo/recorded-llm.json')],
    { cwd: root, stdio: ['ignore', 'pipe', 'ignore'] });
  children.push(llm);
  const [, port] = await line(llm, /listening on (\d+)/, 'scripted LLM');
  llmUrl = `http://127.0.0.1:${port}`;
  const env = {
    ...process.env,
    PROOFGATE_AUTH__REQUIRED: 'false',
    PROOFGATE_UPSTREAM__BASE_URL: `${llmUrl}/v1`,
    PROOFGATE_REWRITER__BASE_URL: `${llmUrl}/v1`,
    PROOFGATE_STORAGE__URL: `sqlite://${work}/proofgate.sqlite`,
    PROOFGATE_AUDIT__SIGNING_KEY_PATH: `${work}/audit.key`,
    RUST_LOG: 'warn',
  };
  const pg = spawn(bin, ['serve', '--config', 'examples/demo/proofgate.toml', '--listen', '127.0.0.1:0'],
    { cwd: root, env, stdio: ['ignore', 'pipe', 'inherit'] });
  children.push(pg);
  const [, url] = await line(pg, /proofgate listening on (http:\/\/\S+)/, 'proofgate serve');
  client = new OpenAI({ baseURL: `${url.replace(/\/$/, '')}/v1`, apiKey: 'unused-no-auth', maxRetries: 0 });
});

after(() => {
  for (const c of children) c.kill('SIGTERM');
  if (work) rmSync(work, { recursive: true, force: true });
});

test('a tool call passes through, and the answer after its result is verified', async () => {
  const messages = [{ role: 'system', content: SYSTEM },
    { role: 'user', content: 'Which age class is the holder of ticket T-1234 in?' }];
  const { data: first, response } = await client.chat.completions.create({ model: 'demo', messages, tools: TOOLS }).withResponse();
  assert.equal(response.headers.get('x-proofgate-verdict'), 'TOOL_CALL');
  const call = first.choices[0].message.tool_calls[0];
  assert.equal(call.function.name, 'lookup_ticket');
  assert.deepEqual(JSON.parse(call.function.arguments), { ticket: 'T-1234' });

  messages.push({ role: 'assistant', content: null, tool_calls: [call] },
    { role: 'tool', tool_call_id: call.id, content: '{"holderAge": 70}' });
  const { data: answer, response: r2 } = await client.chat.completions.create({ model: 'demo', messages, tools: TOOLS }).withResponse();
  assert.equal(r2.headers.get('x-proofgate-verdict'), 'VALID');
  assert.equal(answer.choices[0].message.content, 'The ticket holder is 70, so they are in the senior age class.');
  // The translators received the tool's result.
  const received = await (await fetch(`${llmUrl}/_requests`)).json();
  assert.ok(received.some((r) => JSON.stringify(r.body.messages).includes('You translate')
    && JSON.stringify(r.body.messages).includes('holderAge')));
});

test('a fact from an earlier turn makes the answer VALID, streamed too', async () => {
  const messages = [{ role: 'system', content: SYSTEM },
    { role: 'user', content: 'I am 70 years old.' },
    { role: 'assistant', content: 'Thanks, noted.' },
    { role: 'user', content: 'Which age class am I in?' }];
  const { data, response } = await client.chat.completions.create({ model: 'demo', messages }).withResponse();
  assert.equal(response.headers.get('x-proofgate-verdict'), 'VALID');
  assert.equal(data.proofgate.verdict, 'VALID');
  assert.equal(data.choices[0].message.content, 'You are in the senior age class.');
  const stream = await client.chat.completions.create({ model: 'demo', messages, stream: true });
  let text = '';
  for await (const chunk of stream) text += chunk.choices[0]?.delta?.content || '';
  assert.equal(text, 'You are in the senior age class.');
});

test('responses.create returns the verified answer', async () => {
  const resp = await client.responses.create({
    model: 'demo', instructions: SYSTEM,
    input: [{ role: 'user', content: 'I am 70 years old.' },
      { role: 'assistant', content: 'Thanks, noted.' },
      { role: 'user', content: 'Which age class am I in?' }],
  });
  assert.equal(resp.output_text, 'You are in the senior age class.');
  assert.equal(resp.proofgate.verdict, 'VALID');
});
