// The same audit trails replay identically in Rust and through the npm package: the reports
// in fixtures/replay-cases.json were produced by proofgate-core natively
// (crates/core/tests/audit_replay.rs); here the same trails go through the wasm build.
import { test } from 'node:test';
import assert from 'node:assert/strict';
import { readFileSync } from 'node:fs';
import { fileURLToPath } from 'node:url';
import { replayAudit, verifyChain, policyDocumentsOf, Replayer, trailTextOf } from 'proofgate';

const here = (p) => fileURLToPath(new URL(p, import.meta.url));
const cases = JSON.parse(readFileSync(here('./fixtures/replay-cases.json'), 'utf8'));
// Trails written in format 1 (prompts whole in their records), with that version's reports.
const v1Cases = JSON.parse(readFileSync(here('../../core/tests/fixtures/trails-v1.json'), 'utf8'));
const v2Cases = JSON.parse(readFileSync(here('../../core/tests/fixtures/trails-v2.json'), 'utf8'));
// Format 3: premises not yet held to the turns they cite.
const v3Cases = JSON.parse(readFileSync(here('../../core/tests/fixtures/trails-v3.json'), 'utf8'));
// Format 4: a VALID that names no supporting rule still counted as VALID.
const v4Cases = JSON.parse(readFileSync(here('../../core/tests/fixtures/trails-v4.json'), 'utf8'));
// Format 5: a premise's arithmetic on numerals read numeral by numeral; the best answer at the
// iteration limit picked by aggregate verdict alone.
const v5Cases = JSON.parse(readFileSync(here('../../core/tests/fixtures/trails-v5.json'), 'utf8'));
const v6Cases = JSON.parse(readFileSync(here('../../core/tests/fixtures/trails-v6.json'), 'utf8'));

test('the fixtures cover an intact trail and each kind of damage', () => {
  const names = cases.map((c) => c.name);
  assert.ok(names.includes('intact'));
  assert.ok(cases.filter((c) => !c.report.ok).length >= 4);
});

for (const { name, trail, policyDocuments, report } of cases) {
  test(`replay report of "${name}" is the one Rust produced`, () => {
    assert.deepEqual(replayAudit(trail, policyDocuments), report);
  });

  test(`replay of "${name}" from JSON text matches too`, () => {
    assert.deepEqual(replayAudit(JSON.stringify(trail, null, 2), JSON.stringify(policyDocuments)), report);
  });

  test(`verifyChain agrees with replay on "${name}"`, () => {
    const chain = verifyChain(trail);
    if (report.ok) {
      assert.equal(chain.ok, true);
      assert.equal(chain.headHash, report.headHash);
    } else if (chain.failure) {
      // The chain alone can only see alterations, never earlier than replay does.
      assert.ok(chain.failure.index >= report.failure.index);
    }
  });
}

// Reports pinned before a report named the question and the released answer (what the
// records hold, not a decision) are held to everything else.
function pinned(got, report) {
  if ('question' in report) return got;
  const { question, answer, ...rest } = got;
  return rest;
}

for (const { name, trail, report } of v1Cases) {
  test(`format 1 trail "${name}" still replays with the report it had`, () => {
    assert.equal(trail[0].body.formatVersion, 1);
    assert.deepEqual(pinned(replayAudit(trail), report), report);
  });
}

for (const [version, stored] of [[2, v2Cases], [3, v3Cases], [4, v4Cases], [5, v5Cases], [6, v6Cases]]) {
  for (const { name, trail, policyDocuments, report } of stored) {
    test(`format ${version} trail "${name}" still replays with the report it had`, () => {
      assert.equal(trail[0].body.formatVersion, version);
      assert.deepEqual(pinned(replayAudit(trail, policyDocuments), report), report);
    });
  }
}

test('a Replayer made once gives every trail the report replayAudit gives it', () => {
  // One replayer for all the cases' documents, reused across intact and damaged trails.
  const all = cases.flatMap((c) => c.policyDocuments ?? []);
  const replayer = new Replayer(all);
  assert.equal(replayer.documents, new Set(all.map((d) => JSON.stringify(d))).size);
  assert.ok(replayer.documents >= 1);
  for (const { name, trail, report } of cases) {
    assert.deepEqual(replayer.replay(trail), report, name);
    assert.deepEqual(replayer.replay(JSON.stringify(trail)), report, name);
  }
  // Its documents are only the ones it was given, each under the hash of its contents.
  const { trail, policyDocuments } = cases.find((c) => c.name === 'translated');
  assert.equal(new Replayer().replay(trail).failure.problem, 'POLICY_DOCUMENT_MISSING');
  const changed = JSON.stringify(policyDocuments).replace('Age of the visitor', 'Age of the visitof');
  assert.equal(new Replayer(changed).replay(trail).failure.problem, 'POLICY_DOCUMENT_MISSING');
  assert.equal(new Replayer(JSON.stringify(policyDocuments)).replay(trail).ok, true);
  assert.throws(() => new Replayer([{ policy: {}, extra: 1 }]), /policyDocuments\[0\]/);
  assert.throws(() => new Replayer('[{'), /the policy documents is malformed/);
});

test('replayAudit remembers the documents it read last, and only for the very same text', () => {
  const { trail, policyDocuments } = cases.find((c) => c.name === 'translated');
  const text = JSON.stringify(policyDocuments);
  const changed = text.replace('Age of the visitor', 'Age of the visitof');
  // Same text again and again, then a one-letter change of the same length, as an array and
  // as text, then the original back: each replay gets the documents it was given.
  assert.equal(changed.length, text.length);
  for (let round = 0; round < 2; round++) {
    assert.equal(replayAudit(trail, text).ok, true);
    assert.equal(replayAudit(trail, text).ok, true);
    assert.equal(replayAudit(trail, changed).failure.problem, 'POLICY_DOCUMENT_MISSING');
    assert.equal(replayAudit(trail, JSON.parse(changed)).failure.problem, 'POLICY_DOCUMENT_MISSING');
    assert.equal(replayAudit(trail).failure.problem, 'POLICY_DOCUMENT_MISSING');
    assert.equal(replayAudit(trail, policyDocuments).ok, true);
  }
  // Bad documents after good ones still throw, and do not replace the ones remembered.
  assert.throws(() => replayAudit(trail, '[{'), /the policy documents is malformed/);
  assert.throws(() => replayAudit(trail, [{ policy: {}, extra: 1 }]), /policyDocuments\[0\]/);
  assert.equal(replayAudit(trail, text).ok, true);
});

test('a trail names its policy document, and replay needs that very document', () => {
  const { trail, policyDocuments } = cases.find((c) => c.name === 'translated');
  const name = trail[0].body.policyDocument;
  assert.match(name, /^sha256:[0-9a-f]{64}$/);
  assert.equal(trail[0].body.config.policy, undefined);
  const missing = replayAudit(trail);
  assert.equal(missing.failure.problem, 'POLICY_DOCUMENT_MISSING');
  assert.equal(missing.failure.index, 0);
  assert.ok(missing.failure.detail.includes(name));
  // A document with one character changed is another document: it cannot stand in.
  const changed = JSON.parse(JSON.stringify(policyDocuments).replace('Age of the visitor', 'Age of the visitof'));
  assert.equal(replayAudit(trail, changed).failure.problem, 'POLICY_DOCUMENT_MISSING');
  assert.throws(() => replayAudit(trail, [{ policy: {}, extra: 1 }]), /policyDocuments\[0\]/);
  assert.equal(replayAudit(trail, policyDocuments).ok, true);
});

test('changing any single character of a record is caught at that record', () => {
  const { trail, policyDocuments } = cases.find((c) => c.name === 'intact');
  const text = (records) => `[${records.map((r) => JSON.stringify(r)).join(',')}]`;
  for (let i = 0; i < trail.length; i++) {
    const record = JSON.stringify(trail[i]);
    // A sample of positions in every record, including its hash, kind and body.
    for (let at = 0; at < record.length; at += Math.max(1, Math.floor(record.length / 40))) {
      const replacement = record[at] === 'x' ? 'y' : 'x';
      const altered = record.slice(0, at) + replacement + record.slice(at + 1);
      const records = trail.map((r) => JSON.stringify(r));
      records[i] = altered;
      const report = replayAudit(`[${records.join(',')}]`, policyDocuments);
      assert.equal(report.ok, false, `record ${i}, char ${at}`);
      assert.equal(report.failure.index, i, `record ${i}, char ${at}: ${report.failure.detail}`);
    }
  }
  assert.equal(replayAudit(text(trail), policyDocuments).ok, true);
});

test('a bad trail never throws: it is reported', () => {
  assert.equal(replayAudit('not json').failure.problem, 'MALFORMED');
  assert.equal(replayAudit([]).failure.problem, 'EMPTY');
  assert.equal(verifyChain([{ seq: 0 }]).failure.problem, 'MALFORMED');
});

test('an auditor makes the policy documents from their own copy of the policy', () => {
  const policy = readFileSync(here('../../../examples/policies/park-admission.json'), 'utf8');
  const documents = policyDocumentsOf(policy);
  assert.equal(documents.length, 2);
  const withVocabulary = documents.find((d) => d.vocabulary);
  assert.ok(withVocabulary && documents.some((d) => !d.vocabulary));
  assert.ok(withVocabulary.policy.rules.some((r) => r.id === 'BASEFEE00000' && r.english));
  assert.throws(() => policyDocumentsOf('{"rules": 5}'), /the policy/);
});

test('trailTextOf gives a verifier the file\'s own bytes, which JSON.parse would round', () => {
  const { trail, policyDocuments, report } = cases.find((c) => c.name === 'intact');
  const text = JSON.stringify(trail);
  // A bundle and a plain trail give the records' text exactly, whatever its spelling.
  const bundle = `{"signedHead": "x", "trail": ${text}, "policyDocuments": []}`;
  assert.equal(trailTextOf(bundle), text);
  assert.equal(trailTextOf(text), text);
  assert.deepEqual(replayAudit(trailTextOf(bundle), policyDocuments), report);
  // An integer beyond 2^53 changed to its neighbour: the text differs where JSON.parse sees
  // no change, so only the bytes can show it.
  const signed = text.replace('"at":', '"at":9007199254740992, "x":');
  const changed = signed.replace('9007199254740992', '9007199254740993');
  assert.deepEqual(JSON.parse(signed), JSON.parse(changed));
  assert.notEqual(trailTextOf(`{"trail": ${changed}}`), trailTextOf(`{"trail": ${signed}}`));
  assert.throws(() => trailTextOf('{"signedHead": "x"}'), /expected a JSON array of audit records/);
});

test('a key written twice in a record is refused, whichever copy comes first', () => {
  // JSON.parse (and serde_json) keep the last copy, so a forgery placed before the signed value
  // hashed as the signed record; a reader keeping the first copy would read the forgery.
  const bundle = JSON.parse(readFileSync(here('../../core/tests/fixtures/park-local-bundle.json'), 'utf8'));
  const text = JSON.stringify(bundle.trail);
  const documents = JSON.stringify(bundle.policyDocuments);
  assert.equal(replayAudit(text, documents).ok, true);
  const at = text.indexOf('"body":{"') + '"body":{'.length;
  const key = text.slice(at + 1, text.indexOf('"', at + 1));
  const forged = `${text.slice(0, at)}"${key}":"forged",${text.slice(at)}`;
  const report = replayAudit(forged, documents);
  assert.equal(report.ok, false);
  assert.equal(report.failure.index, 0);
  assert.equal(report.failure.problem, 'MALFORMED');
  assert.match(report.failure.detail, new RegExp(`\`${key}\` appears twice`));
  assert.equal(verifyChain(forged).ok, false);
});
