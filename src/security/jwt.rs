//! OAUTHBEARER's tokens: JSON Web Tokens in compact form (`header.claims.signature`, each
//! base64url) and the two validations Kafka's broker offers:
//!
//! - [`UnsecuredValidator`], Kafka's `OAuthBearerUnsecuredValidatorCallbackHandler` (the
//!   default when no server callback handler is configured): an unsigned token (`alg: none`,
//!   empty signature) whose principal claim is a string, `exp` not passed and `iat` not in the
//!   future (both with `unsecuredValidatorAllowableClockSkewMs`), and which holds the
//!   `unsecuredValidatorRequiredScope`. For development only: anyone can write such a token.
//! - [`SignedValidator`], Kafka's `OAuthBearerValidatorCallbackHandler` (jose4j underneath): a
//!   token signed by a key of the JWKS ([`super::jwks`]), with `exp` and `iat`, `exp` and
//!   `nbf` checked with `sasl.oauthbearer.clock.skew.seconds`, the audience and issuer when
//!   expected (and, as jose4j, a token naming an audience refused when none is expected), and
//!   its subject in `sasl.oauthbearer.sub.claim.name`.
//!
//! Pure functions over the token and the time given (wall-clock ms); run on the shard of the
//! connection. Invariant: every failure is a [`Rejection`] with the reason for the broker's
//! log; what the client sees is only Kafka's status JSON.

use serde_json::{Map, Value};

use super::jwks::{base64url, Algorithm, JwksFile};

/// A token accepted: the principal's name and when the token expires (wall-clock ms).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Validated {
    pub principal: String,
    pub expires_ms: i64,
}

/// A token refused: Kafka's status (`insufficient_scope` with the required scope, else
/// `invalid_token`) and why, for the log.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Rejection {
    /// The required scope as Kafka prints a list (`[a, b]`) when the scope was missing.
    pub insufficient_scope: Option<String>,
    pub reason: String,
}

impl Rejection {
    fn invalid(reason: impl Into<String>) -> Self {
        Self { insufficient_scope: None, reason: reason.into() }
    }

    /// The challenge Kafka's `OAuthBearerSaslServer` sends (RFC 7628 section 3.2.2), byte for
    /// byte: `{"status":"invalid_token"}` or `{"status":"insufficient_scope", "scope":"[a]"}`.
    #[must_use]
    pub fn challenge(&self) -> String {
        match &self.insufficient_scope {
            None => r#"{"status":"invalid_token"}"#.to_string(),
            Some(scope) => format!(r#"{{"status":"insufficient_scope", "scope":"{scope}"}}"#),
        }
    }
}

/// The three parts of a compact JWS, as given.
struct Compact<'a> {
    header: &'a str,
    claims: &'a str,
    signature: &'a str,
}

fn split(token: &str) -> Result<Compact<'_>, Rejection> {
    let parts: Vec<&str> = token.split('.').collect();
    match parts.as_slice() {
        [header, claims, signature] => Ok(Compact { header, claims, signature }),
        _ => Err(Rejection::invalid(format!(
            "Malformed JWT provided; expected three sections (header, payload, and signature), \
             but {} sections provided",
            parts.len()
        ))),
    }
}

/// A base64url part holding a JSON object.
fn object(part: &str, what: &str) -> Result<Map<String, Value>, Rejection> {
    let bytes = base64url(part)
        .ok_or_else(|| Rejection::invalid(format!("malformed Base64 URL encoded {what}")))?;
    match serde_json::from_slice(&bytes) {
        Ok(Value::Object(map)) => Ok(map),
        Ok(_) => Err(Rejection::invalid(format!("the {what} is not a JSON object"))),
        Err(e) => Err(Rejection::invalid(format!("malformed JSON in the {what}: {e}"))),
    }
}

/// A claim that must be a number if present (seconds since the epoch, as ms).
fn time_claim(claims: &Map<String, Value>, name: &str) -> Result<Option<i64>, Rejection> {
    match claims.get(name) {
        None => Ok(None),
        Some(Value::Number(n)) => {
            let seconds = n.as_f64().unwrap_or(f64::MAX);
            // Saturating: a date past year 292 million is "never"; NaN cannot come from JSON.
            #[allow(clippy::cast_possible_truncation)]
            Ok(Some((seconds * 1000.0).round() as i64))
        }
        Some(other) => Err(Rejection::invalid(format!(
            "The '{name}' claim was not of type Number: {}",
            kind(other)
        ))),
    }
}

fn kind(value: &Value) -> &'static str {
    match value {
        Value::Null => "null",
        Value::Bool(_) => "Boolean",
        Value::Number(_) => "Number",
        Value::String(_) => "String",
        Value::Array(_) => "List",
        Value::Object(_) => "Object",
    }
}

/// A scope claim: one string (kept whole, trimmed, as Kafka does) or a list of strings.
fn scope_of(claims: &Map<String, Value>, name: &str) -> Result<Vec<String>, Rejection> {
    let trimmed = |s: &str| Some(s.trim().to_string()).filter(|s| !s.is_empty());
    match claims.get(name) {
        None | Some(Value::Null) => Ok(Vec::new()),
        Some(Value::String(s)) => Ok(trimmed(s).into_iter().collect()),
        Some(Value::Array(items)) => Ok(items
            .iter()
            .filter_map(|v| match v {
                Value::String(s) => trimmed(s),
                other => trimmed(&other.to_string()),
            })
            .collect()),
        Some(other) => Err(Rejection::invalid(format!(
            "The '{name}' claim was not of type List: {}",
            kind(other)
        ))),
    }
}

/// A JAAS option value that is blank counts as unset, as Kafka's `Utils.isBlank`.
fn option<'a>(options: &'a [(String, String)], key: &str) -> Option<&'a str> {
    options.iter().rev().find(|(k, _)| k == key).map(|(_, v)| v.trim()).filter(|v| !v.is_empty())
}

/// Kafka's `OAuthBearerUnsecuredValidatorCallbackHandler`, configured by the listener's JAAS
/// options `unsecuredValidatorPrincipalClaimName` (default `sub`),
/// `unsecuredValidatorScopeClaimName` (default `scope`), `unsecuredValidatorRequiredScope`
/// (space-separated) and `unsecuredValidatorAllowableClockSkewMs` (default 0).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct UnsecuredValidator {
    principal_claim: String,
    scope_claim: String,
    required_scope: Vec<String>,
    clock_skew_ms: i64,
}

impl UnsecuredValidator {
    /// From the JAAS options; a bad scope item or clock skew fails (the start), as in Kafka.
    pub fn from_jaas(options: &[(String, String)]) -> Result<Self, String> {
        let required = option(options, "unsecuredValidatorRequiredScope").unwrap_or_default();
        let mut required_scope = Vec::new();
        for item in required.split(' ').filter(|s| !s.is_empty()) {
            // Kafka's OAuthBearerScopeUtils: RFC 6749's scope-token characters.
            let ok = item
                .bytes()
                .all(|b| b == 0x21 || (0x23..=0x5b).contains(&b) || (0x5d..=0x7e).contains(&b));
            if !ok {
                return Err(format!("Invalid scope value: {item}"));
            }
            required_scope.push(item.to_string());
        }
        let skew = option(options, "unsecuredValidatorAllowableClockSkewMs").unwrap_or("0");
        let clock_skew_ms = match skew.parse::<i32>() {
            Ok(ms) if ms >= 0 => i64::from(ms),
            Ok(_) => {
                return Err(format!("Allowable clock skew millis must not be negative: {skew}"))
            }
            Err(e) => return Err(format!("unsecuredValidatorAllowableClockSkewMs={skew}: {e}")),
        };
        let name = |key, default: &str| option(options, key).unwrap_or(default).to_string();
        Ok(Self {
            principal_claim: name("unsecuredValidatorPrincipalClaimName", "sub"),
            scope_claim: name("unsecuredValidatorScopeClaimName", "scope"),
            required_scope,
            clock_skew_ms,
        })
    }

    /// Kafka's checks in Kafka's order (`OAuthBearerUnsecuredJws`, then the handler's).
    pub fn validate(&self, token: &str, now_ms: i64) -> Result<Validated, Rejection> {
        if token.contains("..") {
            return Err(Rejection::invalid("Malformed compact serialization contains '..'"));
        }
        let parts = split(token).map_err(|_| {
            Rejection::invalid(
                "Unsecured JWS compact serializations must have 3 dot-separated Base64URL-encoded \
                 values",
            )
        })?;
        let header = object(parts.header, "header")?;
        let claims = object(parts.claims, "claims")?;
        match header.get("alg") {
            None => return Err(Rejection::invalid("JWS header must have an Algorithm value")),
            Some(Value::String(alg)) if alg == "none" => {}
            Some(_) => {
                return Err(Rejection::invalid("Unsecured JWS must have 'none' for an algorithm"))
            }
        }
        if !parts.signature.is_empty() {
            return Err(Rejection::invalid("Unsecured JWS must not contain a digital signature"));
        }
        let scope = scope_of(&claims, &self.scope_claim)?;
        let expires_ms = time_claim(&claims, "exp")?
            .ok_or_else(|| Rejection::invalid("No expiration time in JWT"))?;
        let principal = match claims.get(&self.principal_claim) {
            Some(Value::String(s)) if !s.trim().is_empty() => s.clone(),
            None | Some(Value::String(_)) => {
                return Err(Rejection::invalid(format!(
                    "No principal name in JWT claim: {}",
                    self.principal_claim
                )))
            }
            Some(other) => {
                return Err(Rejection::invalid(format!(
                    "The '{}' claim was not of type String: {}",
                    self.principal_claim,
                    kind(other)
                )))
            }
        };
        let issued_ms = time_claim(&claims, "iat")?;
        self.check_times(issued_ms, expires_ms, now_ms)?;
        for required in &self.required_scope {
            if !scope.contains(required) {
                let listed = format!("[{}]", self.required_scope.join(", "));
                return Err(Rejection {
                    reason: format!(
                        "The provided scope ([{}]) was missing a required scope ({required}).  \
                         All required scope elements: {listed}",
                        scope.join(", ")
                    ),
                    insufficient_scope: Some(listed),
                });
            }
        }
        Ok(Validated { principal, expires_ms })
    }

    fn check_times(
        &self,
        issued_ms: Option<i64>,
        expires_ms: i64,
        now_ms: i64,
    ) -> Result<(), Rejection> {
        let skew = self.clock_skew_ms;
        if let Some(iat) = issued_ms.filter(|iat| *iat > now_ms.saturating_add(skew)) {
            return Err(Rejection::invalid(format!(
                "The Issued At value ({iat} ms) was after the indicated time ({now_ms} ms) plus \
                 allowable clock skew ({skew} ms)"
            )));
        }
        if now_ms.saturating_sub(skew) >= expires_ms {
            return Err(Rejection::invalid(format!(
                "The indicated time ({now_ms} ms) minus allowable clock skew ({skew} ms) was on \
                 or after the Expiration Time value ({expires_ms} ms)"
            )));
        }
        if issued_ms.is_some_and(|iat| expires_ms <= iat) {
            return Err(Rejection::invalid("The Expiration Time was not after the Issued At time"));
        }
        Ok(())
    }
}

/// Kafka's `OAuthBearerValidatorCallbackHandler` with a `file:` JWKS: the listener's
/// `sasl.oauthbearer.*` settings.
#[derive(Debug)]
pub struct SignedValidator {
    pub keys: JwksFile,
    /// `sasl.oauthbearer.expected.audience`: the token's `aud` must name one (when not empty).
    pub expected_audience: Vec<String>,
    /// `sasl.oauthbearer.expected.issuer`: the token's `iss` must be it (when set).
    pub expected_issuer: Option<String>,
    /// `sasl.oauthbearer.sub.claim.name`.
    pub sub_claim: String,
    /// `sasl.oauthbearer.scope.claim.name`.
    pub scope_claim: String,
    /// `sasl.oauthbearer.clock.skew.seconds`, in ms.
    pub clock_skew_ms: i64,
}

impl SignedValidator {
    /// The signature (by the key of the header's `kid`), then the claims, as jose4j's
    /// `JwtConsumer` and Kafka's `BrokerJwtValidator` check them.
    pub fn validate(&self, token: &str, now_ms: i64) -> Result<Validated, Rejection> {
        let token = token.trim();
        let parts = split(token)?;
        let header = object(parts.header, "header")?;
        let alg = header.get("alg").and_then(Value::as_str).unwrap_or("");
        let alg = Algorithm::parse(alg).ok_or_else(|| {
            Rejection::invalid(format!(
                "the algorithm {alg:?} is not allowed (RS256, RS384, RS512, ES256; never none)"
            ))
        })?;
        let kid = header.get("kid").and_then(Value::as_str);
        let signature = base64url(parts.signature)
            .ok_or_else(|| Rejection::invalid("malformed Base64 URL encoded signature"))?;
        let signed = &token[..parts.header.len() + 1 + parts.claims.len()];
        self.keys
            .keys(now_ms)
            .verify(alg, kid, signed.as_bytes(), &signature)
            .map_err(|e| Rejection::invalid(e.to_string()))?;
        let claims = object(parts.claims, "claims")?;
        self.check_claims(&claims, now_ms)
    }

    fn check_claims(
        &self,
        claims: &Map<String, Value>,
        now_ms: i64,
    ) -> Result<Validated, Rejection> {
        let skew = self.clock_skew_ms;
        let expires_ms = time_claim(claims, "exp")?
            .ok_or_else(|| Rejection::invalid("No Expiration Time (exp) claim present."))?;
        if time_claim(claims, "iat")?.is_none() {
            return Err(Rejection::invalid("No Issued At (iat) claim present."));
        }
        if now_ms.saturating_sub(skew) >= expires_ms {
            return Err(Rejection::invalid(format!(
                "The JWT is no longer valid - the evaluation time {now_ms} ms is on or after the \
                 Expiration Time (exp={expires_ms} ms) claim value (even when providing {} \
                 seconds of leeway to account for clock skew).",
                skew / 1000
            )));
        }
        if let Some(nbf) =
            time_claim(claims, "nbf")?.filter(|nbf| now_ms.saturating_add(skew) < *nbf)
        {
            return Err(Rejection::invalid(format!(
                "The JWT is not yet valid as the evaluation time {now_ms} ms is before the Not \
                 Before (nbf={nbf} ms) claim time"
            )));
        }
        self.check_audience(claims)?;
        if let Some(expected) = &self.expected_issuer {
            match claims.get("iss") {
                Some(Value::String(iss)) if iss == expected => {}
                Some(iss) => {
                    return Err(Rejection::invalid(format!(
                    "Issuer (iss) claim value ({iss}) doesn't match expected value of {expected}"
                )))
                }
                None => return Err(Rejection::invalid("No Issuer (iss) claim present.")),
            }
        }
        scope_of(claims, &self.scope_claim)?;
        let principal = match claims.get(&self.sub_claim) {
            Some(Value::String(s)) if !s.trim().is_empty() => s.trim().to_string(),
            _ => {
                return Err(Rejection::invalid(format!(
                    "{} value must be a non-empty string",
                    self.sub_claim
                )))
            }
        };
        Ok(Validated { principal, expires_ms })
    }

    fn check_audience(&self, claims: &Map<String, Value>) -> Result<(), Rejection> {
        let audiences: Vec<&str> = match claims.get("aud") {
            None => {
                if self.expected_audience.is_empty() {
                    return Ok(());
                }
                return Err(Rejection::invalid("No Audience (aud) claim present."));
            }
            Some(Value::String(one)) => vec![one.as_str()],
            Some(Value::Array(list)) => list.iter().filter_map(Value::as_str).collect(),
            Some(other) => {
                return Err(Rejection::invalid(format!(
                    "The value of the 'aud' claim is not an array of strings or a single string \
                     value: {other}"
                )))
            }
        };
        if audiences.iter().any(|a| self.expected_audience.iter().any(|e| e == a)) {
            return Ok(());
        }
        Err(Rejection::invalid(if self.expected_audience.is_empty() {
            format!(
                "Audience (aud) claim {audiences:?} present in the JWT but no expected audience \
                 value(s) were provided (set sasl.oauthbearer.expected.audience)"
            )
        } else {
            format!(
                "Audience (aud) claim {audiences:?} doesn't contain an acceptable identifier. \
                 Expected one of {:?} as an aud value.",
                self.expected_audience
            )
        }))
    }
}

#[cfg(test)]
#[path = "jwt_tests.rs"]
mod tests;
