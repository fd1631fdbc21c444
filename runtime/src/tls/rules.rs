//! Principal mapping rules, in Kafka's `ssl.principal.mapping.rules` syntax so operators who
//! know Kafka's ACLs need nothing new: a comma-separated list of `RULE:pattern/replacement/`
//! (optionally ending `L` or `U` to lower- or upper-case the result) and `DEFAULT` (the name
//! as it is). The first rule whose pattern matches the whole name wins; a name no rule
//! matches maps to nobody: with authorization on, its client is refused (UNAUTHENTICATED).
//! Group references are Java's, as in Kafka: `$1_$2` is group 1, `_`, group 2. A rule whose
//! result is empty maps to nobody too.
//!
//! Mind `DEFAULT` beside SPIFFE rules: it maps a certificate without a SAN URI to its DNS SAN
//! or CN as written, so a CN that spells a mapped principal (`payments`) becomes that principal.
//! Leave `DEFAULT` out where only one kind of name is issued.
//!
//! Example: `RULE:^spiffe:\/\/example\.org\/team\/([a-z0-9-]+)$/$1/` maps
//! `spiffe://example.org/team/payments` to `payments` and any other name to nobody. As in Kafka,
//! a '/' inside a pattern or replacement is written `\/`.

use std::fmt;
use std::str::FromStr;

use regex::Regex;

#[derive(Debug, Clone)]
pub struct PrincipalRules {
    rules: Vec<Rule>,
    /// The list as written, for messages.
    text: String,
}

#[derive(Debug, Clone)]
enum Rule {
    Default,
    Replace {
        pattern: Regex,
        replacement: String,
        case: Case,
    },
}

#[derive(Debug, Clone, Copy)]
enum Case {
    Keep,
    Lower,
    Upper,
}

/// A rule list that cannot be read, with where and what was expected.
#[derive(Debug, Clone, PartialEq, Eq, thiserror::Error)]
#[error("principal mapping rules, at character {at}: {problem}")]
pub struct RulesError {
    pub at: usize,
    pub problem: String,
}

impl Default for PrincipalRules {
    fn default() -> Self {
        Self {
            rules: vec![Rule::Default],
            text: "DEFAULT".to_owned(),
        }
    }
}

impl PrincipalRules {
    /// The principal `name` maps to, or `None` when no rule matches it.
    pub fn map(&self, name: &str) -> Option<String> {
        self.rules.iter().find_map(|rule| match rule {
            Rule::Default => Some(name.to_owned()),
            Rule::Replace {
                pattern,
                replacement,
                case,
            } => {
                let captures = pattern.captures(name)?;
                let mut mapped = String::new();
                captures.expand(replacement, &mut mapped);
                // An empty principal is nobody, not a name every such client would share.
                if mapped.is_empty() {
                    return None;
                }
                Some(match case {
                    Case::Keep => mapped,
                    Case::Lower => mapped.to_lowercase(),
                    Case::Upper => mapped.to_uppercase(),
                })
            }
        })
    }
}

impl FromStr for PrincipalRules {
    type Err = RulesError;

    fn from_str(text: &str) -> Result<Self, RulesError> {
        let mut rules = Vec::new();
        let mut rest = text;
        loop {
            let at = text.len() - rest.len();
            rest = rest.trim_start();
            if let Some(after) = rest.strip_prefix("DEFAULT") {
                rules.push(Rule::Default);
                rest = after;
            } else if let Some(after) = rest.strip_prefix("RULE:") {
                let (rule, after) = replace_rule(after, text.len() - after.len())?;
                rules.push(rule);
                rest = after;
            } else {
                return Err(RulesError {
                    at,
                    problem: format!(
                        "expected DEFAULT or RULE:pattern/replacement/, found {:?}",
                        rest.chars().take(20).collect::<String>()
                    ),
                });
            }
            rest = rest.trim_start();
            match rest.strip_prefix(',') {
                Some(after) => rest = after,
                None if rest.is_empty() => break,
                None => {
                    return Err(RulesError {
                        at: text.len() - rest.len(),
                        problem: format!(
                            "expected ',' between rules, found {:?}",
                            rest.chars().take(20).collect::<String>()
                        ),
                    });
                }
            }
        }
        Ok(Self {
            rules,
            text: text.to_owned(),
        })
    }
}

/// `pattern/replacement/[LU]` after `RULE:`, starting at character `at` of the whole list.
fn replace_rule(text: &str, at: usize) -> Result<(Rule, &str), RulesError> {
    let (pattern, rest) = until_slash(text, at, "the pattern")?;
    let (replacement, rest) = until_slash(rest, at + text.len() - rest.len(), "the replacement")?;
    let (case, rest) = match rest.chars().next() {
        Some('L') => (Case::Lower, &rest[1..]),
        Some('U') => (Case::Upper, &rest[1..]),
        _ => (Case::Keep, rest),
    };
    // Kafka matches the whole name, not a part of it.
    let pattern = Regex::new(&format!("^(?:{pattern})$")).map_err(|error| RulesError {
        at,
        problem: format!("the pattern {pattern:?} is not a regular expression: {error}"),
    })?;
    let rule = Rule::Replace {
        pattern,
        replacement: java_groups(&replacement),
        case,
    };
    Ok((rule, rest))
}

/// A replacement with Java's group references (`$1_$2`: group 1, then `_`, then group 2) in
/// the regex crate's braced form (`${1}_${2}`): unbraced, the crate would read `$1_` as a group
/// named `1_`, and map every name to what follows.
fn java_groups(replacement: &str) -> String {
    let mut out = String::with_capacity(replacement.len() + 4);
    let mut chars = replacement.chars().peekable();
    while let Some(c) = chars.next() {
        if c == '$' && chars.peek().is_some_and(char::is_ascii_digit) {
            out.push_str("${");
            while let Some(d) = chars.next_if(char::is_ascii_digit) {
                out.push(d);
            }
            out.push('}');
        } else {
            out.push(c);
        }
    }
    out
}

/// The text up to the first '/' not escaped by a backslash (`\/` stands for '/'), and what
/// follows that slash.
fn until_slash<'a>(text: &'a str, at: usize, what: &str) -> Result<(String, &'a str), RulesError> {
    let mut out = String::new();
    let mut chars = text.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '/' => return Ok((out, &text[i + 1..])),
            '\\' => match chars.next() {
                Some((_, '/')) => out.push('/'),
                Some((_, other)) => {
                    out.push('\\');
                    out.push(other);
                }
                None => out.push('\\'),
            },
            other => out.push(other),
        }
    }
    Err(RulesError {
        at,
        problem: format!("{what} has no closing '/'"),
    })
}

impl fmt::Display for PrincipalRules {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.text)
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn rules(text: &str) -> PrincipalRules {
        text.parse().unwrap_or_else(|e| panic!("{text}: {e}"))
    }

    #[test]
    fn the_first_matching_rule_wins_and_default_keeps_the_name() {
        let r = rules(
            r"RULE:^spiffe:\/\/example\.org\/team\/([a-z-]+)$/$1/, RULE:(.*)\.svc/svc-$1/U,DEFAULT",
        );
        assert_eq!(
            r.map("spiffe://example.org/team/payments").as_deref(),
            Some("payments")
        );
        assert_eq!(r.map("orders.svc").as_deref(), Some("SVC-ORDERS"));
        assert_eq!(r.map("CN=someone").as_deref(), Some("CN=someone"));
    }

    #[test]
    fn a_name_no_rule_matches_maps_to_nobody() {
        let r = rules(r"RULE:^team-(.*)$/$1/L");
        assert_eq!(r.map("team-Ops").as_deref(), Some("ops"));
        assert_eq!(r.map("other"), None);
        // The whole name must match, as in Kafka.
        assert_eq!(r.map("x-team-ops"), None);
    }

    #[test]
    fn escaped_slashes_belong_to_the_pattern() {
        let r = rules(r"RULE:^spiffe:\/\/wal\/(.*)$/$1/");
        assert_eq!(r.map("spiffe://wal/a").as_deref(), Some("a"));
    }

    #[test]
    fn group_references_are_javas_and_an_empty_result_is_nobody() {
        let r = rules(r"RULE:^([a-z]+)\.([a-z]+)$/$1_$2/,RULE:^x(.*)$/$1/");
        assert_eq!(r.map("team.svc").as_deref(), Some("team_svc"));
        assert_eq!(r.map("x"), None);
    }

    #[test]
    fn the_default_is_the_name_itself() {
        assert_eq!(PrincipalRules::default().map("x").as_deref(), Some("x"));
    }

    #[test]
    fn bad_rules_say_where_and_what_was_expected() {
        let e = "DEFAULT,RULE:(a/b".parse::<PrincipalRules>().unwrap_err();
        assert!(
            e.problem.contains("the replacement has no closing '/'"),
            "{e}"
        );
        let e = "RULE:(/x/".parse::<PrincipalRules>().unwrap_err();
        assert!(e.problem.contains("not a regular expression"), "{e}");
        let e = "DEFAULT;RULE:a/b/".parse::<PrincipalRules>().unwrap_err();
        assert_eq!(e.at, 7, "{e}");
        assert!(e.problem.contains("expected ','"), "{e}");
        let e = "NONE".parse::<PrincipalRules>().unwrap_err();
        assert!(e.problem.contains("expected DEFAULT or RULE:"), "{e}");
    }
}
