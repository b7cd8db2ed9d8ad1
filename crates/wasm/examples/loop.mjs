// Drives proofgate's rewriting loop from Node with a scripted LLM and scripted findings.
//
//   just wasm && node crates/wasm/examples/loop.mjs
//
// A real app replaces `scriptedLlm` with its LLM client and `scriptedValidator` with a call
// to its validator (proofgate's proxy, or Bedrock ApplyGuardrail); the loop stays the same:
// the Thread says what to do next, the app does it and hands back the result.

import { Thread, replayAudit } from 'proofgate';

const policy = {
  rules: [
    {
      id: 'R1',
      expression: '(=> (and (>= age 65) (= season LOW)) (= fee 5))',
      english: 'Visitors aged 65 or more pay 5 dollars in low season.',
    },
  ],
  variables: [
    { name: 'age', description: "The visitor's age in years" },
    { name: 'season', description: 'The travel season: LOW or HIGH' },
  ],
};

const stmt = (logic, naturalLanguage) => ({ logic, naturalLanguage });
const translation = (claim) => ({
  premises: [stmt('(= age 70)', 'The visitor is 70.')],
  claims: [claim],
});

// The LLM's replies, in order: a wrong first answer, a rewrite that is only sometimes true,
// follow-up questions, then the answer regenerated with the user's clarification.
const llmReplies = [
  'You pay 10 dollars.',
  'DECISION: REWRITE\nANSWER:\nYou pay 5 dollars.',
  'DECISION: ASK_QUESTIONS\nQUESTION: Do you travel in low or high season?',
  'In low season, as a visitor aged 70, you pay 5 dollars.',
];

// The validator's findings for each validation, in order: INVALID, SATISFIABLE, VALID.
const validations = [
  [{ invalid: { translation: translation(stmt('(= fee 10)', 'The fee is 10 dollars.')),
                contradictingRules: [{ identifier: 'R1' }] } }],
  [{ satisfiable: {
    translation: translation(stmt('(= fee 5)', 'The fee is 5 dollars.')),
    claimsTrueScenario: { statements: [stmt('(= season LOW)', 'It is low season.')] },
    claimsFalseScenario: { statements: [stmt('(= season HIGH)', 'It is high season.')] },
  } }],
  [{ valid: { translation: translation(stmt('(= fee 5)', 'The fee is 5 dollars.')),
              supportingRules: [{ identifier: 'R1' }] } }],
];

const scriptedLlm = (prompt) => llmReplies.shift();
const scriptedValidator = (question, answer) => ({
  findings: validations.shift(),
  evidence: { policyVersionHash: 'sha256:example', solver: 'scripted' },
});
const scriptedUser = (questions) => questions.map(() => 'Low season.');

export function runLoop({ log = console.log } = {}) {
  let now = Date.UTC(2026, 0, 1);
  const clock = () => (now += 1000);
  let thread = new Thread({ maxIterations: 5, policy }, 'I am 70. How much is my ticket?',
    'example-thread', now);

  let effect = thread.start();
  while (effect.type !== 'Finish') {
    switch (effect.type) {
      case 'CallLlm':
        log(`[${thread.phase}] LLM call (${effect.purpose}), prompt of ${effect.prompt.length} chars`);
        effect = thread.handle({ type: 'LlmReplied', text: scriptedLlm(effect.prompt),
          model: 'scripted-llm', now: clock() });
        break;
      case 'Validate': {
        log(`[${thread.phase}] validate: ${JSON.stringify(effect.answer)}`);
        const { findings, evidence } = scriptedValidator(effect.question, effect.answer);
        effect = thread.handle({ type: 'Validated', findings, evidence, now: clock() });
        break;
      }
      case 'AskUser': {
        log(`[${thread.phase}] ask the user: ${effect.questions.join(' / ')}`);
        // A real app persists the thread while the user thinks, and resumes it later.
        const saved = JSON.stringify(thread);
        thread.free();
        thread = Thread.fromJSON(saved);
        effect = thread.handle({ type: 'UserAnswered', answers: scriptedUser(effect.questions),
          now: clock() });
        break;
      }
      default:
        throw new Error(`unexpected effect ${effect.type}`);
    }
  }

  log(`finished ${effect.status} (verified: ${effect.verified}) after ${effect.iterations} validations:`);
  log(`  ${effect.answer}`);
  const trail = thread.auditTrail();
  // The trail names the policy's document (recorded once per policy version): keep it beside
  // the trail, and give it to replay.
  const report = replayAudit(trail, thread.policyDocuments());
  log(`audit trail: ${trail.length} records, replay ${report.ok ? 'OK' : 'FAILED'}; last: ${trail.at(-1).kind}`);
  return { outcome: effect, trail, report, steps: thread.steps() };
}

if (import.meta.url === `file://${process.argv[1]}`) {
  runLoop();
}
