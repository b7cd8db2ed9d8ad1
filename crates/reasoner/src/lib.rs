//! proofgate-reasoner: checks translations of question/answer pairs against a policy model
//! with Z3 and returns findings in the ApplyGuardrail shape (see `proofgate_core::findings`).
//!
//! Native only: it links libz3.

#![forbid(unsafe_code)]

pub use proofgate_core::findings;
