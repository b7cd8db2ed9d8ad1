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
  AuditRecord, PolicyDocument, Step, OutcomeStatus, ThreadJSON,
} from 'proofgate';

declare function llm(prompt: string): Promise<string>;
declare function guardrail(question: string, answer: string): Promise<object>;
declare function translate(call: TranslatorCall): Promise<string>;
declare function check(question: string, answer: string): Promise<Finding[]>;
declare function askUser(questions: string[], deadline?: number): Promise<string[] | 'skip'>;

/** What became of one translator call. */
interface Settled { call: TranslatorCall; text?: string; reason?: string }

/** Drives a thread to its outcome: every effect a thread can ask for is handled. */
async function drive(thread: Thread): Promise<Outcome> {
  let effect: Effect = thread.start();
  // Translator calls started and not yet handed back, by call id.
  const inFlight = new Map<string, Promise<Settled>>();
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
        // Start every call it asks for (k translators, or one repair); an empty list: keep
        // waiting for those in flight. Each reply names the call it answers (format 15).
        for (const call of effect.calls) {
          inFlight.set(call.call, translate(call).then(
            (text): Settled => ({ call, text }),
            (e: unknown): Settled => ({ call, reason: String(e) })));
        }
        if (inFlight.size === 0) throw new Error('the thread waits for translator calls, none in flight');
        // Hand back whichever call ends first, then see what the thread wants next.
        const done = await Promise.race(inFlight.values());
        inFlight.delete(done.call.call);
        const { translator, attempt, call } = done.call;
        input = done.text !== undefined
          ? { type: 'TranslatorReplied', translator, attempt, call, text: done.text }
          : { type: 'TranslatorFailed', translator, attempt, call, reason: done.reason ?? 'failed' };
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
    try {
      effect = thread.handle(input);
    } catch (e) {
      // Findings that do not fit the thread (rules its policy lacks, translations they cannot
      // come from) leave it waiting for its validation: end it as a failed one, as the proxy
      // does. Any other refusal is a bug of the driver.
      if (input.type !== 'Validated' || !String(e).includes('the findings do not match the thread')) throw e;
      effect = thread.handle({ type: 'Failed', reason: 'validator: its findings do not fit the thread' });
    }
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
  const unnamed: ReplayReport = replayAudit(trail);
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
  const saved: ThreadJSON = thread.toJSON();
  const conversation = saved.conversation ?? [];
  const resumed = Thread.fromJSON(saved);
  const hash: string = recordHash(JSON.stringify(trail[0]));
  const format: number = auditFormatVersion();
  void [conversation, unnamed, verifiedFully, steps, shownAnswer, question, again, chain.ok, gaps, passed, verdict, decision.decision, resumed.phase, hash, format, trailTextOf('[]')];
}
void main;
