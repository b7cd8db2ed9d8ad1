//! The policy's part of a thread's configuration, recorded once per policy version.
//!
//! A THREAD_STARTED record holds the thread's whole configuration, and most of it is the
//! policy: its rules and variables as the LLM is shown them (`config.policy`) and, with the
//! local validator, the translators' vocabulary (`config.translation.vocabulary`): 6.7 KB of
//! a 7.3 KB record with the park example, repeated in every trail. From format 2 those two
//! members are taken out of the record into a *policy document*,
//! `{"policy": …, "vocabulary": …}`, and the record names it by its content hash,
//! `"policyDocument": "sha256:<hex of SHA-256 over its canonical JSON>"`.
//!
//! The hash is inside the hash-chained record, so a document is authenticated by its name:
//! [`PolicyDocuments`] files each document under the hash of its own contents, and replay
//! takes the document filed under the recorded name, or reports it missing. A server stores
//! each document once and hands it out with the trails that name it (the audit bundle's
//! `policyDocuments`).

use super::canonical::canonical_json;
use crate::policy::{PolicyDefinition, PolicyModel};
use crate::thread::ThreadConfig;
use serde::Deserialize;
use serde_json::{Map, Value};
use sha2::{Digest, Sha256};
use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

/// The first format whose THREAD_STARTED names its policy document instead of holding it.
pub const POLICY_DOCUMENTS_SINCE: u32 = 2;

/// The name of a policy document: `sha256:` and the hex SHA-256 of its canonical JSON.
pub fn policy_document_hash(document: &Value) -> String {
    format!(
        "sha256:{}",
        hex::encode(Sha256::digest(canonical_json(document).as_bytes()))
    )
}

/// Whether a document holds anything: a policy context with no rules and no variables and no
/// vocabulary stays in its record (nothing to share, and such trails replay on their own).
fn holds_anything(document: &Map<String, Value>) -> bool {
    let non_empty = |v: Option<&Value>| v.and_then(Value::as_array).is_some_and(|a| !a.is_empty());
    let policy = document.get("policy");
    non_empty(policy.and_then(|p| p.get("rules")))
        || non_empty(policy.and_then(|p| p.get("variables")))
        || document.contains_key("vocabulary")
}

/// Takes the policy document out of a THREAD_STARTED body (`config.policy` and
/// `config.translation.vocabulary`) and names it in `policyDocument`. Returns the document's
/// name and the document; a body whose policy holds nothing is left whole (`None`).
pub(crate) fn take_policy_document(body: &mut Value) -> Option<(String, Value)> {
    let config = body.get_mut("config")?.as_object_mut()?;
    let mut document = Map::new();
    document.insert("policy".into(), config.get("policy")?.clone());
    if let Some(vocabulary) = config.get("translation").and_then(|t| t.get("vocabulary")) {
        document.insert("vocabulary".into(), vocabulary.clone());
    }
    if !holds_anything(&document) {
        return None;
    }
    config.remove("policy");
    if let Some(translation) = config.get_mut("translation").and_then(Value::as_object_mut) {
        translation.remove("vocabulary");
    }
    let document = Value::Object(document);
    let name = policy_document_hash(&document);
    body.as_object_mut()?
        .insert("policyDocument".into(), Value::String(name.clone()));
    Some((name, document))
}

/// Takes the policy document out of a THREAD_STARTED body that already names it `name` (a
/// replayed start, whose configuration came from that document): the body as it was
/// recorded, without hashing the document again.
pub(crate) fn leave_out_policy_document(body: &mut Value, name: &str) {
    if let Some(config) = body.get_mut("config").and_then(Value::as_object_mut) {
        config.remove("policy");
        if let Some(translation) = config.get_mut("translation").and_then(Value::as_object_mut) {
            translation.remove("vocabulary");
        }
    }
    if let Some(obj) = body.as_object_mut() {
        obj.insert("policyDocument".into(), Value::String(name.to_string()));
    }
}

/// The policy document of a configuration, with its name, as a THREAD_STARTED record of the
/// current format names it; `None` when the configuration's policy holds nothing (its records
/// keep it).
pub fn policy_document_of(config: &ThreadConfig) -> Option<(String, Value)> {
    let mut body = serde_json::json!({
        "config": serde_json::to_value(config).expect("a configuration serializes to JSON")
    });
    take_policy_document(&mut body)
}

/// Why a THREAD_STARTED body could not be completed with its policy document.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum DocumentProblem {
    /// `policyDocument` is not a string.
    Malformed(String),
    /// No document of that name was given.
    Missing(String),
}

/// A THREAD_STARTED body with the policy document it names put back (`config.policy` and
/// `config.translation.vocabulary`); a body that names none is returned as it is.
pub(crate) fn with_policy_document(
    body: &Value,
    documents: &PolicyDocuments,
) -> Result<Value, DocumentProblem> {
    let Some(name) = body.get("policyDocument") else {
        return Ok(body.clone());
    };
    let name = name.as_str().ok_or_else(|| {
        DocumentProblem::Malformed(format!("policyDocument is not a string but {name}"))
    })?;
    let document = documents
        .get(name)
        .ok_or_else(|| DocumentProblem::Missing(name.to_string()))?;
    let mut body = body.clone();
    let Some(config) = body.get_mut("config").and_then(Value::as_object_mut) else {
        return Err(DocumentProblem::Malformed(
            "THREAD_STARTED has no configuration object".into(),
        ));
    };
    if let Some(policy) = document.get("policy") {
        config.insert("policy".into(), policy.clone());
    }
    if let Some(vocabulary) = document.get("vocabulary") {
        let Some(translation) = config.get_mut("translation").and_then(Value::as_object_mut) else {
            return Err(DocumentProblem::Malformed(format!(
                "the policy document {name} has a vocabulary, but the configuration has no \
                 translation to put it in"
            )));
        };
        translation.insert("vocabulary".into(), vocabulary.clone());
    }
    Ok(body)
}

/// Policy documents filed under the hash of their own contents.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PolicyDocuments(BTreeMap<String, Value>, VocabularyModels);

/// Each document's vocabulary as a model, built the first time a replay needs it, so that
/// replaying many trails of one policy version builds it once (see
/// [`PolicyDocuments::vocabulary_model`]). Not part of what the documents are: equal whatever
/// it holds.
#[derive(Debug, Clone, Default)]
struct VocabularyModels(Arc<Mutex<BTreeMap<String, Option<Arc<PolicyModel>>>>>);

impl PartialEq for VocabularyModels {
    fn eq(&self, _: &Self) -> bool {
        true
    }
}

impl PolicyDocuments {
    /// No documents.
    pub fn new() -> Self {
        PolicyDocuments::default()
    }

    /// Files `document` under its hash and returns the hash. Only the members a document has
    /// (`policy`, `vocabulary`) are accepted.
    pub fn insert(&mut self, document: Value) -> Result<String, String> {
        let Some(obj) = document.as_object() else {
            return Err("a policy document is a JSON object".into());
        };
        if let Some(other) = obj.keys().find(|k| *k != "policy" && *k != "vocabulary") {
            return Err(format!(
                "a policy document has only `policy` and `vocabulary`, not `{other}`"
            ));
        }
        if !obj.contains_key("policy") {
            return Err("a policy document needs its `policy`".into());
        }
        let name = policy_document_hash(&document);
        self.0.insert(name.clone(), document);
        Ok(name)
    }

    /// Reads a list of documents (as an audit bundle's `policyDocuments` holds them); the
    /// error names the first that is not one.
    pub fn from_values(values: &[Value]) -> Result<Self, String> {
        PolicyDocuments::from_owned_values(values.to_vec())
    }

    /// [`PolicyDocuments::from_values`] taking the documents (no copy of each).
    pub fn from_owned_values(values: Vec<Value>) -> Result<Self, String> {
        let mut documents = PolicyDocuments::new();
        for (i, v) in values.into_iter().enumerate() {
            documents
                .insert(v)
                .map_err(|e| format!("policyDocuments[{i}]: {e}"))?;
        }
        Ok(documents)
    }

    /// The document filed under `name`.
    pub fn get(&self, name: &str) -> Option<&Value> {
        self.0.get(name)
    }

    /// The vocabulary of the document filed under `name` as a model: what
    /// [`crate::translation::TranslationConfig::vocabulary_model`] builds for a configuration
    /// that holds this document's vocabulary (as replay puts it there). `None` when there is
    /// no such document, it has no vocabulary, or the vocabulary does not build (the thread
    /// then builds it itself and reports why it does not, as without this).
    ///
    /// Models are filed under their document's name, which is the hash of its contents, so
    /// one never goes stale and clones may share them; only names of documents held here are
    /// looked up, so a trail naming documents that are not here adds nothing.
    pub(crate) fn vocabulary_model(&self, name: &str) -> Option<Arc<PolicyModel>> {
        let document = self.0.get(name)?;
        let mut models = self.1 .0.lock().unwrap_or_else(|e| e.into_inner());
        models
            .entry(name.to_string())
            .or_insert_with(|| {
                let vocabulary = document.get("vocabulary")?;
                let definition = PolicyDefinition::deserialize(vocabulary).ok()?;
                crate::translation::TranslationConfig::vocabulary_model_of(definition)
                    .ok()
                    .map(Arc::new)
            })
            .clone()
    }

    /// Adds every document of `other`.
    pub fn extend(&mut self, other: PolicyDocuments) {
        self.0.extend(other.0);
    }

    /// Every document, by name.
    pub fn iter(&self) -> impl Iterator<Item = (&String, &Value)> {
        self.0.iter()
    }

    /// How many documents there are.
    pub fn len(&self) -> usize {
        self.0.len()
    }

    /// Whether there are none.
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

/// The documents a server configured with `model` writes: its rules and variables as the
/// prompts show them, with the translators' vocabulary (the local validator) and without
/// (a remote validator). An auditor who brings the policy file needs no document from the
/// server: when the one a trail names is among these, the thread was shown exactly that
/// policy.
pub fn documents_of_policy(model: &crate::policy::PolicyModel) -> PolicyDocuments {
    let policy = serde_json::to_value(model.prompt_context()).expect("a context serializes");
    let vocabulary =
        crate::translation::TranslationConfig::new(model.definition(), 1, 0, 1.0).vocabulary;
    let vocabulary = serde_json::to_value(vocabulary).expect("a vocabulary serializes");
    let mut documents = PolicyDocuments::new();
    for document in [
        serde_json::json!({ "policy": policy }),
        serde_json::json!({ "policy": policy, "vocabulary": vocabulary }),
    ] {
        documents
            .insert(document)
            .expect("both are policy documents");
    }
    documents
}

/// The name of the policy document a trail's first record refers to, if it refers to one.
pub fn referenced_policy_document(first_record: &Value) -> Option<&str> {
    first_record.pointer("/body/policyDocument")?.as_str()
}

#[cfg(test)]
mod tests {
    use super::*;
    use crate::prompts::{PolicyContext, PolicyRuleText};
    use serde_json::json;

    fn config_with_rule() -> ThreadConfig {
        ThreadConfig {
            policy: PolicyContext {
                rules: vec![PolicyRuleText {
                    id: "R1".into(),
                    expression: "(= fee 5)".into(),
                    english: None,
                }],
                variables: Vec::new(),
            },
            ..ThreadConfig::default()
        }
    }

    #[test]
    fn a_document_is_named_by_its_contents_whatever_their_key_order() {
        let a = json!({"policy": {"rules": [], "variables": [{"name": "x", "description": "d"}]}});
        let b: Value = serde_json::from_str(
            r#"{"policy": {"variables": [{"description": "d", "name": "x"}], "rules": []}}"#,
        )
        .unwrap();
        assert_eq!(policy_document_hash(&a), policy_document_hash(&b));
        let c = json!({"policy": {"rules": [], "variables": [{"name": "x", "description": "D"}]}});
        assert_ne!(policy_document_hash(&a), policy_document_hash(&c));
        assert!(policy_document_hash(&a).starts_with("sha256:"));
    }

    #[test]
    fn taking_and_putting_back_a_document_restores_the_body() {
        let config = config_with_rule();
        let whole = json!({"formatVersion": 2, "config": serde_json::to_value(&config).unwrap()});
        let mut body = whole.clone();
        let (name, document) = take_policy_document(&mut body).expect("a rule to share");
        assert!(body["config"].get("policy").is_none());
        assert_eq!(body["policyDocument"], name.as_str());
        assert_eq!(
            Some((name.clone(), document.clone())),
            policy_document_of(&config)
        );

        let mut documents = PolicyDocuments::new();
        assert_eq!(documents.insert(document).unwrap(), name);
        let mut restored = with_policy_document(&body, &documents).unwrap();
        restored.as_object_mut().unwrap().remove("policyDocument");
        assert_eq!(restored, whole);
    }

    #[test]
    fn an_empty_policy_stays_in_its_record() {
        assert_eq!(policy_document_of(&ThreadConfig::default()), None);
    }

    #[test]
    fn a_missing_or_misnamed_document_is_an_error() {
        let mut body = json!({"config": serde_json::to_value(config_with_rule()).unwrap()});
        let (name, document) = take_policy_document(&mut body).unwrap();
        assert_eq!(
            with_policy_document(&body, &PolicyDocuments::new()),
            Err(DocumentProblem::Missing(name.clone()))
        );
        // A different document cannot stand in: it is filed under its own hash.
        let mut other = document.clone();
        other["policy"]["rules"][0]["expression"] = json!("(= fee 0)");
        let mut documents = PolicyDocuments::new();
        documents.insert(other).unwrap();
        assert_eq!(
            with_policy_document(&body, &documents),
            Err(DocumentProblem::Missing(name))
        );
    }

    #[test]
    fn only_documents_are_accepted() {
        assert!(PolicyDocuments::from_values(&[json!([])]).is_err());
        let e =
            PolicyDocuments::from_values(&[json!({"policy": {}}), json!({"policy": {}, "x": 1})])
                .unwrap_err();
        assert!(e.starts_with("policyDocuments[1]"), "{e}");
        assert!(PolicyDocuments::from_values(&[json!({"vocabulary": {}})]).is_err());
    }

    /// The vocabulary model kept per document is the one the thread would build from the
    /// configuration replay puts the document into, built once.
    #[test]
    fn a_documents_vocabulary_model_is_the_configurations() {
        let vocabulary = PolicyDefinition::from_json(
            r#"{"variables": [{"name": "age", "type": "INT", "description": "Age"}],
                "rules": [{"id": "R1", "expression": "(>= age 0)"}]}"#,
        )
        .unwrap();
        let translation = crate::translation::TranslationConfig::new(&vocabulary, 3, 1, 1.0);
        let config = ThreadConfig {
            translation: Some(translation.clone()),
            ..config_with_rule()
        };
        let (name, document) = policy_document_of(&config).unwrap();
        let mut documents = PolicyDocuments::new();
        documents.insert(document).unwrap();
        let model = documents.vocabulary_model(&name).expect("a model");
        assert_eq!(*model, translation.vocabulary_model().unwrap());
        let again = documents.vocabulary_model(&name).unwrap();
        assert!(Arc::ptr_eq(&model, &again), "built once");
        assert!(Arc::ptr_eq(
            &model,
            &documents.clone().vocabulary_model(&name).unwrap()
        ));
        assert_eq!(documents.vocabulary_model("sha256:00"), None);
        // Clones share the models, but only for the documents they hold.
        assert_eq!(PolicyDocuments::new().vocabulary_model(&name), None);
        let mut other = PolicyDocuments::new();
        other.1 = documents.1.clone();
        assert_eq!(other.vocabulary_model(&name), None);
        assert!(!documents.1 .0.lock().unwrap().contains_key("sha256:00"));

        // A document without a vocabulary (a remote validator's) has none.
        let (name, document) = policy_document_of(&config_with_rule()).unwrap();
        documents.insert(document).unwrap();
        assert_eq!(documents.vocabulary_model(&name), None);
    }
}
