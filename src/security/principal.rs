//! `ssl.principal.mapping.rules`: Kafka's `SslPrincipalMapper`, which turns a client
//! certificate's subject DN into the principal's name. Rules are tried in order:
//! `RULE:<pattern>/<replacement>/[L|U]` applies when the pattern matches the whole DN and
//! gives the DN with every match replaced (Java's `replaceAll`; `$1` is a group, `\` escapes
//! the next character), lower- or upper-cased by the `L`/`U` flag; `DEFAULT` gives the DN
//! itself. A DN no rule applies to fails the authentication, as in Kafka.
//!
//! Parsed once on the main thread at start-up (a bad rule fails the start naming the
//! setting); applied on the shard that completed the handshake. Pure code.

use regex::Regex;

/// One rule.
#[derive(Clone, Debug)]
enum Rule {
    Default,
    Replace {
        /// The pattern anchored at both ends (Java's `matches()`).
        whole: Regex,
        /// The pattern as given (`replaceAll`).
        pattern: Regex,
        /// In the `regex` crate's syntax (`${1}`, `$$`).
        replacement: String,
        lower: bool,
        upper: bool,
    },
}

/// The parsed rules of one listener (`DEFAULT` alone when unset).
#[derive(Clone, Debug)]
pub struct PrincipalMapper {
    rules: Vec<Rule>,
    /// As given, for the "no rule applies" message.
    text: String,
}

impl Default for PrincipalMapper {
    fn default() -> Self {
        Self { rules: vec![Rule::Default], text: "DEFAULT".into() }
    }
}

impl PrincipalMapper {
    /// Parses Kafka's syntax: rules separated by commas (a comma inside a rule's pattern or
    /// replacement is escaped or sits before its closing `/`).
    pub fn parse(text: &str) -> Result<Self, String> {
        let mut rules = Vec::new();
        let mut rest = text.trim();
        while !rest.is_empty() {
            if let Some(after) = rest.strip_prefix("DEFAULT") {
                rules.push(Rule::Default);
                rest = after;
            } else if let Some(after) = rest.strip_prefix("RULE:") {
                let (pattern, after) = until_slash(after)
                    .ok_or_else(|| format!("a RULE needs /pattern/replacement/: {rest:?}"))?;
                let (replacement, after) = until_slash(after)
                    .ok_or_else(|| format!("a RULE needs /pattern/replacement/: {rest:?}"))?;
                let flag_end = after.find(',').unwrap_or(after.len());
                let flag = after[..flag_end].trim();
                let (lower, upper) = match flag {
                    "" => (false, false),
                    "L" => (true, false),
                    "U" => (false, true),
                    other => return Err(format!("unknown RULE flag {other:?} (L or U)")),
                };
                let compile =
                    |p: &str| Regex::new(p).map_err(|e| format!("RULE pattern {pattern:?}: {e}"));
                rules.push(Rule::Replace {
                    whole: compile(&format!("^(?:{pattern})$"))?,
                    pattern: compile(&pattern)?,
                    replacement: java_replacement(&replacement)?,
                    lower,
                    upper,
                });
                rest = &after[flag_end..];
            } else {
                return Err(format!("expected RULE:... or DEFAULT at {rest:?}"));
            }
            rest = rest.trim_start();
            match rest.strip_prefix(',') {
                Some(after) => rest = after.trim_start(),
                None if rest.is_empty() => {}
                None => return Err(format!("expected a comma before {rest:?}")),
            }
        }
        if rules.is_empty() {
            rules.push(Rule::Default);
        }
        Ok(Self { rules, text: text.trim().to_string() })
    }

    /// The principal name of `dn`; an error names the DN and the rules when none applies.
    pub fn name(&self, dn: &str) -> Result<String, String> {
        for rule in &self.rules {
            match rule {
                Rule::Default => return Ok(dn.to_string()),
                Rule::Replace { whole, pattern, replacement, lower, upper } => {
                    if !whole.is_match(dn) {
                        continue;
                    }
                    let name = pattern.replace_all(dn, replacement.as_str()).into_owned();
                    return Ok(if *lower {
                        name.to_lowercase()
                    } else if *upper {
                        name.to_uppercase()
                    } else {
                        name
                    });
                }
            }
        }
        Err(format!("No rules apply to {dn}, rules [{}]", self.text))
    }
}

/// The text up to the next unescaped `/` (escapes kept for the regex), and what follows it.
fn until_slash(text: &str) -> Option<(String, &str)> {
    let mut out = String::new();
    let mut chars = text.char_indices();
    while let Some((i, c)) = chars.next() {
        match c {
            '\\' => {
                let (_, next) = chars.next()?;
                // `\/` is a slash of the pattern; any other escape stays for the regex.
                if next != '/' {
                    out.push('\\');
                }
                out.push(next);
            }
            '/' => return Some((out, &text[i + 1..])),
            _ => out.push(c),
        }
    }
    None
}

/// Java's replacement syntax (`$n` a group, `\x` the character x) in the `regex` crate's
/// (`${n}`, `$$`).
fn java_replacement(text: &str) -> Result<String, String> {
    let mut out = String::new();
    let mut chars = text.chars().peekable();
    while let Some(c) = chars.next() {
        match c {
            '\\' => match chars.next() {
                Some('$') => out.push_str("$$"),
                Some(other) => out.push(other),
                None => return Err("the replacement ends with a lone backslash".into()),
            },
            '$' => {
                let mut digits = String::new();
                while let Some(d) = chars.peek().filter(|d| d.is_ascii_digit()) {
                    digits.push(*d);
                    chars.next();
                }
                if digits.is_empty() {
                    return Err(format!("a $ without a group number in {text:?}"));
                }
                out.push_str(&format!("${{{digits}}}"));
            }
            other => out.push(other),
        }
    }
    Ok(out)
}

#[cfg(test)]
mod tests {
    use super::*;

    /// Kafka's documented examples and its `SslPrincipalMapperTest` cases.
    #[test]
    fn kafka_rules() {
        let m = PrincipalMapper::parse(
            "RULE:^CN=(.*?),OU=ServiceUsers.*$/$1/,\
             RULE:^CN=(.*?),OU=(.*?),O=(.*?),L=(.*?),ST=(.*?),C=(.*?)$/$1@$2/L,\
             RULE:^cn=(.*?),ou=(.*?),dc=(.*?),dc=(.*?)$/$1@$2/U,\
             RULE:^.*[Cc][Nn]=([a-zA-Z0-9.]*).*$/$1/U,\
             DEFAULT",
        )
        .expect("parse");
        assert_eq!(m.name("CN=kafka-server1,OU=ServiceUsers,O=Org,C=US").unwrap(), "kafka-server1");
        assert_eq!(
            m.name("CN=Duke,OU=JavaSoft,O=Sun Microsystems,L=a,ST=b,C=US").unwrap(),
            "duke@javasoft"
        );
        assert_eq!(m.name("cn=duke,ou=javasoft,dc=example,dc=com").unwrap(), "DUKE@JAVASOFT");
        assert_eq!(m.name("OU=x,CN=Test.Name,O=y").unwrap(), "TEST.NAME");
        assert_eq!(m.name("OU=JavaSoft,O=Sun").unwrap(), "OU=JavaSoft,O=Sun");
        let strict = PrincipalMapper::parse("RULE:^CN=(.*)$/$1/").expect("parse");
        let err = strict.name("OU=x").expect_err("no rule");
        assert!(err.contains("No rules apply to OU=x"), "{err}");
        assert_eq!(PrincipalMapper::default().name("CN=a").unwrap(), "CN=a");
        assert_eq!(PrincipalMapper::parse("").expect("empty").name("CN=a").unwrap(), "CN=a");
    }

    #[test]
    fn escapes_and_bad_rules() {
        let m = PrincipalMapper::parse(r"RULE:^CN=([^,]*)\/x.*$/user\$$1/").expect("parse");
        assert_eq!(m.name("CN=bob/x,O=y").unwrap(), "user$bob");
        for bad in
            ["RULE:^CN=(.*$/$1/", "RULE:abc", "RULE:a/b/X", "NOPE", "RULE:a/$/", "DEFAULT DEFAULT"]
        {
            assert!(PrincipalMapper::parse(bad).is_err(), "{bad}");
        }
    }
}
