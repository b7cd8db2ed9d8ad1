//! The rewriting loop as a sans-IO state machine.
