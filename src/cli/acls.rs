//! `shardlog acls list|add|remove`: Kafka ACLs without a Java tool, over the Kafka protocol
//! (DescribeAcls, CreateAcls, DeleteAcls), with `kafka-acls.sh`'s flags and output:
//! `--allow-principal`/`--deny-principal`, `--operation`, `--host`, one resource
//! (`--topic`, `--group`, `--transactional-id`, `--cluster`) and `--resource-pattern-type`
//! (LITERAL by default for add/remove, ANY for list; MATCH lists what applies to a name).
//! `--user`/`--password` authenticate on a SASL_PLAINTEXT listener (the principal needs
//! ALTER on the cluster to change ACLs, DESCRIBE to list them, or to be a super user).
//!
//! Runs in the CLI process (blocking sockets through [`crate::protocol::blocking`]).

use std::collections::BTreeMap;
use std::io::Write as _;

use anyhow::{anyhow, bail};
use clap::{Args, Subcommand};
use kafka_protocol::messages::create_acls_request::AclCreation;
use kafka_protocol::messages::delete_acls_request::DeleteAclsFilter;
use kafka_protocol::messages::{
    ApiKey, CreateAclsRequest, CreateAclsResponse, DeleteAclsRequest, DeleteAclsResponse,
    DescribeAclsRequest, DescribeAclsResponse,
};
use kafka_protocol::protocol::StrBytes;

use super::configs::check;
use super::sasl::SaslArgs;
use crate::authz::{Acl, Operation, PatternType, Permission, ResourceType, CLUSTER_NAME};
use crate::cli::ClientArgs;

const CLIENT_ID: &str = "shardlog-acls";
/// Kafka 4.1's ACL API version.
const ACLS_VERSION: i16 = 3;

#[derive(Args, Debug, Clone)]
pub struct AclsArgs {
    /// The broker (`--bootstrap-server`, `--bootstrap`, `-b`), accepted anywhere on the line.
    #[command(flatten)]
    pub client: ClientArgs,
    #[command(flatten)]
    pub sasl: SaslArgs,
    #[command(subcommand)]
    pub command: AclsCommand,
}

/// The resource an ACL names (at most one).
#[derive(Args, Debug, Clone, Default)]
pub struct ResourceArgs {
    #[arg(long, group = "resource")]
    pub topic: Option<String>,
    #[arg(long, group = "resource")]
    pub group: Option<String>,
    #[arg(long, group = "resource")]
    pub transactional_id: Option<String>,
    /// The cluster (`kafka-cluster`).
    #[arg(long, group = "resource")]
    pub cluster: bool,
    /// LITERAL or PREFIXED (add, remove); also ANY or MATCH (list, remove).
    #[arg(long, value_name = "TYPE")]
    pub resource_pattern_type: Option<String>,
}

/// Who and what (add, remove).
#[derive(Args, Debug, Clone, Default)]
pub struct EntryArgs {
    /// `User:<name>` (or `User:*`) allowed; repeatable.
    #[arg(long, value_name = "PRINCIPAL")]
    pub allow_principal: Vec<String>,
    /// `User:<name>` (or `User:*`) denied; repeatable.
    #[arg(long, value_name = "PRINCIPAL")]
    pub deny_principal: Vec<String>,
    /// Operations, repeatable or comma-separated (Read, Write, Describe, All, ...).
    #[arg(long, value_delimiter = ',')]
    pub operation: Vec<String>,
    /// The client host the ACL applies to.
    #[arg(long, default_value = "*")]
    pub host: String,
}

#[derive(Subcommand, Debug, Clone)]
pub enum AclsCommand {
    /// The ACLs of a resource (or every ACL), grouped by resource pattern.
    List {
        #[command(flatten)]
        resource: ResourceArgs,
        /// Only this principal's.
        #[arg(long)]
        principal: Option<String>,
    },
    /// Add ALLOW/DENY ACLs for principals, operations and one resource.
    Add {
        #[command(flatten)]
        resource: ResourceArgs,
        #[command(flatten)]
        entry: EntryArgs,
    },
    /// Remove the matching ACLs of a resource (all of them without principals).
    Remove {
        #[command(flatten)]
        resource: ResourceArgs,
        #[command(flatten)]
        entry: EntryArgs,
    },
}

fn sb(s: &str) -> StrBytes {
    StrBytes::from_string(s.to_string())
}

impl ResourceArgs {
    /// (type, name) of the one resource named, if any.
    fn resource(&self) -> Option<(ResourceType, String)> {
        let named = [
            (ResourceType::Topic, &self.topic),
            (ResourceType::Group, &self.group),
            (ResourceType::TransactionalId, &self.transactional_id),
        ];
        named
            .into_iter()
            .find_map(|(t, n)| n.clone().map(|n| (t, n)))
            .or_else(|| self.cluster.then(|| (ResourceType::Cluster, CLUSTER_NAME.to_string())))
    }

    fn pattern(&self, default: PatternType) -> anyhow::Result<PatternType> {
        match &self.resource_pattern_type {
            None => Ok(default),
            Some(t) => PatternType::parse(t)
                .filter(|p| !matches!(p, PatternType::Unknown))
                .ok_or_else(|| anyhow!("unknown --resource-pattern-type {t}")),
        }
    }
}

/// (principal, permission) pairs of the flags.
fn principals(entry: &EntryArgs) -> anyhow::Result<Vec<(String, Permission)>> {
    let mut out = Vec::new();
    for (list, permission) in
        [(&entry.allow_principal, Permission::Allow), (&entry.deny_principal, Permission::Deny)]
    {
        for p in list {
            if p.split_once(':').is_none_or(|(kind, _)| kind.is_empty()) {
                bail!("principal {p}: expected Type:name, e.g. User:alice");
            }
            out.push((p.clone(), permission));
        }
    }
    Ok(out)
}

fn operations(entry: &EntryArgs, default: Operation) -> anyhow::Result<Vec<Operation>> {
    if entry.operation.is_empty() {
        return Ok(vec![default]);
    }
    entry
        .operation
        .iter()
        .map(|o| {
            Operation::parse(o.trim())
                .filter(|op| !matches!(op, Operation::Unknown | Operation::Any))
                .ok_or_else(|| anyhow!("unknown --operation {o}"))
        })
        .collect()
}

/// Kafka's `--list` output: each resource pattern, then its ACLs.
fn render(resp: &DescribeAclsResponse) -> String {
    let mut by_pattern: BTreeMap<String, Vec<String>> = BTreeMap::new();
    for r in &resp.resources {
        let pattern = format!(
            "ResourcePattern(resourceType={}, name={}, patternType={})",
            ResourceType::from_code(r.resource_type),
            r.resource_name.as_str(),
            PatternType::from_code(r.pattern_type)
        );
        let lines = by_pattern.entry(pattern).or_default();
        for a in &r.acls {
            lines.push(format!(
                "\t(principal={}, host={}, operation={}, permissionType={})",
                a.principal.as_str(),
                a.host.as_str(),
                Operation::from_code(a.operation),
                Permission::from_code(a.permission_type)
            ));
        }
    }
    let mut out = String::new();
    for (pattern, mut lines) in by_pattern {
        lines.sort();
        out.push_str(&format!("Current ACLs for resource `{pattern}`: \n"));
        for l in lines {
            out.push_str(&l);
            out.push('\n');
        }
        out.push('\n');
    }
    out
}

/// Runs the command and prints its report on stdout.
pub fn run(args: AclsArgs) -> anyhow::Result<()> {
    args.sasl.install();
    let mut conn = super::sasl::connect(args.client.bootstrap(), CLIENT_ID)?;
    let mut out = std::io::stdout().lock();
    match args.command {
        AclsCommand::List { resource, principal } => {
            let pattern = resource.pattern(PatternType::Any)?;
            let (rt, name) =
                resource.resource().map_or((ResourceType::Any, None), |(t, n)| (t, Some(sb(&n))));
            let req = DescribeAclsRequest::default()
                .with_resource_type_filter(rt.code())
                .with_resource_name_filter(name)
                .with_pattern_type_filter(pattern.code())
                .with_principal_filter(principal.as_deref().map(sb))
                .with_host_filter(None)
                .with_operation(Operation::Any.code())
                .with_permission_type(Permission::Any.code());
            let resp: DescribeAclsResponse = conn.call(ApiKey::DescribeAcls, ACLS_VERSION, &req)?;
            check(resp.error_code, resp.error_message.as_deref())?;
            out.write_all(render(&resp).as_bytes())?;
        }
        AclsCommand::Add { resource, entry } => {
            let Some((rt, name)) = resource.resource() else {
                bail!("add needs a resource: --topic, --group, --transactional-id or --cluster");
            };
            let pattern = resource.pattern(PatternType::Literal)?;
            let who = principals(&entry)?;
            if who.is_empty() {
                bail!("add needs --allow-principal or --deny-principal");
            }
            let mut acls = Vec::new();
            for (principal, permission) in &who {
                for op in operations(&entry, Operation::All)? {
                    acls.push(Acl {
                        resource_type: rt,
                        resource_name: name.clone(),
                        pattern,
                        principal: principal.clone(),
                        host: entry.host.clone(),
                        operation: op,
                        permission: *permission,
                    });
                }
            }
            let creations = acls
                .iter()
                .map(|a| {
                    AclCreation::default()
                        .with_resource_type(a.resource_type.code())
                        .with_resource_name(sb(&a.resource_name))
                        .with_resource_pattern_type(a.pattern.code())
                        .with_principal(sb(&a.principal))
                        .with_host(sb(&a.host))
                        .with_operation(a.operation.code())
                        .with_permission_type(a.permission.code())
                })
                .collect();
            let req = CreateAclsRequest::default().with_creations(creations);
            let resp: CreateAclsResponse = conn.call(ApiKey::CreateAcls, ACLS_VERSION, &req)?;
            for r in &resp.results {
                check(r.error_code, r.error_message.as_deref())?;
            }
            for a in &acls {
                writeln!(out, "Added {a}")?;
            }
        }
        AclsCommand::Remove { resource, entry } => {
            let Some((rt, name)) = resource.resource() else {
                bail!("remove needs a resource: --topic, --group, --transactional-id or --cluster");
            };
            let pattern = resource.pattern(PatternType::Literal)?;
            let who = principals(&entry)?;
            let base = DeleteAclsFilter::default()
                .with_resource_type_filter(rt.code())
                .with_resource_name_filter(Some(sb(&name)))
                .with_pattern_type_filter(pattern.code())
                .with_principal_filter(None)
                .with_host_filter(None)
                .with_operation(Operation::Any.code())
                .with_permission_type(Permission::Any.code());
            let mut filters = Vec::new();
            if who.is_empty() {
                filters.push(base);
            } else {
                for (principal, permission) in &who {
                    for op in operations(&entry, Operation::Any)? {
                        filters.push(
                            base.clone()
                                .with_principal_filter(Some(sb(principal)))
                                .with_host_filter(Some(sb(&entry.host)))
                                .with_operation(op.code())
                                .with_permission_type(permission.code()),
                        );
                    }
                }
            }
            let req = DeleteAclsRequest::default().with_filters(filters);
            let resp: DeleteAclsResponse = conn.call(ApiKey::DeleteAcls, ACLS_VERSION, &req)?;
            let mut removed = 0;
            for r in &resp.filter_results {
                check(r.error_code, r.error_message.as_deref())?;
                for m in &r.matching_acls {
                    check(m.error_code, m.error_message.as_deref())?;
                    removed += 1;
                }
            }
            writeln!(out, "Removed {removed} ACL(s).")?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use kafka_protocol::messages::describe_acls_response::{AclDescription, DescribeAclsResource};

    use super::*;

    #[test]
    fn list_output_is_kafkas() {
        let resp =
            DescribeAclsResponse::default().with_resources(vec![DescribeAclsResource::default()
                .with_resource_type(ResourceType::Topic.code())
                .with_resource_name(sb("orders"))
                .with_pattern_type(PatternType::Literal.code())
                .with_acls(vec![AclDescription::default()
                    .with_principal(sb("User:alice"))
                    .with_host(sb("*"))
                    .with_operation(Operation::Write.code())
                    .with_permission_type(Permission::Allow.code())])]);
        assert_eq!(
            render(&resp),
            "Current ACLs for resource `ResourcePattern(resourceType=TOPIC, name=orders, \
             patternType=LITERAL)`: \n\t(principal=User:alice, host=*, operation=WRITE, \
             permissionType=ALLOW)\n\n"
        );
    }

    #[test]
    fn flags_are_checked() {
        let entry = EntryArgs {
            allow_principal: vec!["alice".into()],
            operation: vec!["Read".into()],
            ..EntryArgs::default()
        };
        assert!(principals(&entry).is_err());
        let entry = EntryArgs { operation: vec!["Reed".into()], ..EntryArgs::default() };
        assert!(operations(&entry, Operation::All).is_err());
        let entry = EntryArgs {
            operation: vec!["idempotent-write".into(), "DESCRIBE".into()],
            ..EntryArgs::default()
        };
        assert_eq!(
            operations(&entry, Operation::All).unwrap(),
            [Operation::IdempotentWrite, Operation::Describe]
        );
        let r = ResourceArgs { cluster: true, ..ResourceArgs::default() };
        assert_eq!(r.resource(), Some((ResourceType::Cluster, CLUSTER_NAME.to_string())));
        let r = ResourceArgs { resource_pattern_type: Some("prefixed".into()), ..r };
        assert_eq!(r.pattern(PatternType::Literal).unwrap(), PatternType::Prefixed);
    }
}
