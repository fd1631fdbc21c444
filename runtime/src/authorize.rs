//! Authorization of a call on a namespace: the caller's principal (from its client certificate,
//! see [`crate::tls`]) against the namespace's grants (`access` in its config) and the
//! deployment's super-users. Off unless the deployment turns it on; once on, whatever is not
//! granted is denied.
//!
//! A denial is PERMISSION_DENIED naming the principal, the action and the namespace, and happens
//! before anything is stored. Denials are counted by namespace and action, and logged at WARN at
//! most a few times a minute: a misconfigured client retrying in a loop must not bury the log.

use std::sync::Arc;

use governor::{DefaultDirectRateLimiter, Quota, RateLimiter};
use metrics::counter;
use tonic::Status;
use wal_namespaces::{Action, Namespace};

use crate::tls::Peer;

pub const DENIALS: &str = "wal_authorization_denials_total";
/// The namespace label of a refused creation: the requested name is the caller's to choose,
/// and a label per name would let anyone grow the metrics without bound.
const NEW_NAMESPACE: &str = "(new)";

/// A server's security flags: TLS (see [`crate::tls`]) and authorization.
#[derive(Debug, Clone, Default, clap::Args)]
pub struct SecurityFlags {
    #[command(flatten)]
    pub tls: crate::tls::TlsFlags,

    /// Check every call against the namespace's grants (`access` in its config), by the
    /// principal of the client's certificate: what is not granted is denied (PERMISSION_DENIED).
    /// Needs --tls-client-ca, since principals come from client certificates.
    // Checked in `authorizer`, not with clap's `requires`: clap counts WAL_AUTHORIZE=false in
    // the environment as the flag given.
    #[arg(long, env = "WAL_AUTHORIZE", default_value_t = false)]
    pub authorize: bool,

    /// Principals allowed every action on every namespace (comma-separated), with --authorize.
    #[arg(long, env = "WAL_SUPER_USERS", value_delimiter = ',')]
    pub super_users: Vec<String>,
}

impl SecurityFlags {
    /// The TLS to serve, or `None` for plaintext; fails on files that cannot be used.
    pub fn server_tls(&self) -> Result<Option<crate::tls::ServerTls>, crate::tls::TlsError> {
        crate::tls::ServerTls::load(&self.tls)
    }

    /// The authorizer these flags ask for; refused when authorization is asked for without
    /// client certificates, where no caller would have a principal.
    pub fn authorizer(&self) -> Result<Authorizer, String> {
        match (self.authorize, &self.tls.tls_client_ca) {
            (false, _) => Ok(Authorizer::off()),
            (true, Some(_)) => Ok(Authorizer::on(self.super_users.clone())),
            (true, None) => Err(
                "--authorize needs --tls-client-ca (and --tls-cert, --tls-key): principals come from client certificates"
                    .to_owned(),
            ),
        }
    }
}

#[derive(Debug, Clone, Default)]
pub struct Authorizer {
    on: Option<Arc<On>>,
}

#[derive(Debug)]
struct On {
    super_users: Vec<String>,
    log: DefaultDirectRateLimiter,
}

impl On {
    /// The one rule: a super-user may do anything, anyone else what the namespace grants.
    fn grants(&self, principal: &str, namespace: &Namespace, action: Action) -> bool {
        self.super_users.iter().any(|s| s == principal)
            || namespace.access.allows(principal, action)
    }
}

impl Authorizer {
    /// Every call allowed: the local default, and any deployment without client certificates.
    pub fn off() -> Self {
        Self::default()
    }

    /// Calls allowed where the namespace grants them, and every call of a super-user.
    pub fn on(super_users: Vec<String>) -> Self {
        let per_minute = std::num::NonZeroU32::MIN.saturating_add(9);
        Self {
            on: Some(Arc::new(On {
                super_users,
                log: RateLimiter::direct(Quota::per_minute(per_minute)),
            })),
        }
    }

    pub fn is_on(&self) -> bool {
        self.on.is_some()
    }

    /// Whether `peer` may do `action` on `namespace`, as [`Authorizer::check`] decides, without
    /// counting or logging a denial: for a caller asking what it may do (a console greying out
    /// what it may not), which is no attempt.
    pub fn allows(&self, peer: Option<&Peer>, namespace: &Namespace, action: Action) -> bool {
        let Some(on) = &self.on else {
            return true;
        };
        peer.and_then(|p| p.principal.as_deref())
            .is_some_and(|principal| on.grants(principal, namespace, action))
    }

    /// Whether `peer` may create namespace `name`: a namespace that does not exist yet has no
    /// grants, so only a super-user may (a namespace's own config cannot grant its creation).
    pub fn check_create(
        &self,
        peer: Option<&Peer>,
        name: &str,
    ) -> Result<Option<Arc<str>>, Status> {
        let principal = peer.and_then(|p| p.principal.clone());
        let Some(on) = &self.on else {
            return Ok(principal);
        };
        match &principal {
            Some(p) if on.super_users.iter().any(|s| s == p.as_ref()) => Ok(principal),
            Some(p) => Err(self.denied(
                on,
                peer,
                NEW_NAMESPACE,
                Action::Admin,
                Status::permission_denied(format!(
                    "principal {p:?} may not create namespace {name:?}: only super-users create namespaces"
                )),
            )),
            None => Err(self.denied(
                on,
                peer,
                NEW_NAMESPACE,
                Action::Admin,
                unauthenticated(peer),
            )),
        }
    }

    /// Whether `peer` may call a service that holds no namespace config to check grants in (a
    /// region's writer): only super-users may. `scope` stands for the namespace in the metric
    /// and the log (a caller's own namespace names would let it grow the metrics unbounded).
    pub fn check_super_user(
        &self,
        peer: Option<&Peer>,
        scope: &str,
        action: Action,
    ) -> Result<Option<Arc<str>>, Status> {
        let principal = peer.and_then(|p| p.principal.clone());
        let Some(on) = &self.on else {
            return Ok(principal);
        };
        let refused = match &principal {
            Some(p) if on.super_users.iter().any(|s| s == p.as_ref()) => return Ok(principal),
            Some(p) => Status::permission_denied(format!(
                "principal {p:?} may not {action} here: {scope} lets only its --super-users in"
            )),
            None => unauthenticated(peer),
        };
        Err(self.denied(on, peer, scope, action, refused))
    }

    /// Whether `principal` is one of the super-users (always false with authorization off).
    pub fn is_super_user(&self, principal: Option<&str>) -> bool {
        match (&self.on, principal) {
            (Some(on), Some(p)) => on.super_users.iter().any(|s| s == p),
            _ => false,
        }
    }

    /// Whether `peer` may do `action` to `namespace`. Returns the caller's principal (for an
    /// audit trail) when it is known; an error is the status to answer with.
    pub fn check(
        &self,
        peer: Option<&Peer>,
        namespace: &Namespace,
        action: Action,
    ) -> Result<Option<Arc<str>>, Status> {
        let principal = peer.and_then(|p| p.principal.clone());
        let Some(on) = &self.on else {
            return Ok(principal);
        };
        let refused = match (peer, &principal) {
            (_, Some(principal)) => {
                if on.grants(principal, namespace, action) {
                    return Ok(Some(Arc::clone(principal)));
                }
                Status::permission_denied(format!(
                    "principal {principal:?} may not {action} namespace {:?}: its config's access.{action} does not grant it",
                    namespace.name
                ))
            }
            _ => unauthenticated(peer),
        };
        Err(self.denied(on, peer, &namespace.name, action, refused))
    }

    /// Counts and (rate-limited) logs a denial.
    fn denied(
        &self,
        on: &On,
        peer: Option<&Peer>,
        namespace: &str,
        action: Action,
        refused: Status,
    ) -> Status {
        counter!(DENIALS, "namespace" => namespace.to_owned(), "action" => action.as_str())
            .increment(1);
        if on.log.check().is_ok() {
            tracing::warn!(namespace, %action, remote = %peer.and_then(|p| p.remote).map(|r| r.to_string()).unwrap_or_default(), reason = refused.message(), "call denied (at most ten such lines a minute; every one counts on wal_authorization_denials_total)");
        }
        refused
    }
}

fn unauthenticated(peer: Option<&Peer>) -> Status {
    match peer.and_then(|p| p.certificate_name.as_ref()) {
        Some(name) => Status::unauthenticated(format!(
            "the client certificate's name {name:?} matches no principal mapping rule, so it is no one here"
        )),
        None => Status::unauthenticated(
            "authorization is on and this connection carries no client certificate",
        ),
    }
}

pub fn describe() {
    metrics::describe_counter!(
        DENIALS,
        "Calls refused by authorization (PERMISSION_DENIED or UNAUTHENTICATED), by namespace and action."
    );
}
