//! Amazon Bedrock's control plane for Automated Reasoning policies, through the AWS SDK for
//! Rust: `proofgate policy pull` fetches a policy definition (a version's export, or the
//! latest completed build workflow's definition asset).
//!
//! As with the guardrail, the definition is read from the raw response body with the core's
//! own types, so members this SDK does not know survive the round trip.

use crate::bedrock::{sdk_config, RawBody};
use aws_sdk_bedrock::types::{
    AutomatedReasoningPolicyBuildResultAssetType, AutomatedReasoningPolicyBuildWorkflowStatus,
};
use proofgate_core::policy::PolicyDefinition;

/// Where the control plane is: the same settings as the guardrail's (`[validator.bedrock]`).
#[derive(Debug, Clone, Default)]
pub struct ControlPlaneConfig {
    /// AWS region (default: the SDK's usual sources).
    pub region: Option<String>,
    /// Endpoint override (tests, VPC endpoints).
    pub endpoint_url: Option<String>,
    /// Attempts on throttling and 5xx, including the first.
    pub max_attempts: u32,
}

/// Which definition to pull.
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum PolicySource {
    /// The policy's working draft, or a numbered version (ExportAutomatedReasoningPolicyVersion);
    /// an empty draft falls back to the latest completed build workflow.
    Version(Option<String>),
    /// A build workflow's definition asset: one id, or `None` for the latest completed one.
    BuildWorkflow(Option<String>),
}

/// A pulled definition and where it came from.
#[derive(Debug, Clone)]
pub struct PulledPolicy {
    /// The definition, with every member AWS sent.
    pub definition: PolicyDefinition,
    /// `export of ARN` or `build workflow ID of ARN`, for people.
    pub origin: String,
}

/// A pull that failed.
#[derive(Debug, thiserror::Error)]
pub enum PullError {
    /// The ARN is not an Automated Reasoning policy ARN.
    #[error("`{0}` is not an Automated Reasoning policy ARN (arn:aws:bedrock:REGION:ACCOUNT:automated-reasoning-policy/ID, optionally :VERSION)")]
    BadArn(String),
    /// The service could not be reached, refused, or kept failing.
    #[error("Bedrock {operation} for {arn} failed: {reason}")]
    Service {
        /// The API operation.
        operation: &'static str,
        /// The policy.
        arn: String,
        /// The SDK's error, with its context.
        reason: String,
    },
    /// The response did not hold a policy definition.
    #[error("Bedrock {operation} for {arn} returned no usable policy definition: {reason}")]
    BadResponse {
        /// The API operation.
        operation: &'static str,
        /// The policy.
        arn: String,
        /// What was wrong.
        reason: String,
    },
    /// No build workflow has completed.
    #[error("{0} has no completed build workflow to take a definition from")]
    NoCompletedBuild(String),
}

/// `arn` with `:version` appended (a version already in the ARN must match).
fn versioned_arn(arn: &str, version: Option<&str>) -> Result<String, PullError> {
    let (_, tail) = arn
        .split_once(":automated-reasoning-policy/")
        .filter(|(head, _)| head.starts_with("arn:"))
        .ok_or_else(|| PullError::BadArn(arn.to_string()))?;
    let (id, existing) = match tail.split_once(':') {
        Some((id, v)) => (id, Some(v)),
        None => (tail, None),
    };
    if id.is_empty() {
        return Err(PullError::BadArn(arn.to_string()));
    }
    Ok(match (existing, version) {
        (Some(v), Some(w)) if v != w => {
            return Err(PullError::BadArn(format!(
                "{arn} (it names version {v}, but --version says {w})"
            )))
        }
        (None, Some(w)) => format!("{arn}:{w}"),
        _ => arn.to_string(),
    })
}

/// The policy ARN without a version suffix (build workflows belong to the policy).
fn unversioned_arn(arn: &str) -> &str {
    match arn.split_once(":automated-reasoning-policy/") {
        Some((head, tail)) => match tail.split_once(':') {
            Some((id, _)) => &arn[..head.len() + ":automated-reasoning-policy/".len() + id.len()],
            None => arn,
        },
        None => arn,
    }
}

fn is_empty(def: &PolicyDefinition) -> bool {
    def.types.is_empty() && def.variables.is_empty() && def.rules.is_empty()
}

/// A Bedrock control-plane client.
pub struct PolicyClient {
    client: aws_sdk_bedrock::Client,
}

impl PolicyClient {
    /// Loads AWS credentials and region the standard way, with the configured overrides.
    pub async fn new(config: &ControlPlaneConfig) -> PolicyClient {
        let sdk = sdk_config(
            config.region.as_deref(),
            config.endpoint_url.as_deref(),
            config.max_attempts,
        )
        .await;
        PolicyClient {
            client: aws_sdk_bedrock::Client::new(&sdk),
        }
    }

    /// Fetches the definition `source` names for the policy `arn`.
    pub async fn pull(&self, arn: &str, source: &PolicySource) -> Result<PulledPolicy, PullError> {
        match source {
            PolicySource::Version(version) => {
                let versioned = versioned_arn(arn, version.as_deref())?;
                let pulled = self.export(&versioned).await?;
                // A policy made by a build workflow keeps an empty draft until the build is
                // applied: its definition is in the build's assets.
                if version.is_none() && is_empty(&pulled.definition) {
                    return self.build_asset(arn, None).await;
                }
                Ok(pulled)
            }
            PolicySource::BuildWorkflow(id) => {
                versioned_arn(arn, None)?;
                self.build_asset(arn, id.as_deref()).await
            }
        }
    }

    async fn export(&self, arn: &str) -> Result<PulledPolicy, PullError> {
        const OP: &str = "ExportAutomatedReasoningPolicyVersion";
        let raw = RawBody::default();
        self.client
            .export_automated_reasoning_policy_version()
            .policy_arn(arn)
            .customize()
            .interceptor(raw.clone())
            .send()
            .await
            .map_err(|e| service_error(OP, arn, &e))?;
        Ok(PulledPolicy {
            definition: definition_from(OP, arn, raw)?,
            origin: format!("export of {arn}"),
        })
    }

    async fn build_asset(&self, arn: &str, id: Option<&str>) -> Result<PulledPolicy, PullError> {
        const OP: &str = "GetAutomatedReasoningPolicyBuildWorkflowResultAssets";
        let policy = unversioned_arn(arn);
        let id = match id {
            Some(id) => id.to_string(),
            None => self.latest_completed_build(policy).await?,
        };
        let raw = RawBody::default();
        self.client
            .get_automated_reasoning_policy_build_workflow_result_assets()
            .policy_arn(policy)
            .build_workflow_id(&id)
            .asset_type(AutomatedReasoningPolicyBuildResultAssetType::PolicyDefinition)
            .customize()
            .interceptor(raw.clone())
            .send()
            .await
            .map_err(|e| service_error(OP, policy, &e))?;
        Ok(PulledPolicy {
            definition: definition_from(OP, policy, raw)?,
            origin: format!("build workflow {id} of {policy}"),
        })
    }

    /// The most recently updated COMPLETED build workflow, over every page.
    async fn latest_completed_build(&self, policy: &str) -> Result<String, PullError> {
        const OP: &str = "ListAutomatedReasoningPolicyBuildWorkflows";
        let mut best: Option<(aws_sdk_bedrock::primitives::DateTime, String)> = None;
        let mut token: Option<String> = None;
        // A bound on pages, so a misbehaving endpoint cannot loop us forever.
        for _ in 0..100 {
            let out = self
                .client
                .list_automated_reasoning_policy_build_workflows()
                .policy_arn(policy)
                .set_next_token(token.take())
                .send()
                .await
                .map_err(|e| service_error(OP, policy, &e))?;
            for w in out.automated_reasoning_policy_build_workflow_summaries() {
                if *w.status() != AutomatedReasoningPolicyBuildWorkflowStatus::Completed {
                    continue;
                }
                let newer = best
                    .as_ref()
                    .is_none_or(|(at, _)| w.updated_at().secs() > at.secs());
                if newer {
                    best = Some((*w.updated_at(), w.build_workflow_id().to_string()));
                }
            }
            token = out.next_token().map(str::to_string);
            if token.is_none() {
                break;
            }
        }
        best.map(|(_, id)| id)
            .ok_or_else(|| PullError::NoCompletedBuild(policy.to_string()))
    }
}

fn service_error<E, R>(
    operation: &'static str,
    arn: &str,
    e: &aws_sdk_bedrock::error::SdkError<E, R>,
) -> PullError
where
    E: std::error::Error + 'static,
    R: std::fmt::Debug,
{
    PullError::Service {
        operation,
        arn: arn.to_string(),
        reason: aws_sdk_bedrock::error::DisplayErrorContext(e).to_string(),
    }
}

fn definition_from(
    operation: &'static str,
    arn: &str,
    raw: RawBody,
) -> Result<PolicyDefinition, PullError> {
    let bad = |reason: String| PullError::BadResponse {
        operation,
        arn: arn.to_string(),
        reason,
    };
    let bytes = raw
        .take()
        .ok_or_else(|| bad("the response body was not captured".into()))?;
    let text = String::from_utf8(bytes).map_err(|e| bad(format!("not UTF-8: {e}")))?;
    PolicyDefinition::from_json(&text).map_err(|e| bad(e.to_string()))
}

#[cfg(test)]
mod tests {
    use super::*;

    const ARN: &str =
        "arn:aws:bedrock:us-east-1:123456789012:automated-reasoning-policy/abcdefghijkl";

    #[test]
    fn versions_are_appended_to_the_arn() {
        assert_eq!(versioned_arn(ARN, None).unwrap(), ARN);
        assert_eq!(versioned_arn(ARN, Some("3")).unwrap(), format!("{ARN}:3"));
        let v3 = format!("{ARN}:3");
        assert_eq!(versioned_arn(&v3, Some("3")).unwrap(), v3);
        assert!(versioned_arn(&v3, Some("4"))
            .unwrap_err()
            .to_string()
            .contains("--version says 4"));
        assert!(matches!(
            versioned_arn("abcdefghijkl", None),
            Err(PullError::BadArn(_))
        ));
        assert_eq!(unversioned_arn(&v3), ARN);
        assert_eq!(unversioned_arn(ARN), ARN);
    }
}
