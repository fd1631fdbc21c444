//! Who may do what to a namespace once authorization is on: the principals granted each action.
//! The grants live with the namespace, so they are versioned, diffed, reviewed and hot-reloaded
//! with the rest of its config, and a team that owns a namespace owns its grants.

use std::fmt;

/// What a principal asks to do to a namespace.
#[derive(Debug, Clone, Copy, PartialEq, Eq, Hash)]
pub enum Action {
    /// WriteToLog, WriteToLogBatch and the two-phase calls.
    Write,
    /// A writer taking entries from another region's consumer. The writer checks it against its
    /// own super-users (it reads no namespace config); `access.replicate` is reserved.
    Replicate,
    /// Apply or delete the namespace on the control plane.
    Admin,
}

impl Action {
    pub const ALL: [Self; 3] = [Self::Write, Self::Replicate, Self::Admin];

    pub fn as_str(self) -> &'static str {
        match self {
            Self::Write => "write",
            Self::Replicate => "replicate",
            Self::Admin => "admin",
        }
    }
}

impl fmt::Display for Action {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(self.as_str())
    }
}

/// One grant: a principal by name, every principal starting with a prefix (`team-a/*`), or
/// anyone authenticated (`*`).
#[derive(Debug, Clone, PartialEq, Eq)]
pub enum Grant {
    Principal(String),
    Prefix(String),
}

impl Grant {
    /// A grant as written: a trailing `*` makes it a prefix.
    pub fn parse(text: &str) -> Self {
        match text.strip_suffix('*') {
            Some(prefix) => Self::Prefix(prefix.to_owned()),
            None => Self::Principal(text.to_owned()),
        }
    }

    pub fn covers(&self, principal: &str) -> bool {
        match self {
            Self::Principal(name) => name == principal,
            Self::Prefix(prefix) => principal.starts_with(prefix.as_str()),
        }
    }
}

/// The namespace's grants, by action. Empty lists grant nothing: with authorization on, a
/// namespace that names no one is reached by super-users only.
#[derive(Debug, Clone, Default, PartialEq, Eq)]
pub struct Access {
    pub write: Vec<Grant>,
    pub replicate: Vec<Grant>,
    pub admin: Vec<Grant>,
}

impl Access {
    pub fn grants(&self, action: Action) -> &[Grant] {
        match action {
            Action::Write => &self.write,
            Action::Replicate => &self.replicate,
            Action::Admin => &self.admin,
        }
    }

    /// Whether the namespace grants `principal` the `action`.
    pub fn allows(&self, principal: &str, action: Action) -> bool {
        self.grants(action).iter().any(|g| g.covers(principal))
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn grants_cover_names_prefixes_and_anyone() {
        let access = Access {
            write: vec![Grant::parse("payments"), Grant::parse("team-a/*")],
            replicate: vec![Grant::parse("*")],
            admin: Vec::new(),
        };
        assert!(access.allows("payments", Action::Write));
        assert!(access.allows("team-a/orders", Action::Write));
        assert!(!access.allows("payments-2", Action::Write));
        assert!(!access.allows("team-b/x", Action::Write));
        assert!(access.allows("anyone", Action::Replicate));
        assert!(!access.allows("payments", Action::Admin));
    }
}
