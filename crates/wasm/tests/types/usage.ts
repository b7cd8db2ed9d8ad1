// A driver written against the npm package's TypeScript declarations, as an app writes one:
// `types.test.mjs` compiles it with `tsc --strict --noEmit`, so a declaration that does not
// compile, or no longer fits how the package is used, fails a test. It is never run.
import {
  Thread, Replayer, replayAudit, verifyChain, auditFormatVersion, aggregateVerdict,
  prioritizeFindings, parseDecision, planRechecks, checksPassed, auditNotChecked,
  readApplyGuardrail, recordHash, trailTextOf,
} from 'proofgate';
import type {
  Effect, Input, Finding, ThreadConfig, Outcome, ReplayReport, NotChecked, TranslatorCall,
  AuditRecord, PolicyDocument, Step, OutcomeStatus,
} from 'proofgate';

declare function llm(prompt: string): Promise<string>;
declare function guardrail(question: string, answer: string): Promise<object>;
declare function translate(call: TranslatorCall): Promise<string>;
declare function check(question: string, answer: string): Promise<Finding[]>;
declare function askUser(questions: string[], deadline?: number): Promise<string[] | 'skip'>;

/** Drives a thread to its outcome: every effect a thread can ask for is handled. */
async function drive(thread: Thread): Promise<Outcome> {
  let effect: Effect = thread.start();
  for (;;) {
    let input: Input;
    switch (effect.type) {
      case 'CallLlm':
        input = { type: 'LlmReplied', text: await llm(effect.prompt) };
        break;
      case 'Validate':
        input = readApplyGuardrail(await guardrail(effect.question, effect.answer), effect.answer, null);
        break;
      case 'Translate': {
        // Each reply names the call it answers (format 15).
        const call = effect.calls[0];
        if (!call) continue;
        input = { type: 'TranslatorReplied', translator: call.translator, attempt: call.attempt, call: call.call, text: await translate(call) };
        break;
      }
      case 'Check':
        input = { type: 'Validated', findings: await check(effect.question, effect.answer) };
        break;
      case 'AskUser': {
        const answers = await askUser(effect.questions, effect.deadline);
        input = answers === 'skip' ? { type: 'UserSkipped' } : { type: 'UserAnswered', answers };
        break;
      }
      case 'Finish': {
        const status: OutcomeStatus = effect.status;
        const shown: string = effect.warning ? `${effect.warning}\n${effect.answer ?? ''}` : effect.answer ?? '';
        void status; void shown;
        return thread.outcome() as Outcome;
      }
    }
    effect = thread.handle(input);
  }
}

async function main(): Promise<void> {
  const config: ThreadConfig = {};
  const thread = Thread.forReply(config, [{ role: 'user', text: 'I am 70. How much?' }], { text: 'You pay $9.', source: 'app' });
  const outcome = await drive(thread);
  const verifiedFully: boolean = outcome.status === 'VALID';
  const steps: Step[] = thread.steps();
  const trail: AuditRecord[] = thread.auditTrail();
  const documents: PolicyDocument[] = thread.policyDocuments();
  const report: ReplayReport = replayAudit(trail, documents);
  const shownAnswer: string | undefined = report.answer;
  const question: string | undefined = report.question;
  const again: ReplayReport = new Replayer(documents).replay(JSON.stringify(trail));
  const chain = verifyChain(trail);
  const gaps: NotChecked[] = auditNotChecked(JSON.stringify(trail), { policyGiven: false });
  const plan = planRechecks(JSON.stringify(trail), '{}');
  const passed: Uint8Array = checksPassed(plan.checks, plan.checks.map(() => true));
  const ranked: Finding[] = prioritizeFindings(outcome.findings);
  const verdict = aggregateVerdict(ranked).verdict;
  const decision = parseDecision('DECISION: REWRITE\nANSWER:\nYou pay $9.');
  const resumed = Thread.fromJSON(JSON.stringify(thread));
  const hash: string = recordHash(JSON.stringify(trail[0]));
  const format: number = auditFormatVersion();
  void [verifiedFully, steps, shownAnswer, question, again, chain.ok, gaps, passed, verdict, decision.decision, resumed.phase, hash, format, trailTextOf('[]')];
}
void main;
