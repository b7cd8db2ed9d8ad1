//! A thread configuration with what every thread started from it shares, computed once.
//!
//! A new thread's THREAD_STARTED record names its policy document by the hash of the
//! document's canonical JSON, and its translator replies are read against the vocabulary as a
//! policy model. Both depend on the configuration alone, yet a thread made from a plain
//! [`ThreadConfig`] serializes and hashes the whole policy and builds the model again: with a
//! local policy that was about a tenth of the proxy's own work per request. A server starts
//! every thread from one configuration, so it prepares it once.

use super::ThreadConfig;
use crate::audit::policy_document::policy_document_of;
use crate::policy::PolicyModel;
use std::sync::Arc;

/// A [`ThreadConfig`] with the name of its policy document and its vocabulary model.
///
/// Only [`PreparedConfig::new`] makes one, from the configuration itself, and the
/// configuration cannot be changed afterwards: the name and the model always belong to it,
/// so a thread started from it records exactly what one started from the plain configuration
/// records.
#[derive(Debug, Clone)]
pub struct PreparedConfig {
    config: ThreadConfig,
    policy_document: Option<String>,
    vocabulary: Option<Arc<PolicyModel>>,
}

impl PreparedConfig {
    /// Prepares `config`: names its policy document (`None` when its policy holds nothing,
    /// which its records then keep) and builds its vocabulary model when it has one that
    /// builds (a thread whose vocabulary does not build reports that when it needs it, as
    /// before).
    pub fn new(config: ThreadConfig) -> PreparedConfig {
        let policy_document = policy_document_of(&config).map(|(name, _)| name);
        let vocabulary = config
            .translation
            .as_ref()
            .and_then(|t| t.vocabulary_model().ok())
            .map(Arc::new);
        PreparedConfig {
            config,
            policy_document,
            vocabulary,
        }
    }

    /// The configuration.
    pub fn config(&self) -> &ThreadConfig {
        &self.config
    }

    /// The name of the configuration's policy document, as THREAD_STARTED records it.
    pub fn policy_document(&self) -> Option<&str> {
        self.policy_document.as_deref()
    }

    pub(super) fn vocabulary(&self) -> Option<Arc<PolicyModel>> {
        self.vocabulary.clone()
    }
}
