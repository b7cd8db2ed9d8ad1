//! Autoformalization of a policy document (paper §3.1, Policy Model Creator): the document is
//! split into spans, an LLM formalizes each span into a policy unit (types, variables, rules)
//! with the declarations found so far in context, syntax and type errors go back for repair
//! (bounded), and the units are merged: variables meaning the same thing are unified, same-named
//! variables that differ are renamed, rules are rewritten consistently and duplicates dropped.
//!
//! Variable similarity is lexical (cosine over the words of names and descriptions); an
//! embeddings endpoint is not used yet.

use super::AuthoringError;
use crate::llm::{ChatMessage, LlmClient};
use proofgate_core::policy::definition::{PolicyDefinition, TypeDefinition};
use proofgate_core::policy::term::TermKind;
use proofgate_core::policy::{parse_term, PolicyModel, Term, VariableDefinition};
use proofgate_core::translation::json_part;
use serde::Serialize;
use serde_json::json;
use std::collections::{BTreeMap, BTreeSet};
use std::fmt::Write as _;

/// A piece of the document formalized on its own: a paragraph, with its section heading.
#[derive(Debug, Clone, PartialEq, Eq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Span {
    /// 1-based position among the spans.
    pub index: usize,
    /// The nearest markdown heading above it.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub heading: Option<String>,
    /// The text.
    pub text: String,
    /// First line in the document (1-based).
    pub first_line: usize,
    /// Last line in the document.
    pub last_line: usize,
}

impl Span {
    /// `Discount (lines 7-8)`.
    pub fn label(&self) -> String {
        let lines = if self.first_line == self.last_line {
            format!("line {}", self.first_line)
        } else {
            format!("lines {}-{}", self.first_line, self.last_line)
        };
        match &self.heading {
            Some(h) => format!("{h} ({lines})"),
            None => lines,
        }
    }
}

/// Splits a (markdown or plain text) document into paragraphs. Headings are not spans of
/// their own; they label the paragraphs below them. Fenced code is kept inside its paragraph.
pub fn split_spans(doc: &str) -> Vec<Span> {
    let mut spans = Vec::new();
    let mut heading: Option<String> = None;
    let mut current: Vec<&str> = Vec::new();
    let mut first = 0;
    let mut in_fence = false;
    let mut flush =
        |current: &mut Vec<&str>, first: usize, last: usize, heading: &Option<String>| {
            let text = current.join("\n").trim().to_string();
            if !text.is_empty() {
                spans.push(Span {
                    index: 0,
                    heading: heading.clone(),
                    text,
                    first_line: first,
                    last_line: last,
                });
            }
            current.clear();
        };
    let lines: Vec<&str> = doc.lines().collect();
    for (i, line) in lines.iter().enumerate() {
        let n = i + 1;
        let t = line.trim();
        if t.starts_with("```") {
            in_fence = !in_fence;
        }
        if !in_fence && t.starts_with('#') {
            flush(&mut current, first, n - 1, &heading);
            heading = Some(t.trim_start_matches('#').trim().to_string()).filter(|h| !h.is_empty());
            continue;
        }
        if !in_fence && t.is_empty() {
            flush(&mut current, first, n - 1, &heading);
            continue;
        }
        if current.is_empty() {
            first = n;
        }
        current.push(line);
    }
    flush(&mut current, first, lines.len(), &heading);
    for (i, s) in spans.iter_mut().enumerate() {
        s.index = i + 1;
    }
    spans
}

/// One span's formalization.
#[derive(Debug, Clone, PartialEq)]
pub struct PolicyUnit {
    /// Where it came from.
    pub span: Span,
    /// Its types, variables and rules (may use declarations of earlier units).
    pub definition: PolicyDefinition,
}

/// The prompt for one span.
pub fn span_prompt(context: &PolicyDefinition, span: &Span) -> String {
    let mut p = String::from(
        "You formalize one part of a policy document into logic for an automated reasoning \
         checker. Identify the statements that express formalizable meaning and write them as \
         rules in SMT-LIB over typed variables.\n\n",
    );
    if context.types.is_empty() && context.variables.is_empty() {
        p.push_str("Nothing has been declared yet.\n\n");
    } else {
        p.push_str(
            "Declared so far (reuse these names for the same things; do not declare them again):\n",
        );
        for t in &context.types {
            let values: Vec<&str> = t.values.iter().map(|v| v.value.as_str()).collect();
            let _ = writeln!(
                p,
                "- type {}: {} ({})",
                t.name,
                values.join(", "),
                t.description.as_deref().unwrap_or("")
            );
        }
        for v in &context.variables {
            let _ = writeln!(
                p,
                "- {} ({}): {}",
                v.name,
                v.type_name,
                v.description.as_deref().unwrap_or("")
            );
        }
        if !context.rules.is_empty() {
            p.push_str("Rules so far (do not repeat them):\n");
            for r in &context.rules {
                let _ = writeln!(p, "- {}: {}", r.id, r.expression);
            }
        }
        p.push('\n');
    }
    p.push_str(
        "Rules are quantifier-free SMT-LIB terms using only the variables, the values of the \
         types, numbers (write reals with a decimal point, e.g. 50.0), true and false, and the \
         operators and, or, not, =>, =, distinct, ite, +, -, *, /, <, <=, >, >=. Variable types \
         are BOOL, INT, REAL or the name of a type. Give every new variable a description that \
         says what it means in the words of the text. Rule ids are UPPER_SNAKE_CASE; \
         alternateExpression is the sentence of the text the rule formalizes.\n\n\
         Reply with JSON only, in this shape (empty lists if the text states nothing \
         formalizable):\n\
         {\"types\": [{\"name\": \"AgeClass\", \"description\": \"...\", \"values\": [{\"value\": \"SENIOR\", \"description\": \"...\"}]}], \
         \"variables\": [{\"name\": \"someVariable\", \"type\": \"REAL\", \"description\": \"...\"}], \
         \"rules\": [{\"id\": \"SOME_RULE\", \"expression\": \"(=> a (= someVariable 1.0))\", \"alternateExpression\": \"...\"}]}\n\n",
    );
    let _ = write!(p, "Text ({}):\n<<<\n{}\n>>>\n", span.label(), span.text);
    p
}

/// The follow-up message that sends a unit's errors back.
pub fn repair_prompt(errors: &[String]) -> String {
    let mut p = String::from("Your reply could not be used:\n");
    for e in errors {
        let _ = writeln!(p, "- {e}");
    }
    p.push_str("Reply again with the corrected JSON only, in the same shape.");
    p
}

/// Reads a unit from an LLM reply and checks it against the declarations so far: every
/// problem, phrased for the LLM to fix.
pub fn parse_unit(
    context: &PolicyDefinition,
    reply: &str,
    options: &FormalizeOptions,
) -> Result<PolicyDefinition, Vec<String>> {
    let unit = PolicyDefinition::from_json(json_part(reply)).map_err(|e| {
        vec![format!(
            "the reply is not JSON of the expected shape ({e}); reply with {{\"types\": [...], \"variables\": [...], \"rules\": [...]}}"
        )]
    })?;
    if let Some(e) = over_limits(context, &unit, options) {
        return Err(vec![e]);
    }
    let errors = unit_errors(context, &unit);
    if errors.is_empty() {
        Ok(unit)
    } else {
        Err(errors)
    }
}

/// Why `unit` over `context` would hold more than the policy may, if it would.
fn over_limits(
    context: &PolicyDefinition,
    unit: &PolicyDefinition,
    options: &FormalizeOptions,
) -> Option<String> {
    // As the unit would leave the declarations: one declared again replaces the context's.
    let declared = with_context(context, unit);
    [
        (declared.types.len(), options.max_types, "types"),
        (declared.variables.len(), options.max_variables, "variables"),
        (
            context.rules.len() + unit.rules.len(),
            options.max_rules,
            "rules",
        ),
    ]
    .into_iter()
    .find(|(n, max, _)| n > max)
    .map(|(n, max, what)| {
        format!("the policy would hold {n} {what}; it may hold at most {max}: declare fewer")
    })
}

/// The unit's declarations over the context's, with the unit's rules only (the context's rules
/// were checked when their unit was).
fn with_context(context: &PolicyDefinition, unit: &PolicyDefinition) -> PolicyDefinition {
    let mut d = context.clone();
    // A redeclaration in the unit is what the unit's rules mean by that name.
    d.types
        .retain(|t| !unit.types.iter().any(|u| u.name == t.name));
    d.types.extend(unit.types.iter().cloned());
    d.variables
        .retain(|v| !unit.variables.iter().any(|u| u.name == v.name));
    d.variables.extend(unit.variables.iter().cloned());
    d.rules = unit.rules.clone();
    d
}

fn unit_errors(context: &PolicyDefinition, unit: &PolicyDefinition) -> Vec<String> {
    match PolicyModel::from_definition_partial(with_context(context, unit), None) {
        Err(errors) => errors.0.iter().map(ToString::to_string).collect(),
        Ok((_, errors)) => errors.iter().map(ToString::to_string).collect(),
    }
}

/// What happened to one span.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct SpanReport {
    /// The span.
    pub span: Span,
    /// How many total spans the document has.
    pub of: usize,
    /// LLM calls made (1 + repairs).
    pub attempts: usize,
    /// Types, variables and rules the unit declared.
    pub types: usize,
    /// Variables declared.
    pub variables: usize,
    /// Rules kept.
    pub rules: usize,
    /// Problems left after the repairs; the rules concerned were dropped.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub unresolved: Vec<String>,
}

/// How the units were merged.
#[derive(Debug, Clone, PartialEq, Default, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct MergeReport {
    /// `(span, name in the unit, name in the policy)` for variables unified with an earlier one
    /// of another name.
    pub unified: Vec<(usize, String, String)>,
    /// `(span, name in the unit, new name)` for variables (or types, values) renamed because
    /// the name was taken by something else.
    pub renamed: Vec<(usize, String, String)>,
    /// Ids of rules dropped as duplicates of earlier rules.
    pub duplicates_dropped: Vec<String>,
    /// `(span, type, values added)` for a type declared again with values it lacked: one type,
    /// with every value either unit gave it.
    pub extended: Vec<(usize, String, Vec<String>)>,
}

/// The formalized policy and how it was made.
#[derive(Debug, Clone, PartialEq, Serialize)]
#[serde(rename_all = "camelCase")]
pub struct Formalized {
    /// The Bedrock policy definition; each rule's `source` names its span.
    pub definition: PolicyDefinition,
    /// Per span.
    pub spans: Vec<SpanReport>,
    /// The merge.
    pub merge: MergeReport,
}

/// Options of [`formalize`].
#[derive(Debug, Clone, PartialEq)]
pub struct FormalizeOptions {
    /// How often a unit with errors is sent back to the LLM.
    pub repair_attempts: usize,
    /// The most types, variables and rules the policy may hold (`[limits] max_policy_*`): a
    /// unit that would take it past them is sent back as an error, before any work on it
    /// (merging and checking grow with the square of the declarations, on the event loop).
    pub max_types: usize,
    /// See `max_types`.
    pub max_variables: usize,
    /// See `max_types`.
    pub max_rules: usize,
}

impl Default for FormalizeOptions {
    fn default() -> Self {
        // Amazon Bedrock's limits, as `[limits]` has them by default.
        FormalizeOptions {
            repair_attempts: 2,
            max_types: 50,
            max_variables: 200,
            max_rules: 500,
        }
    }
}

/// Formalizes `doc` with `client`, calling `progress` after each span.
pub async fn formalize(
    client: &LlmClient,
    doc: &str,
    options: &FormalizeOptions,
    progress: &(dyn Fn(&SpanReport) + Send + Sync),
) -> Result<Formalized, AuthoringError> {
    let spans = split_spans(doc);
    if spans.is_empty() {
        return Err(AuthoringError::EmptyDocument);
    }
    let total = spans.len();
    let mut units: Vec<PolicyUnit> = Vec::new();
    let mut reports = Vec::new();
    for span in spans {
        let context = merge_units(&units).0;
        let (definition, attempts, unresolved) =
            formalize_span(client, &context, &span, options).await?;
        let report = SpanReport {
            span: span.clone(),
            of: total,
            attempts,
            types: definition.types.len(),
            variables: definition.variables.len(),
            rules: definition.rules.len(),
            unresolved,
        };
        progress(&report);
        reports.push(report);
        units.push(PolicyUnit { span, definition });
    }
    let (definition, merge) = merge_units(&units);
    // Merging renames a name declared again with another meaning, so the policy can end up
    // larger than any unit's check saw: held to the limits as a whole too.
    if let Some(why) = over_limits(&PolicyDefinition::default(), &definition, options) {
        return Err(AuthoringError::Policy(format!(
            "the document's policy is too large: {why}"
        )));
    }
    Ok(Formalized {
        definition,
        spans: reports,
        merge,
    })
}

async fn formalize_span(
    client: &LlmClient,
    context: &PolicyDefinition,
    span: &Span,
    options: &FormalizeOptions,
) -> Result<(PolicyDefinition, usize, Vec<String>), AuthoringError> {
    let mut messages = vec![ChatMessage::user(span_prompt(context, span))];
    let mut last_errors = Vec::new();
    let mut last_reply = String::new();
    for attempt in 1..=options.repair_attempts + 1 {
        let reply = client.complete(&messages).await?;
        match parse_unit(context, &reply.text, options) {
            Ok(unit) => return Ok((unit, attempt, Vec::new())),
            Err(errors) => {
                messages.push(ChatMessage {
                    role: "assistant".into(),
                    content: reply.text.clone(),
                });
                messages.push(ChatMessage::user(repair_prompt(&errors)));
                last_errors = errors;
                last_reply = reply.text;
            }
        }
    }
    // Out of repairs: keep what checks on its own, so one bad sentence does not lose the span.
    let attempts = options.repair_attempts + 1;
    let Ok(mut unit) = PolicyDefinition::from_json(json_part(&last_reply)) else {
        return Ok((PolicyDefinition::default(), attempts, last_errors));
    };
    if over_limits(context, &unit, options).is_some() {
        return Ok((PolicyDefinition::default(), attempts, last_errors));
    }
    let declarations = PolicyDefinition {
        rules: Vec::new(),
        ..unit.clone()
    };
    if !unit_errors(context, &declarations).is_empty() {
        return Ok((PolicyDefinition::default(), attempts, last_errors));
    }
    unit.rules.retain(|r| {
        let one = PolicyDefinition {
            rules: vec![r.clone()],
            ..declarations.clone()
        };
        unit_errors(context, &one).is_empty()
    });
    Ok((unit, attempts, last_errors))
}

// ---- merging -------------------------------------------------------------------------------

/// Words that say nothing about what a variable means.
const STOP_WORDS: &[&str] = &[
    "the", "a", "an", "of", "in", "on", "for", "to", "is", "are", "be", "and", "or", "whether",
    "if", "by", "with", "as", "at", "it", "its", "that", "this", "which", "dollars", "in",
];

/// Lower-case words of a camelCase / snake_case name or a sentence, crudely singularised.
fn words(text: &str) -> Vec<String> {
    let mut spaced = String::new();
    let mut prev_lower = false;
    for c in text.chars() {
        if c.is_uppercase() && prev_lower {
            spaced.push(' ');
        }
        prev_lower = c.is_lowercase() || c.is_ascii_digit();
        spaced.push(if c.is_alphanumeric() { c } else { ' ' });
    }
    spaced
        .to_lowercase()
        .split_whitespace()
        .filter(|w| !STOP_WORDS.contains(w))
        .map(|w| {
            if w.len() > 3 && w.ends_with('s') && !w.ends_with("ss") {
                w[..w.len() - 1].to_string()
            } else {
                w.to_string()
            }
        })
        .collect()
}

/// Word weights: words many variables share ("fee", "admission") say little about which
/// variable is meant, so they weigh less (inverse document frequency over all variables).
#[derive(Debug, Clone, Default)]
pub struct WordWeights {
    documents: BTreeMap<String, usize>,
    total: usize,
}

impl WordWeights {
    /// Weights from every variable that takes part in a merge.
    pub fn new<'a>(variables: impl IntoIterator<Item = &'a VariableDefinition>) -> WordWeights {
        let mut w = WordWeights::default();
        for v in variables {
            w.total += 1;
            let mut seen: BTreeSet<String> = words(&v.name).into_iter().collect();
            seen.extend(words(v.description.as_deref().unwrap_or("")));
            for word in seen {
                *w.documents.entry(word).or_default() += 1;
            }
        }
        w
    }

    fn weight(&self, word: &str) -> f64 {
        let df = self.documents.get(word).copied().unwrap_or(0);
        ((1 + self.total) as f64 / (1 + df) as f64).ln() + 1.0
    }
}

fn cosine(a: &[String], b: &[String], weights: &WordWeights) -> f64 {
    if a.is_empty() || b.is_empty() {
        return 0.0;
    }
    let vector = |xs: &[String]| {
        let mut m: BTreeMap<String, f64> = BTreeMap::new();
        for x in xs {
            *m.entry(x.clone()).or_default() += weights.weight(x);
        }
        m
    };
    let (va, vb) = (vector(a), vector(b));
    let dot: f64 = va
        .iter()
        .map(|(k, v)| v * vb.get(k).copied().unwrap_or(0.0))
        .sum();
    let norm = |m: &BTreeMap<String, f64>| m.values().map(|v| v * v).sum::<f64>().sqrt();
    dot / (norm(&va) * norm(&vb))
}

/// How alike two variables' meanings look, from 0 to 1: weighted words of the names and
/// descriptions.
pub fn similarity(a: &VariableDefinition, b: &VariableDefinition, weights: &WordWeights) -> f64 {
    let names = cosine(&words(&a.name), &words(&b.name), weights);
    match (&a.description, &b.description) {
        (Some(da), Some(db)) => 0.4 * names + 0.6 * cosine(&words(da), &words(db), weights),
        _ => names,
    }
}

/// Variables of different names at least this similar (and of one type) are unified.
const UNIFY_THRESHOLD: f64 = 0.8;
/// Variables of one name and type are unified unless their descriptions are less alike.
const SAME_NAME_THRESHOLD: f64 = 0.3;

fn same_type(a: &str, b: &str) -> bool {
    a.eq_ignore_ascii_case(b)
}

fn fresh(name: &str, taken: &dyn Fn(&str) -> bool) -> String {
    (2..)
        .map(|i| format!("{name}_{i}"))
        .find(|n| !taken(n))
        .unwrap_or_else(|| format!("{name}_x"))
}

fn rename(term: &Term, map: &BTreeMap<String, String>) -> Term {
    let kind = match &term.kind {
        TermKind::Symbol(s) => TermKind::Symbol(map.get(s).cloned().unwrap_or_else(|| s.clone())),
        TermKind::App(op, args) => {
            TermKind::App(*op, args.iter().map(|a| rename(a, map)).collect())
        }
        other => other.clone(),
    };
    Term::new(kind)
}

/// Merges the units into one definition (paper §3.1): unify, rename, rewrite, deduplicate.
pub fn merge_units(units: &[PolicyUnit]) -> (PolicyDefinition, MergeReport) {
    let mut out = PolicyDefinition {
        version: Some("1.0".into()),
        ..Default::default()
    };
    let mut report = MergeReport::default();
    let mut rule_terms: Vec<Term> = Vec::new();
    let weights = WordWeights::new(units.iter().flat_map(|u| &u.definition.variables));
    for unit in units {
        let span = unit.span.index;
        // Symbol renames for this unit: variables, types' values; type names separately.
        let mut symbols: BTreeMap<String, String> = BTreeMap::new();
        let mut type_names: BTreeMap<String, String> = BTreeMap::new();
        for t in &unit.definition.types {
            let values = |t: &TypeDefinition| {
                t.values
                    .iter()
                    .map(|v| v.value.clone())
                    .collect::<BTreeSet<_>>()
            };
            if let Some(same) = out.types.iter().find(|o| values(o) == values(t)) {
                if same.name != t.name {
                    type_names.insert(t.name.clone(), same.name.clone());
                }
                continue;
            }
            // One holds all of the other's values: a unit extending a type it was shown, or
            // keeping only the values its span needs.
            let within = |a: &TypeDefinition, b: &TypeDefinition| {
                a.values
                    .iter()
                    .all(|x| b.values.iter().any(|v| v.value == x.value))
            };
            let extends = |o: &TypeDefinition| o.name == t.name && (within(o, t) || within(t, o));
            if let Some(i) = out.types.iter().position(extends) {
                // The same name declared again with more of the values, or some of them: the
                // unit's rules, and the variables of that type it did not declare again, mean
                // the one type. Renamed instead, those variables kept the old type while the
                // unit's values went to the new one, and the unit's rules, which type-checked
                // alone, no longer did. The type holds every value either gave it: more values
                // only admit more cases, so nothing becomes provable that was not. A
                // same-named type sharing neither way (another `Status`) is another type,
                // renamed below: merged, its variables could be unified with the first type's.
                let others: BTreeSet<String> = out
                    .types
                    .iter()
                    .enumerate()
                    .filter(|(j, _)| *j != i)
                    .flat_map(|(_, o)| o.values.iter().map(|v| v.value.clone()))
                    .collect();
                let mut added = Vec::new();
                for v in &t.values {
                    if out.types[i].values.iter().any(|o| o.value == v.value) {
                        continue;
                    }
                    let mut v = v.clone();
                    if others.contains(&v.value) {
                        let own = &out.types[i].values;
                        let taken =
                            |n: &str| others.contains(n) || own.iter().any(|o| o.value == n);
                        let new = fresh(&v.value, &taken);
                        report.renamed.push((span, v.value.clone(), new.clone()));
                        symbols.insert(v.value.clone(), new.clone());
                        v.value = new;
                    }
                    added.push(v.value.clone());
                    out.types[i].values.push(v);
                }
                if !added.is_empty() {
                    report.extended.push((span, t.name.clone(), added));
                }
                continue;
            }
            let mut t = t.clone();
            let taken_type = |n: &str| out.types.iter().any(|o| o.name == n);
            if taken_type(&t.name) {
                let new = fresh(&t.name, &taken_type);
                report.renamed.push((span, t.name.clone(), new.clone()));
                type_names.insert(t.name.clone(), new.clone());
                t.name = new;
            }
            let all_values: BTreeSet<String> = out
                .types
                .iter()
                .flat_map(|o| o.values.iter().map(|v| v.value.clone()))
                .collect();
            for v in &mut t.values {
                if all_values.contains(&v.value) {
                    let taken = |n: &str| all_values.contains(n);
                    let new = fresh(&v.value, &taken);
                    report.renamed.push((span, v.value.clone(), new.clone()));
                    symbols.insert(v.value.clone(), new.clone());
                    v.value = new;
                }
            }
            out.types.push(t);
        }
        // A unit's own variables were checked to be distinct: compare with earlier units only.
        let earlier = out.variables.len();
        for v in &unit.definition.variables {
            let mut v = v.clone();
            if let Some(n) = type_names.get(&v.type_name) {
                v.type_name = n.clone();
            }
            if let Some(existing) = out.variables.iter().find(|o| o.name == v.name) {
                let alike = match (&existing.description, &v.description) {
                    (Some(a), Some(b)) => {
                        cosine(&words(a), &words(b), &weights) >= SAME_NAME_THRESHOLD
                    }
                    _ => true,
                };
                if same_type(&existing.type_name, &v.type_name) && alike {
                    continue;
                }
                let taken = |n: &str| out.variables.iter().any(|o| o.name == n);
                let new = fresh(&v.name, &taken);
                report.renamed.push((span, v.name.clone(), new.clone()));
                symbols.insert(v.name.clone(), new.clone());
                v.name = new;
                out.variables.push(v);
                continue;
            }
            let best = out.variables[..earlier]
                .iter()
                .filter(|o| same_type(&o.type_name, &v.type_name))
                .map(|o| (similarity(o, &v, &weights), o))
                .max_by(|a, b| a.0.total_cmp(&b.0));
            match best {
                Some((score, o)) if score >= UNIFY_THRESHOLD => {
                    report.unified.push((span, v.name.clone(), o.name.clone()));
                    symbols.insert(v.name.clone(), o.name.clone());
                }
                _ => out.variables.push(v),
            }
        }
        for r in &unit.definition.rules {
            let mut r = r.clone();
            if let Ok(term) = parse_term(&r.expression) {
                let term = rename(&term, &symbols);
                if rule_terms.contains(&term) {
                    report.duplicates_dropped.push(r.id.clone());
                    continue;
                }
                r.expression = term.to_string();
                rule_terms.push(term);
            }
            if out.rules.iter().any(|o| o.id == r.id) {
                let taken = |n: &str| out.rules.iter().any(|o| o.id == n);
                r.id = fresh(&r.id, &taken);
            }
            r.extra.insert("source".into(), source_of(&unit.span));
            out.rules.push(r);
        }
    }
    (out, report)
}

fn source_of(span: &Span) -> serde_json::Value {
    let mut v = json!({
        "span": span.index,
        "lines": [span.first_line, span.last_line],
        "text": span.text,
    });
    if let Some(h) = &span.heading {
        v["section"] = json!(h);
    }
    v
}

#[cfg(test)]
mod tests {
    use super::*;

    fn unit(index: usize, json: &str) -> PolicyUnit {
        PolicyUnit {
            span: Span {
                index,
                heading: None,
                text: format!("span {index}"),
                first_line: index,
                last_line: index,
            },
            definition: PolicyDefinition::from_json(json).unwrap(),
        }
    }

    #[test]
    fn splits_paragraphs_under_headings() {
        let doc = "# Title\n\n## Fees\nThe fee is $50.\nIt is due daily.\n\nSecond paragraph.\n\n## Tax\n\nTax is 10%.\n";
        let spans = split_spans(doc);
        assert_eq!(spans.len(), 3);
        assert_eq!(spans[0].heading.as_deref(), Some("Fees"));
        assert_eq!(spans[0].text, "The fee is $50.\nIt is due daily.");
        assert_eq!((spans[0].first_line, spans[0].last_line), (4, 5));
        assert_eq!(spans[1].label(), "Fees (line 7)");
        assert_eq!(spans[2].heading.as_deref(), Some("Tax"));
        assert_eq!(spans[2].index, 3);
        assert!(split_spans("\n# Only a title\n\n").is_empty());
    }

    #[test]
    fn unifies_similar_variables_renames_clashes_and_drops_duplicates() {
        let a = unit(
            1,
            r#"{"variables": [
                {"name": "finalAdmissionFee", "type": "REAL", "description": "The admission fee after discounts plus the discount processing fee, before tax"},
                {"name": "fee", "type": "REAL", "description": "The regular admission fee in dollars"}],
              "rules": [{"id": "R", "expression": "(>= finalAdmissionFee fee)"}]}"#,
        );
        let b = unit(
            2,
            r#"{"variables": [
                {"name": "finalFee", "type": "REAL", "description": "The final admission fee after discounts plus the processing fee, before tax"},
                {"name": "fee", "type": "REAL", "description": "Flat processing charge whenever a discount applies"},
                {"name": "finalAdmissionFee", "type": "REAL", "description": "The admission fee after discounts plus the discount processing fee, before tax"}],
              "rules": [{"id": "R", "expression": "(>= finalFee  fee)"},
                        {"id": "AGAIN", "expression": "(>= finalAdmissionFee fee)"},
                        {"id": "DUP", "expression": "(>= finalFee finalAdmissionFee)"}]}"#,
        );
        let (def, report) = merge_units(&[a, b]);
        let names: Vec<&str> = def.variables.iter().map(|v| v.name.as_str()).collect();
        assert_eq!(names, vec!["finalAdmissionFee", "fee", "fee_2"]);
        assert_eq!(
            report.unified,
            vec![(2, "finalFee".into(), "finalAdmissionFee".into())]
        );
        assert_eq!(report.renamed, vec![(2, "fee".into(), "fee_2".into())]);
        let rules: Vec<(&str, &str)> = def
            .rules
            .iter()
            .map(|r| (r.id.as_str(), r.expression.as_str()))
            .collect();
        assert_eq!(
            rules,
            vec![
                ("R", "(>= finalAdmissionFee fee)"),
                ("R_2", "(>= finalAdmissionFee fee_2)"),
                ("DUP", "(>= finalAdmissionFee finalAdmissionFee)"),
            ]
        );
        assert_eq!(report.duplicates_dropped, vec!["AGAIN"]);
        assert_eq!(def.rules[1].extra["source"]["span"], 2);
        // The merged definition is a valid policy.
        PolicyModel::from_definition(def, None).unwrap();
    }

    #[test]
    fn types_with_the_same_values_are_one_type_and_clashing_values_are_renamed() {
        let a = unit(
            1,
            r#"{"types": [{"name": "AgeClass", "values": [{"value": "SENIOR"}, {"value": "ADULT"}]}],
                "variables": [{"name": "ageClass", "type": "AgeClass", "description": "age category"}],
                "rules": []}"#,
        );
        let b = unit(
            2,
            r#"{"types": [{"name": "Category", "values": [{"value": "ADULT"}, {"value": "SENIOR"}]}],
                "variables": [{"name": "visitorCategory", "type": "Category", "description": "ticket category"}],
                "rules": [{"id": "C", "expression": "(=> (= visitorCategory SENIOR) (= ageClass SENIOR))"}]}"#,
        );
        let c = unit(
            3,
            r#"{"types": [{"name": "Ticket", "values": [{"value": "ADULT"}, {"value": "CHILD"}]}],
                "variables": [{"name": "ticket", "type": "Ticket", "description": "ticket kind"}],
                "rules": [{"id": "T", "expression": "(distinct ticket ADULT)"}]}"#,
        );
        let (def, report) = merge_units(&[a, b, c]);
        let types: Vec<&str> = def.types.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(types, vec!["AgeClass", "Ticket"]);
        assert_eq!(def.variables[1].type_name, "AgeClass");
        assert_eq!(report.renamed, vec![(3, "ADULT".into(), "ADULT_2".into())]);
        assert_eq!(def.rules[1].expression, "(distinct ticket ADULT_2)");
        PolicyModel::from_definition(def, None).unwrap();
    }

    /// A unit that declares a type of its context again with a value more extends that type:
    /// renamed (`AgeClass_2`, `ADULT_2`), the unit's rules about the context's variable no
    /// longer type-checked in the merged policy.
    #[test]
    fn a_type_declared_again_with_more_values_is_extended() {
        let a = unit(
            1,
            r#"{"types": [{"name": "AgeClass", "values": [{"value": "CHILD"}, {"value": "ADULT"}]}],
                "variables": [{"name": "ageClass", "type": "AgeClass", "description": "age category"},
                              {"name": "age", "type": "INT", "description": "age in years"}],
                "rules": [{"id": "KID", "expression": "(=> (< age 12) (= ageClass CHILD))"}]}"#,
        );
        let b = unit(
            2,
            r#"{"types": [{"name": "AgeClass", "values": [{"value": "CHILD"}, {"value": "ADULT"},
                                                         {"value": "SENIOR", "description": "65 and over"}]}],
                "variables": [],
                "rules": [{"id": "OLD", "expression": "(=> (>= age 65) (= ageClass SENIOR))"},
                          {"id": "MID", "expression": "(=> (and (>= age 12) (< age 65)) (= ageClass ADULT))"}]}"#,
        );
        let (def, report) = merge_units(&[a, b]);
        assert_eq!(def.types.len(), 1, "{def:?}");
        let values: Vec<&str> = def.types[0]
            .values
            .iter()
            .map(|v| v.value.as_str())
            .collect();
        assert_eq!(values, vec!["CHILD", "ADULT", "SENIOR"]);
        assert!(report.renamed.is_empty(), "{report:?}");
        assert_eq!(
            report.extended,
            vec![(2, "AgeClass".into(), vec!["SENIOR".into()])]
        );
        let rules: Vec<&str> = def.rules.iter().map(|r| r.expression.as_str()).collect();
        assert_eq!(
            rules[1..],
            [
                "(=> (>= age 65) (= ageClass SENIOR))",
                "(=> (and (>= age 12) (< age 65)) (= ageClass ADULT))"
            ]
        );
        PolicyModel::from_definition(def, None).unwrap();
    }

    /// A same-named type sharing values neither way is another type (an account's `Status`
    /// and an order's): renamed, not merged, so that its variables are not unified with the
    /// first type's. One with some of the first one's values is the same type (a unit keeps
    /// the values its span needs).
    #[test]
    fn a_same_named_type_with_other_values_is_another_type() {
        let a = unit(
            1,
            r#"{"types": [{"name": "Status", "values": [{"value": "ACTIVE"}, {"value": "CLOSED"}]}],
                "variables": [{"name": "accountStatus", "type": "Status", "description": "the account status"}],
                "rules": []}"#,
        );
        let b = unit(
            2,
            r#"{"types": [{"name": "Status", "values": [{"value": "SHIPPED"}, {"value": "PENDING"}]}],
                "variables": [{"name": "orderStatus", "type": "Status", "description": "the order status"}],
                "rules": [{"id": "S", "expression": "(distinct orderStatus SHIPPED)"}]}"#,
        );
        let (def, report) = merge_units(&[a.clone(), b.clone()]);
        let types: Vec<&str> = def.types.iter().map(|t| t.name.as_str()).collect();
        assert_eq!(types, vec!["Status", "Status_2"]);
        assert!(report.extended.is_empty(), "{report:?}");
        assert_eq!(def.variables[1].type_name, "Status_2");
        PolicyModel::from_definition(def, None).unwrap();
        let c = unit(
            3,
            r#"{"types": [{"name": "Status", "values": [{"value": "ACTIVE"}]}],
                "variables": [{"name": "accountStatus", "type": "Status", "description": "the account status"}],
                "rules": [{"id": "A", "expression": "(=> (= accountStatus ACTIVE) (distinct orderStatus SHIPPED))"}]}"#,
        );
        let (def, report) = merge_units(&[a, b, c]);
        assert_eq!(def.types.len(), 2, "{def:?}");
        assert_eq!(def.variables.len(), 2, "{def:?}");
        assert!(
            report.renamed.iter().all(|(span, _, _)| *span == 2),
            "{report:?}"
        );
        assert_eq!(
            def.rules.last().unwrap().expression,
            "(=> (= accountStatus ACTIVE) (distinct orderStatus SHIPPED))"
        );
        PolicyModel::from_definition(def, None).unwrap();
    }

    #[test]
    fn unit_errors_name_the_rule_and_the_problem() {
        let context = PolicyDefinition::from_json(
            r#"{"variables": [{"name": "x", "type": "INT", "description": "x"}], "rules": []}"#,
        )
        .unwrap();
        let errors = parse_unit(
            &context,
            r#"```json
{"variables": [{"name": "b", "type": "BOOL", "description": "b"}],
 "rules": [{"id": "OK", "expression": "(=> b (> x 1))"}, {"id": "BAD", "expression": "(=> b (> y 1))"}]}
```"#,
            &FormalizeOptions::default(),
        )
        .unwrap_err();
        assert_eq!(errors.len(), 1, "{errors:?}");
        assert!(errors[0].contains("rule `BAD`") && errors[0].contains("unknown variable `y`"));
        // A unit past the policy's limits is sent back before any work on it.
        let many: Vec<serde_json::Value> = (0..201)
            .map(|i| serde_json::json!({"name": format!("v{i}"), "type": "BOOL"}))
            .collect();
        let errors = parse_unit(
            &context,
            &serde_json::json!({"variables": many}).to_string(),
            &FormalizeOptions::default(),
        )
        .unwrap_err();
        assert!(errors[0].contains("at most 200"), "{errors:?}");
        // Declared again, names count once: 150 in the context and 60 of them again is 150.
        let names: Vec<serde_json::Value> = (0..150)
            .map(|i| serde_json::json!({"name": format!("v{i}"), "type": "BOOL"}))
            .collect();
        let big = PolicyDefinition::from_json(&serde_json::json!({"variables": names}).to_string())
            .unwrap();
        let again = serde_json::json!({"variables": &names[..60]}).to_string();
        assert!(parse_unit(&big, &again, &FormalizeOptions::default()).is_ok());
        assert!(
            parse_unit(&context, "no JSON here", &FormalizeOptions::default()).unwrap_err()[0]
                .contains("not JSON")
        );
    }
}
