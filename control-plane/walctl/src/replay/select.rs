//! Which entries `walctl replay` takes ([`Selection`], shared with the control plane's replay),
//! and the ids it leaves out, from its flags and files.

use std::collections::HashSet;
use std::path::Path;

pub use wal_control_plane::operations::selection::{Left, Selection};

use crate::Failure;

/// The ids of --exclude-id and of each --exclude-file (one id a line; blank lines and lines
/// starting with # are skipped).
pub fn excluded_ids(
    ids: &[String],
    files: &[std::path::PathBuf],
) -> Result<HashSet<String>, Failure> {
    let mut excluded: HashSet<String> = ids.iter().map(|id| id.trim().to_owned()).collect();
    for file in files {
        excluded.extend(read_ids(file)?);
    }
    excluded.remove("");
    Ok(excluded)
}

fn read_ids(file: &Path) -> Result<Vec<String>, Failure> {
    let text = std::fs::read_to_string(file).map_err(|e| {
        Failure::usage(format!(
            "cannot read --exclude-file {}: {e}; expected a file with one entry id a line",
            file.display()
        ))
    })?;
    Ok(parse_ids(&text))
}

/// The ids of an exclude file's text: one a line, trimmed; blank lines and lines starting with
/// # are skipped.
pub fn parse_ids(text: &str) -> Vec<String> {
    text.lines()
        .map(str::trim)
        .filter(|line| !line.is_empty() && !line.starts_with('#'))
        .map(str::to_owned)
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn exclude_files_skip_blanks_and_comments_and_a_missing_one_is_named() {
        let path = std::env::temp_dir().join(format!("walctl-exclude-{}", std::process::id()));
        std::fs::write(&path, "# offending writes\nid-1\n\n  id-2  \n").unwrap();
        let ids = excluded_ids(&["id-3".into()], std::slice::from_ref(&path)).unwrap();
        assert_eq!(ids, ["id-1", "id-2", "id-3"].map(str::to_owned).into());
        std::fs::remove_file(&path).unwrap();
        let missing = excluded_ids(&[], std::slice::from_ref(&path)).unwrap_err();
        assert_eq!(missing.exit, crate::Exit::Usage);
        assert!(
            missing.message.contains("--exclude-file"),
            "{}",
            missing.message
        );
    }
}
