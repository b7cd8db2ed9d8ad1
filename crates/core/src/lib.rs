//! proofgate-core: every decision proofgate makes, with no I/O, no clock and no randomness,
//! so that the proxy runs it, JavaScript embeds it through WebAssembly, and a browser can
//! replay an audit trail with exactly the same code.
//!
//! - [`findings`]: the ApplyGuardrail Automated Reasoning finding union.
//! - [`verdict`]: rewriting priority of findings and the aggregate verdict.
//! - [`decision`]: the parser for the rewriting LLM's reply.
//! - [`policy`]: the policy model (Bedrock policy JSON, SMT-LIB terms, type checking, English).
//! - [`thread`], [`prompts`], [`audit`]: the rewriting loop as a sans-IO state machine, its
//!   prompt templates, and the hash-chained audit trail with replay.
//! - [`translation`]: the k translators' prompts, replies, repairs and agreement rules.

#![forbid(unsafe_code)]
#![warn(missing_docs)]

pub mod audit;
pub mod conversation;
pub mod decision;
pub mod findings;
pub mod grounding;
pub mod guardrail_response;
pub mod policy;
pub mod policy_questions;
pub mod prompts;
pub mod thread;
pub mod translation;
pub mod verdict;

pub use audit::{replay, replay_json, verify_chain, AuditRecord, ReplayReport};
pub use decision::{parse_decision, Decision, DecisionKind, MAX_QUESTIONS};
pub use findings::{ApplyGuardrailResponse, Finding, FindingKind};
pub use prompts::PolicyContext;
pub use thread::{Effect, Input, Outcome, OutcomeStatus, Thread, ThreadConfig, ThreadError};
pub use verdict::{aggregate_verdict, prioritize, AggregateVerdict, Verdict};
