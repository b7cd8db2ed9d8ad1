//! proofgate-proxy: the I/O shell around `proofgate-core`. It moves bytes and calls things:
//! the HTTP server, LLM and validator clients, storage. Every decision of the rewriting loop
//! is made by the core.

pub mod anthropic;
pub mod app;
pub mod audit_check;
pub mod audit_log;
pub mod authoring;
#[cfg(feature = "bedrock")]
pub mod bedrock;
#[cfg(feature = "bedrock")]
pub mod bedrock_guardrail;
#[cfg(feature = "bedrock")]
pub mod bedrock_policy;
pub mod config;
pub mod http_body;
pub mod journal;
pub mod key_cache;
pub mod keys;
pub mod live_threads;
pub mod llm;
pub mod memory;
pub mod metrics;
pub mod openai;
pub mod per_loop;
pub mod responses;
pub mod retry;
pub mod server;
pub mod sql_batch;
pub mod storage;
pub mod terminal;
pub mod translate;
pub mod validator;
