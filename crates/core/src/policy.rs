//! The policy model: Bedrock `AutomatedReasoningPolicyDefinition` JSON, SMT-LIB terms of the paper's fragment, type checking and structured English.
