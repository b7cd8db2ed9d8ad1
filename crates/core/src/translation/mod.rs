//! Translation of a question/answer into the policy's logic by k LLM translators, as part of
//! the loop: the prompts, the parsing and type-checking of replies, the repair requests and the
//! rule that a broken translator translated nothing all live here, so the audit trail records
//! the translators' raw replies and replay re-derives everything from them.
//!
//! - [`input`]: the translations document (`{"translations": [...]}`) and its types.
//! - [`prompt`]: the translator prompt (texts fenced as data), the repair message, the reply
//!   schema for structured output.
//! - [`reply`]: reading one reply.
//! - [`round`]: one round of k translators, as a small state machine the thread embeds.
//! - [`consistency`]: whether findings can have come from the translations.
//! - [`numbers_read`]: numbers the answer states that no translation reads.

pub mod consistency;
pub mod input;
pub mod numbers_read;
pub mod prompt;
pub mod reply;
pub mod round;

pub use consistency::{check_findings, check_untranslated_reported};
pub use input::{parse_translations, InputError, PairInput, TranslatorOutput};
pub use numbers_read::{unread_numbers, unread_numbers_finding};
pub use prompt::{question_as_conversation, reply_schema, ChatTurn, TranslationTexts};
pub use reply::{json_part, parse_reply};
pub use round::{
    call_id, RoundError, TranslationConfig, TranslationRound, TranslatorCall, TranslatorProgress,
    TranslatorResult,
};
