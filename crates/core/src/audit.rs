//! The hash-chained audit trail of a thread, and its replay.
