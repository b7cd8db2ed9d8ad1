//! Limits and thresholds of a check.

/// How a check is bounded and when translations count as agreeing.
#[derive(Debug, Clone, PartialEq)]
pub struct CheckOptions {
    /// Z3's time limit per solver call, in milliseconds. A call that runs out makes the
    /// finding TOO_COMPLEX.
    pub timeout_ms: u32,
    /// Share of translators that must agree on a premise/claim pair (paper Algorithm 1);
    /// below it the pair is TRANSLATION_AMBIGUOUS. Default 1.0 (k of k).
    pub confidence_threshold: f64,
    /// Longest statement text accepted; longer ones make the pair TOO_COMPLEX.
    pub max_statement_chars: usize,
    /// Largest premise-plus-claim formula (in syntax tree nodes); larger ones are TOO_COMPLEX.
    pub max_formula_nodes: usize,
    /// Most premise/claim pairs per translator; more is TOO_COMPLEX.
    pub max_pairs: usize,
    /// Check each pair against the rules connected to its variables only (exact when the
    /// policy is consistent, and only then used). Off: every rule, every time.
    pub slice_rules: bool,
}

impl Default for CheckOptions {
    fn default() -> Self {
        CheckOptions {
            timeout_ms: 5_000,
            confidence_threshold: 1.0,
            max_statement_chars: 10_000,
            max_formula_nodes: 5_000,
            max_pairs: 100,
            slice_rules: true,
        }
    }
}
