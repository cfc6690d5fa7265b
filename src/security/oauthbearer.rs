//! SASL/OAUTHBEARER (RFC 7628) as Kafka's `OAuthBearerSaslServer` serves it: the client's
//! first message `n,[a=authzid],\x01auth=Bearer <token>\x01[key=value\x01]*\x01` (Kafka's
//! `OAuthBearerClientInitialResponse` grammar; SASL extensions are accepted and ignored, as
//! Kafka's validators accept them all), the token checked by the listener's
//! [`TokenValidator`], and on a refused token Kafka's JSON challenge, after which the
//! client's `\x01` ends the exchange with SASL_AUTHENTICATION_FAILED carrying that JSON.
//!
//! Pure functions and values; the exchange's state lives in [`super::sasl`], on the shard of
//! the connection. Invariant: a token is never logged (only the validator's reason is), and a
//! malformed first message gets Kafka's generic answer, not the parser's detail.

use std::borrow::Cow;

use super::jwt::{Rejection, SignedValidator, UnsecuredValidator, Validated};

/// The mechanism's name.
pub const NAME: &str = "OAUTHBEARER";

/// The byte a client sends to end an exchange after an error challenge (RFC 7628 3.2.3).
pub const CONTROL_A: u8 = 0x01;

/// How a listener validates OAUTHBEARER tokens.
#[derive(Debug)]
pub enum TokenValidator {
    /// Kafka's default `OAuthBearerUnsecuredValidatorCallbackHandler` (development only).
    Unsecured(UnsecuredValidator),
    /// Kafka's `OAuthBearerValidatorCallbackHandler` with a JWKS file.
    Signed(Box<SignedValidator>),
}

impl TokenValidator {
    /// Checks `token` at `now_ms` (wall clock).
    pub fn validate(&self, token: &str, now_ms: i64) -> Result<Validated, Rejection> {
        match self {
            Self::Unsecured(v) => v.validate(token, now_ms),
            Self::Signed(v) => v.validate(token, now_ms),
        }
    }
}

/// Why an OAUTHBEARER exchange fails (each is SASL_AUTHENTICATION_FAILED).
#[derive(Debug, PartialEq, Eq, thiserror::Error)]
pub enum OAuthBearerError {
    #[error("Invalid OAUTHBEARER client first message")]
    Malformed,
    #[error("Invalid OAUTHBEARER client first message: 'auth' not specified")]
    NoAuth,
    #[error("Invalid OAUTHBEARER client first message: invalid 'auth' format")]
    AuthFormat,
    #[error("Invalid scheme in OAUTHBEARER client first message: {0}")]
    Scheme(String),
    #[error(
        "Authentication failed: Client requested an authorization id ({0}) that is different \
         from the token's principal name ({1})"
    )]
    Authzid(String, String),
    /// The client ended the exchange after our error challenge; the challenge is the message.
    #[error("{0}")]
    Refused(String),
    #[error("more than {0} OAUTHBEARER tokens in one exchange")]
    Attempts(u32),
}

impl OAuthBearerError {
    /// What the client is told: Kafka answers a malformed message (a `SaslException`) with a
    /// generic line, and the rest (`SaslAuthenticationException`s) with their message.
    #[must_use]
    pub fn client_message(&self) -> Cow<'_, str> {
        match self {
            Self::Malformed
            | Self::NoAuth
            | Self::AuthFormat
            | Self::Scheme(_)
            | Self::Attempts(_) => Cow::Borrowed(
                "Authentication failed during authentication due to invalid credentials with \
                     SASL mechanism OAUTHBEARER",
            ),
            Self::Authzid(..) | Self::Refused(_) => Cow::Owned(self.to_string()),
        }
    }
}

/// A client's first message.
#[derive(Debug, PartialEq, Eq)]
pub struct ClientFirst<'a> {
    pub token: &'a str,
    /// Empty unless the client asked for one (it must then be the token's principal).
    pub authzid: &'a str,
    /// SASL extensions (`key=value`), in order; the last of a repeated key wins, as Kafka's map.
    pub extensions: Vec<(&'a str, &'a str)>,
}

/// Parses a client first message with Kafka's grammar (its regular expression, written out).
pub fn parse_client_first(message: &[u8]) -> Result<ClientFirst<'_>, OAuthBearerError> {
    let text = std::str::from_utf8(message).map_err(|_| OAuthBearerError::Malformed)?;
    let rest = text.strip_prefix("n,").ok_or(OAuthBearerError::Malformed)?;
    let (authzid, rest) = match rest.strip_prefix("a=") {
        Some(after) => {
            let end = after.find(',').ok_or(OAuthBearerError::Malformed)?;
            let name = &after[..end];
            if !is_saslname(name) {
                return Err(OAuthBearerError::Malformed);
            }
            (name, &after[end..])
        }
        None => ("", rest),
    };
    let pairs = rest
        .strip_prefix(",\u{1}")
        .and_then(|r| r.strip_suffix('\u{1}'))
        .ok_or(OAuthBearerError::Malformed)?;
    let mut auth = None;
    let mut extensions: Vec<(&str, &str)> = Vec::new();
    if !pairs.is_empty() {
        let body = pairs.strip_suffix('\u{1}').ok_or(OAuthBearerError::Malformed)?;
        for pair in body.split('\u{1}') {
            let (key, value) = pair.split_once('=').ok_or(OAuthBearerError::Malformed)?;
            let key_ok = !key.is_empty() && key.bytes().all(|b| b.is_ascii_alphabetic());
            let value_ok = !value.is_empty()
                && value.bytes().all(|b| (0x21..=0x7e).contains(&b) || b" \t\r\n".contains(&b));
            if !key_ok || !value_ok {
                return Err(OAuthBearerError::Malformed);
            }
            if key == "auth" {
                auth = Some(value);
            } else {
                extensions.retain(|(k, _)| *k != key);
                extensions.push((key, value));
            }
        }
    }
    let auth = auth.ok_or(OAuthBearerError::NoAuth)?;
    let token = bearer_token(auth)?;
    Ok(ClientFirst { token, authzid, extensions })
}

/// RFC 5801's saslname as Kafka's pattern allows it: `=2C` and `=3D` escapes, no bare `=`
/// or `,`, 7-bit characters.
fn is_saslname(name: &str) -> bool {
    let bytes = name.as_bytes();
    let mut i = 0;
    while i < bytes.len() {
        match bytes[i] {
            b'=' if bytes[i..].starts_with(b"=2C") || bytes[i..].starts_with(b"=3D") => i += 3,
            b'=' | b',' | 0 | 0x80.. => return false,
            _ => i += 1,
        }
    }
    !bytes.is_empty()
}

/// `auth=<scheme> <token>`: the scheme is `Bearer` (any case), the token a b64token
/// (RFC 6750: `[-._~+/A-Za-z0-9]+=*`).
fn bearer_token(auth: &str) -> Result<&str, OAuthBearerError> {
    let (scheme, token) = auth.split_once(' ').ok_or(OAuthBearerError::AuthFormat)?;
    let token = token.trim_start_matches(' ');
    let word = |s: &str| !s.is_empty() && s.bytes().all(|b| b.is_ascii_alphanumeric() || b == b'_');
    let body = token.trim_end_matches('=');
    let b64token = !body.is_empty()
        && body.bytes().all(|b| b.is_ascii_alphanumeric() || b"-_~+/.".contains(&b));
    if !word(scheme) || !b64token {
        return Err(OAuthBearerError::AuthFormat);
    }
    if !scheme.eq_ignore_ascii_case("bearer") {
        return Err(OAuthBearerError::Scheme(scheme.to_string()));
    }
    Ok(token)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn parse(text: &str) -> Result<ClientFirst<'_>, OAuthBearerError> {
        parse_client_first(text.as_bytes())
    }

    #[test]
    fn kafkas_and_librdkafkas_first_messages() {
        let kafka = parse("n,,\u{1}auth=Bearer abc.def.\u{1}\u{1}").expect("java client");
        assert_eq!(kafka, ClientFirst { token: "abc.def.", authzid: "", extensions: vec![] });
        let ext =
            parse("n,a=alice,\u{1}auth=bearer  t0k=\u{1}traceId=x y=z\u{1}b=1\u{1}b=2\u{1}\u{1}")
                .expect("extensions");
        assert_eq!(ext.token, "t0k=");
        assert_eq!(ext.authzid, "alice");
        assert_eq!(ext.extensions, vec![("traceId", "x y=z"), ("b", "2")]);
        assert_eq!(
            parse("n,a=a=2Cb,\u{1}auth=Bearer t\u{1}\u{1}").expect("escape").authzid,
            "a=2Cb"
        );
    }

    #[test]
    fn malformed_first_messages() {
        use OAuthBearerError::*;
        for (text, want) in [
            ("", Malformed),
            ("\u{1}", Malformed),
            ("y,,\u{1}auth=Bearer t\u{1}\u{1}", Malformed),
            ("n,,\u{1}auth=Bearer t\u{1}", Malformed),
            ("n,,\u{1}auth=Bearer t", Malformed),
            ("n,a=x=y,\u{1}auth=Bearer t\u{1}\u{1}", Malformed),
            ("n,a=x\u{1}auth=Bearer t\u{1}\u{1}", Malformed),
            ("n,,\u{1}a1=b\u{1}auth=Bearer t\u{1}\u{1}", Malformed),
            ("n,,\u{1}k=\u{1}auth=Bearer t\u{1}\u{1}", Malformed),
            ("n,,\u{1}k\u{1}\u{1}", Malformed),
            ("n,,\u{1}\u{1}", NoAuth),
            ("n,,\u{1}x=y\u{1}\u{1}", NoAuth),
            ("n,,\u{1}auth=Bearer\u{1}\u{1}", AuthFormat),
            ("n,,\u{1}auth=Bearer a b\u{1}\u{1}", AuthFormat),
            ("n,,\u{1}auth=Bearer ==\u{1}\u{1}", AuthFormat),
            ("n,,\u{1}auth=Basic abc\u{1}\u{1}", Scheme("Basic".into())),
        ] {
            assert_eq!(parse(text), Err(want), "{text:?}");
        }
        assert_eq!(parse_client_first(&[b'n', b',', 0xff]), Err(Malformed));
        let generic = Malformed.client_message();
        assert!(generic.contains("invalid credentials with SASL mechanism OAUTHBEARER"));
        let refused = Refused(r#"{"status":"invalid_token"}"#.into());
        assert_eq!(refused.client_message(), r#"{"status":"invalid_token"}"#);
    }
}
