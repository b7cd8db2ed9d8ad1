// Node replay throughput of the npm package (`just bench-replay`): every fixture trail that
// replays intact (crates/wasm/tests/fixtures), replayed from JSON text again and again; prints
// the median time per trail and records per second. Build the package first (`just wasm`).
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { performance } from 'node:perf_hooks';
import { replayAudit, Replayer } from 'proofgate';

const here = (p) => fileURLToPath(new URL(p, import.meta.url));
const cases = JSON.parse(readFileSync(here('../tests/fixtures/replay-cases.json'), 'utf8'));
const seconds = Number(process.env.REPLAY_SECONDS || 2);

const median = (xs) => [...xs].sort((a, b) => a - b)[Math.floor(xs.length / 2)];

/** Replays `text` with `documents` for `seconds` after a warm-up: the median ms and the runs. */
function time(name, text, documents, replay = replayAudit) {
  const report = replay(text, documents);
  if (!report.ok) throw new Error(`${name} no longer replays: ${JSON.stringify(report)}`);
  for (let i = 0; i < 50; i++) replay(text, documents); // warm up
  const times = [];
  const until = performance.now() + seconds * 1000;
  while (performance.now() < until) {
    const t = performance.now();
    replay(text, documents);
    times.push(performance.now() - t);
  }
  return { ms: median(times), runs: times.length };
}

console.log('proofgate npm package: audit replay in Node (from JSON text, as a verifier reads a file)');
let totalRecords = 0;
let totalMs = 0;
for (const { name, trail, policyDocuments } of cases.filter((c) => c.report.ok)) {
  const text = JSON.stringify(trail);
  // The policy documents come with the trail (an audit bundle's), as JSON text too.
  const documents = JSON.stringify(policyDocuments);
  const { ms, runs } = time(name, text, documents);
  totalRecords += trail.length;
  totalMs += ms;
  console.log(
    `${name.padEnd(12)} records=${String(trail.length).padEnd(3)} size=${(text.length / 1024).toFixed(1).padStart(5)} KB ` +
      `median=${(ms * 1000).toFixed(0).padStart(6)} µs  ${Math.round(trail.length / (ms / 1000)).toLocaleString('en')} records/s  runs=${runs}`,
  );
}
console.log(`all intact trails: ${Math.round(totalRecords / (totalMs / 1000)).toLocaleString('en')} records/s`);

// A trail as the proxy writes it with the local validator (park policy, three translators),
// from its audit bundle: the fixture trails above are small test threads.
const bundle = JSON.parse(readFileSync(here('../../core/tests/fixtures/park-local-bundle.json'), 'utf8'));
{
  const text = JSON.stringify(bundle.trail);
  const documents = JSON.stringify(bundle.policyDocuments);
  const { ms } = time('the park bundle', text, documents);
  console.log(
    `park, local validator (proxy-written): records=${bundle.trail.length} size=${(text.length / 1024).toFixed(1)} KB + ` +
      `policy document ${(documents.length / 1024).toFixed(1)} KB, median=${(ms * 1000).toFixed(0)} µs, ` +
      `${Math.round(bundle.trail.length / (ms / 1000)).toLocaleString('en')} records/s`,
  );
  // An auditor checking many trails of one policy version reads its document once.
  const replayer = new Replayer(documents);
  const prepared = time('the park bundle (Replayer)', text, undefined, (t) => replayer.replay(t));
  console.log(
    `park, documents read once (Replayer):   records=${bundle.trail.length}, median=${(prepared.ms * 1000).toFixed(0)} µs, ` +
      `${Math.round(bundle.trail.length / (prepared.ms / 1000)).toLocaleString('en')} records/s`,
  );
}
