//! The access block: each grant a principal name, a `prefix*` or `*`.

use crate::access::{Access, Grant};
use crate::error::Problems;
use crate::file::AccessFile;

/// The longest principal or prefix a grant may name.
const GRANT_MAX: usize = 256;
/// The most grants one action may list.
const GRANTS_MAX: usize = 1000;

pub(super) fn access(problems: &mut Problems<'_>, file: AccessFile) -> Access {
    Access {
        write: grants(problems, "access.write", &file.write),
        replicate: grants(problems, "access.replicate", &file.replicate),
        admin: grants(problems, "access.admin", &file.admin),
    }
}

fn grants(problems: &mut Problems<'_>, path: &str, list: &[String]) -> Vec<Grant> {
    if list.len() > GRANTS_MAX {
        problems.add(
            path,
            format!("expected at most {GRANTS_MAX} grants, found {}", list.len()),
        );
    }
    let mut out = Vec::with_capacity(list.len());
    for (i, text) in list.iter().enumerate() {
        let at = format!("{path}[{i}]");
        let name = text.strip_suffix('*').unwrap_or(text);
        if text.is_empty() {
            problems.add(
                at,
                "expected a principal, 'prefix*' or '*', found an empty string",
            );
        } else if text.len() > GRANT_MAX {
            problems.add(
                at,
                format!("expected at most {GRANT_MAX} bytes, found {}", text.len()),
            );
        } else if name.contains('*') {
            problems.add(
                at,
                format!("'*' may only end a grant (a prefix), found {text:?}"),
            );
        } else if text.trim() != text || text.chars().any(char::is_control) {
            problems.add(
                at,
                format!(
                    "expected no spaces around and no control characters in a grant, found {text:?}"
                ),
            );
        } else {
            out.push(Grant::parse(text));
        }
    }
    out
}
