//! Prompt templates of the rewriting loop, rendered from findings.
