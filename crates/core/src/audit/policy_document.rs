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

use super::bodies::ThreadStarted;
use super::canonical::canonical_json;
use crate::policy::{PolicyDefinition, PolicyModel};
use crate::prompts::PolicyContext;
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

/// The members of a configuration that may hold the policy's vocabulary, at most one of them
/// set: the translators' (`translation`, the local validator), or the one that holds an
/// external validator's premises to the conversation (`validatorGrounding`, format 10 on).
const VOCABULARY_HOLDERS: [&str; 2] = ["translation", "validatorGrounding"];

/// Takes the policy document out of a THREAD_STARTED body (`config.policy` and
/// `config.translation.vocabulary`) and names it in `policyDocument`. Returns the document's
/// name and the document; a body whose policy holds nothing is left whole (`None`).
pub(crate) fn take_policy_document(body: &mut Value) -> Option<(String, Value)> {
    let config = body.get_mut("config")?.as_object_mut()?;
    let mut document = Map::new();
    document.insert("policy".into(), config.get("policy")?.clone());
    let holder = VOCABULARY_HOLDERS.into_iter().find(|h| {
        config
            .get(*h)
            .is_some_and(|t| t.get("vocabulary").is_some())
    });
    if let Some(vocabulary) = holder.and_then(|h| config.get(h)?.get("vocabulary")) {
        document.insert("vocabulary".into(), vocabulary.clone());
    }
    if !holds_anything(&document) {
        return None;
    }
    config.remove("policy");
    if let Some(holder) = holder.and_then(|h| config.get_mut(h)?.as_object_mut()) {
        holder.remove("vocabulary");
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
        for holder in VOCABULARY_HOLDERS {
            if let Some(holder) = config.get_mut(holder).and_then(Value::as_object_mut) {
                holder.remove("vocabulary");
            }
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
        let held = VOCABULARY_HOLDERS
            .into_iter()
            .find(|h| config.get(*h).is_some_and(Value::is_object));
        let Some(holder) = held.and_then(|h| config.get_mut(h)?.as_object_mut()) else {
            return Err(DocumentProblem::Malformed(format!(
                "the policy document {name} has a vocabulary, but the configuration has no \
                 translation (nor validator grounding) to put it in"
            )));
        };
        holder.insert("vocabulary".into(), vocabulary.clone());
    }
    Ok(body)
}

/// The THREAD_STARTED `body` read with the document it names, as [`with_policy_document`]
/// followed by [`ThreadStarted`]'s `Deserialize` reads it, without copying the document into
/// the body and reading it again for every trail: the configuration's `policy` and
/// `translation.vocabulary` are the document's members read once ([`PolicyDocuments::parts`]).
///
/// `None` whenever that reading fails (no such document, a member that does not read, no
/// translation to put a vocabulary in, a body that does not read): the caller then takes the
/// long way, which reports the problem. A member the body holds itself is replaced, as the
/// long way replaces it. Where both ways read the body they give the same start (a property
/// test compares them).
pub(crate) fn started_with_document(
    body: &Value,
    documents: &PolicyDocuments,
) -> Option<ThreadStarted> {
    let name = body.get("policyDocument")?.as_str()?;
    let parts = documents.parts(name)?;
    // A recorded body holds neither member (its policy reads as the default); one that holds
    // either must read, and then has it replaced, as the long way replaces it before reading.
    let mut started = match &parts.vocabulary {
        None => ThreadStarted::deserialize(body).ok()?,
        // The translation needs a vocabulary to read: an empty one stands in (the body
        // without the document is small to copy) until the document's takes its place.
        Some(_) => {
            let mut body = body.clone();
            let config = body.get_mut("config")?.as_object_mut()?;
            let held = VOCABULARY_HOLDERS
                .into_iter()
                .find(|h| config.get(*h).is_some_and(Value::is_object))?;
            config
                .get_mut(held)?
                .as_object_mut()?
                .insert("vocabulary".into(), Value::Object(Map::new()));
            ThreadStarted::deserialize(body).ok()?
        }
    };
    started.config.policy = parts.policy.clone();
    if let Some(vocabulary) = &parts.vocabulary {
        let config = &mut started.config;
        // The holder the long way fills: the first of `VOCABULARY_HOLDERS` present.
        let holder = match config.translation.as_mut() {
            Some(t) => t,
            None => config.validator_grounding.as_mut()?,
        };
        holder.vocabulary = vocabulary.clone();
    }
    Some(started)
}

/// Policy documents filed under the hash of their own contents.
#[derive(Debug, Clone, Default, PartialEq)]
pub struct PolicyDocuments(BTreeMap<String, Value>, DerivedFromDocuments);

/// What is derived from each document, the first time a replay needs it, so that replaying
/// many trails of one policy version derives it once: its vocabulary as a model (see
/// [`PolicyDocuments::vocabulary_model`]) and its members as a configuration holds them (see
/// [`PolicyDocuments::parts`]). Not part of what the documents are: equal whatever it holds.
#[derive(Debug, Clone, Default)]
struct DerivedFromDocuments(Arc<Derived>);

#[derive(Debug, Default)]
struct Derived {
    models: Mutex<BTreeMap<String, Option<Arc<PolicyModel>>>>,
    parts: Mutex<BTreeMap<String, Option<Arc<DocumentParts>>>>,
}

/// What `derive` gives for the document filed under `name`, derived the first time it is asked
/// for and kept (`None` too: a document that does not derive is not tried again).
fn once_per_document<T>(
    kept: &Mutex<BTreeMap<String, Option<Arc<T>>>>,
    name: &str,
    derive: impl FnOnce() -> Option<T>,
) -> Option<Arc<T>> {
    let mut kept = kept.lock().unwrap_or_else(|e| e.into_inner());
    kept.entry(name.to_string())
        .or_insert_with(|| derive().map(Arc::new))
        .clone()
}

/// A document's members read as the configuration's fields they stand for: `policy` as
/// `config.policy`, `vocabulary` as `config.translation.vocabulary`.
#[derive(Debug, PartialEq)]
pub(crate) struct DocumentParts {
    /// The document's `policy`.
    pub policy: PolicyContext,
    /// The document's `vocabulary`, when it has one.
    pub vocabulary: Option<PolicyDefinition>,
}

impl PartialEq for DerivedFromDocuments {
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
        once_per_document(&self.1 .0.models, name, || {
            let vocabulary = document.get("vocabulary")?;
            let definition = PolicyDefinition::deserialize(vocabulary).ok()?;
            crate::translation::TranslationConfig::vocabulary_model_of(definition).ok()
        })
    }

    /// The members of the document filed under `name`, read as the configuration's fields
    /// (the same `Deserialize` of the same JSON value as when [`with_policy_document`] has put
    /// them into a record's configuration), once per document. `None` when there is no such
    /// document or a member does not read: replay then reads the record the long way, which
    /// reports why.
    pub(crate) fn parts(&self, name: &str) -> Option<Arc<DocumentParts>> {
        let document = self.0.get(name)?;
        once_per_document(&self.1 .0.parts, name, || {
            let policy = PolicyContext::deserialize(document.get("policy")?).ok()?;
            let vocabulary = match document.get("vocabulary") {
                Some(v) => Some(PolicyDefinition::deserialize(v).ok()?),
                None => None,
            };
            Some(DocumentParts { policy, vocabulary })
        })
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
    referenced_policy_document_of(first_record.get("body")?)
}

/// [`referenced_policy_document`] of the first record's body.
pub fn referenced_policy_document_of(body: &Value) -> Option<&str> {
    body.get("policyDocument")?.as_str()
}

/// Whether two thread configurations hold the same policy, however a version of proofgate
/// rendered it into their documents: the same vocabulary (types, variables and what they
/// mean, as the policy file gives them), the same variables shown, and the same rules by id,
/// each the same term once parsed. A rule's English and the printing of its term are
/// proofgate's own rendering, which a new version may change: a waiting thread whose
/// document differs only there is still checked against its policy by the running one.
pub fn same_policy(a: &ThreadConfig, b: &ThreadConfig) -> bool {
    fn vocabulary(c: &ThreadConfig) -> Option<&PolicyDefinition> {
        c.translation
            .as_ref()
            .or(c.validator_grounding.as_ref())
            .map(|t| &t.vocabulary)
    }
    let same_term = |x: &str, y: &str| {
        use crate::policy::term::parse_term;
        match (parse_term(x), parse_term(y)) {
            (Ok(x), Ok(y)) => x.to_string() == y.to_string(),
            _ => x == y,
        }
    };
    vocabulary(a) == vocabulary(b)
        && a.policy.variables == b.policy.variables
        && a.policy.rules.len() == b.policy.rules.len()
        && a.policy
            .rules
            .iter()
            .zip(&b.policy.rules)
            .all(|(x, y)| x.id == y.id && same_term(&x.expression, &y.expression))
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

    /// A review's case: an upgrade that renders the same policy another way (a rule's English,
    /// the spacing of its term) changes the document's name, and every waiting thread ended
    /// as if the policy had changed. What the policy says is compared instead.
    #[test]
    fn the_same_policy_rendered_another_way_is_the_same_policy() {
        use crate::prompts::PolicyVariableText;
        let base = || {
            let mut c = config_with_rule();
            c.policy.rules[0].expression = "(=> (>= age 65) (= fee 5))".into();
            c.policy.rules[0].english = Some("Seniors pay 5.".into());
            c.policy.variables = vec![PolicyVariableText {
                name: "age".into(),
                description: "The visitor's age".into(),
            }];
            c
        };
        let mut rendered = base();
        rendered.policy.rules[0].expression = "(=>  (>= age 65)\n (= fee 5))".into();
        rendered.policy.rules[0].english = Some("If the age is at least 65, the fee is 5.".into());
        assert!(same_policy(&base(), &rendered));
        assert_ne!(
            policy_document_of(&base()).unwrap().0,
            policy_document_of(&rendered).unwrap().0
        );
        // What the policy says, changed: not the same.
        let mut rule = base();
        rule.policy.rules[0].expression = "(=> (>= age 60) (= fee 5))".into();
        let mut meaning = base();
        meaning.policy.variables[0].description = "The visitor's age in months".into();
        let mut renamed = base();
        renamed.policy.rules[0].id = "R2".into();
        let mut more = base();
        more.policy.rules.push(more.policy.rules[0].clone());
        for other in [rule, meaning, renamed, more] {
            assert!(!same_policy(&base(), &other), "{:?}", other.policy);
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
        assert!(!documents
            .1
             .0
            .models
            .lock()
            .unwrap()
            .contains_key("sha256:00"));

        // A document without a vocabulary (a remote validator's) has none.
        let (name, document) = policy_document_of(&config_with_rule()).unwrap();
        documents.insert(document).unwrap();
        assert_eq!(documents.vocabulary_model(&name), None);
    }

    /// One change to a THREAD_STARTED body or to the document it names.
    #[derive(Debug, Clone)]
    enum Change {
        NoTranslation,
        NullTranslation,
        TranslationWith(&'static str, Value),
        ConfigWith(&'static str, Value),
        BodyWith(&'static str, Value),
        BodyWithout(&'static str),
        DocumentNamed(Value),
        DocumentWithoutVocabulary,
        DocumentPolicy(Value),
        DocumentVocabulary(Value),
        /// The translation renamed to the external validator's grounding (format 10).
        GroundingInsteadOfTranslation,
        /// Both holders set.
        GroundingBesideTranslation,
    }

    fn change() -> impl proptest::strategy::Strategy<Value = Change> {
        use proptest::prelude::*;
        let value = prop_oneof![
            Just(json!({})),
            Just(json!(null)),
            Just(json!("three")),
            Just(json!(3)),
            Just(json!({"rules": "x"})),
            Just(json!({"variables": 5})),
            Just(json!({"rules": [{"id": "R9", "expression": "(= fee 1)"}]})),
            Just(json!({"types": [], "extraMember": true})),
        ];
        let config_key = prop_oneof![
            Just("policy"),
            Just("translation"),
            Just("maxIterations"),
            Just("unknownMember"),
        ];
        let translation_key = prop_oneof![
            Just("vocabulary"),
            Just("translators"),
            Just("unknownMember"),
        ];
        let body_key = prop_oneof![
            Just("threadId"),
            Just("config"),
            Just("policyDocument"),
            Just("formatVersion"),
            Just("unknownMember"),
        ];
        prop_oneof![
            Just(Change::NoTranslation),
            Just(Change::NullTranslation),
            (translation_key, value.clone()).prop_map(|(k, v)| Change::TranslationWith(k, v)),
            (config_key, value.clone()).prop_map(|(k, v)| Change::ConfigWith(k, v)),
            (body_key.clone(), value.clone()).prop_map(|(k, v)| Change::BodyWith(k, v)),
            body_key.prop_map(Change::BodyWithout),
            value.clone().prop_map(Change::DocumentNamed),
            Just(Change::DocumentWithoutVocabulary),
            value.clone().prop_map(Change::DocumentPolicy),
            value.prop_map(Change::DocumentVocabulary),
            Just(Change::GroundingInsteadOfTranslation),
            Just(Change::GroundingBesideTranslation),
        ]
    }

    /// A recorded start of a thread with the local validator (a vocabulary) and its document.
    fn recorded_start() -> (Value, Value) {
        let vocabulary = PolicyDefinition::from_json(
            r#"{"variables": [{"name": "fee", "type": "INT", "description": "Fee"}],
                "rules": [{"id": "R1", "expression": "(= fee 5)"}]}"#,
        )
        .unwrap();
        let config = ThreadConfig {
            translation: Some(crate::translation::TranslationConfig::new(
                &vocabulary,
                3,
                1,
                1.0,
            )),
            ..config_with_rule()
        };
        let started = ThreadStarted::new("t1".into(), "Fee?".into(), config);
        let mut body = serde_json::to_value(&started).unwrap();
        let (_, document) = take_policy_document(&mut body).unwrap();
        (body, document)
    }

    /// How a THREAD_STARTED body always read: the document put back, then the whole read.
    fn the_long_way(body: &Value, documents: &PolicyDocuments) -> Option<ThreadStarted> {
        let body = with_policy_document(body, documents).ok()?;
        ThreadStarted::deserialize(body).ok()
    }

    #[test]
    fn an_intact_start_reads_with_the_documents_parts() {
        let (body, document) = recorded_start();
        let mut documents = PolicyDocuments::new();
        documents.insert(document).unwrap();
        let fast = started_with_document(&body, &documents).expect("read with the parts");
        assert_eq!(Some(fast), the_long_way(&body, &documents));
        // Read once per document, and again for the next trail from what was kept.
        let parts = documents
            .parts(body["policyDocument"].as_str().unwrap())
            .unwrap();
        assert!(parts.vocabulary.is_some());
        assert!(started_with_document(&body, &documents).is_some());
        assert_eq!(documents.1 .0.parts.lock().unwrap().len(), 1);
    }

    proptest::proptest! {
        /// Whatever a trail's first record and documents hold, reading it with the document's
        /// kept parts gives the start the long way gives, or leaves it to the long way.
        #[test]
        fn reading_with_the_parts_is_reading_the_long_way(
            changes in proptest::collection::vec(change(), 0..4)
        ) {
            let (mut body, mut document) = recorded_start();
            for c in changes {
                match c {
                    Change::NoTranslation => {
                        if let Some(config) =
                            body.get_mut("config").and_then(Value::as_object_mut)
                        {
                            config.remove("translation");
                        }
                    }
                    Change::GroundingInsteadOfTranslation | Change::GroundingBesideTranslation => {
                        if let Some(config) =
                            body.get_mut("config").and_then(Value::as_object_mut)
                        {
                            let moved = matches!(c, Change::GroundingInsteadOfTranslation);
                            let t = if moved {
                                config.remove("translation")
                            } else {
                                config.get("translation").cloned()
                            };
                            if let Some(t) = t {
                                config.insert("validatorGrounding".into(), t);
                            }
                        }
                    }
                    Change::NullTranslation => {
                        if let Some(config) =
                            body.get_mut("config").and_then(Value::as_object_mut)
                        {
                            config.insert("translation".into(), Value::Null);
                        }
                    }
                    Change::TranslationWith(k, v) => {
                        if let Some(t) = body
                            .pointer_mut("/config/translation")
                            .and_then(Value::as_object_mut)
                        {
                            t.insert(k.into(), v);
                        }
                    }
                    Change::ConfigWith(k, v) => {
                        if let Some(config) =
                            body.get_mut("config").and_then(Value::as_object_mut)
                        {
                            config.insert(k.into(), v);
                        }
                    }
                    Change::BodyWith(k, v) => {
                        body.as_object_mut().unwrap().insert(k.into(), v);
                    }
                    Change::BodyWithout(k) => {
                        body.as_object_mut().unwrap().remove(k);
                    }
                    Change::DocumentNamed(v) => {
                        body.as_object_mut().unwrap().insert("policyDocument".into(), v);
                    }
                    Change::DocumentWithoutVocabulary => {
                        document.as_object_mut().unwrap().remove("vocabulary");
                    }
                    Change::DocumentPolicy(v) => {
                        document["policy"] = v;
                    }
                    Change::DocumentVocabulary(v) => {
                        document["vocabulary"] = v;
                    }
                }
            }
            // The body names the document as it now is, unless a change renamed it.
            let name = policy_document_hash(&document);
            if body.get("policyDocument").and_then(Value::as_str).is_some_and(|n| n.starts_with("sha256:")) {
                body["policyDocument"] = json!(name);
            }
            let mut documents = PolicyDocuments::new();
            documents.insert(document).unwrap();
            // Twice: the first reading keeps the parts, the second reads from them.
            for _ in 0..2 {
                if let Some(fast) = started_with_document(&body, &documents) {
                    proptest::prop_assert_eq!(Some(fast), the_long_way(&body, &documents));
                }
            }
        }
    }
}
