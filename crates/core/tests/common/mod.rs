//! Helpers shared by the core's integration tests.

use proofgate_core::thread::{Effect, Input, Thread, ThreadError};

/// Feeds `input`, with the `call` id of the translator call it answers filled in when it has
/// none, as a driver gives a reply back with its call's id (required from audit format 15).
pub fn fed(t: &mut Thread, mut input: Input) -> Result<Effect, ThreadError> {
    if let Input::TranslatorReplied {
        translator, call, ..
    }
    | Input::TranslatorFailed {
        translator, call, ..
    } = &mut input
    {
        if call.is_none() {
            if let Effect::Translate { calls } = t.pending_effect() {
                *call = calls
                    .into_iter()
                    .find(|c| c.translator == *translator)
                    .map(|c| c.call);
            }
        }
    }
    t.handle(input)
}
