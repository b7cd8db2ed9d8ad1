// The proofgate core (npm package `proofgate`, wasm), initialised once with its embedded bytes.
import initWasm, {
  replayAudit, verifyChain, aggregateVerdict, planRechecks, answerMatches, verifyTrust, policyDocumentsOf, trailTextOf, auditFormatVersion, checksPassed, auditNotChecked, logHeads, verifyCheckpoint,
} from 'proofgate';
import wasmBytes from 'proofgate-wasm';

let ready = null;
export function wasm() {
  if (!ready) ready = initWasm({ module_or_path: wasmBytes });
  return ready;
}

export { replayAudit, verifyChain, aggregateVerdict, planRechecks, answerMatches, verifyTrust, policyDocumentsOf, trailTextOf, auditFormatVersion, checksPassed, auditNotChecked, logHeads, verifyCheckpoint };
