//! The two validators against hand-made unsecured tokens, RSA tokens signed once with OpenSSL
//! (the key's public half below; a fixed `now`) and P-256 tokens signed here with ring.

use base64::Engine as _;

use super::*;

const NOW_MS: i64 = 1_700_000_100_000;

/// OpenSSL's 2048-bit RSA key `rsa1`, public half.
const RSA_JWK: &str = r#"{"kty":"RSA","kid":"rsa1","use":"sig","n":"x8W0SoDCZJAN7osr_lW_dYmP_3sJgXavFpXvt1ViQLQ_c0X_z4stMRycdd6U5vA-G442WT7SF_73kwwLxRFqllHo5r9HAWySOD0IhjRz4CDqnk8qbMOdj72qLqIIr-WK-MGe9RFjhW3bPoBKTMqiEnJaG_76OERF6O6oOoqbT7hnUSVL_3C4tzqc76tMJYn70lyM9SYZ2-WUzB3Hfi4TZXzC8cQ1WH3iRvDuyRazBkrBEfee93OrbvOBxvEYbzuq3gXW6MdUJZ92Hn_7d0uvupg-OiiB6jyDw90cd0XOqEJrVMlYpDpfGOtl7cjhdw6v5AsmDLQO1QoUJTwQCzz7vQ","e":"AQAB"}"#;
/// `{"sub":"alice","iat":1700000000,"exp":1700003600,"aud":"kafka","iss":"https://idp.example",
/// "scope":"produce"}` signed by `rsa1` with RS256, RS384 and RS512 (`openssl dgst -sign`).
const RS256: &str = "eyJhbGciOiJSUzI1NiIsImtpZCI6InJzYTEiLCJ0eXAiOiJKV1QifQ.eyJzdWIiOiJhbGljZSIsImlhdCI6MTcwMDAwMDAwMCwiZXhwIjoxNzAwMDAzNjAwLCJhdWQiOiJrYWZrYSIsImlzcyI6Imh0dHBzOi8vaWRwLmV4YW1wbGUiLCJzY29wZSI6InByb2R1Y2UifQ.WvnyYl6vnIDVslasrWwVYnfDOmjq4HUtWaGoQy7ipzanuSBs0rIlUAJZTc5LcZ8C-BVQaXgaTAArI9G5G8v4MHBV2sqGT4HGFaqw6ul5fw5gl5hX4pNhJn6yHb7Auo881GQsROn8id6Sg5YIjgaKR6sIC_00d-5xqfBE1WISfTsOYQ--BPPE4qoKknT4-uQi3Lqyvu8MnIYBitmU9SHXbZkY1zvdZhWgd8NYGPfzaZ1p5umM3JM35KdCyJjXN7PRGBndtgqGd-5hMPe1Mr2CQ0OafMSMOrJp-RrXh8FOnr0lK_w1gb9TU9E-aR6qeGeYU3xasWYpQK7w0h0rVwjJ1g";
const RS384: &str = "eyJhbGciOiJSUzM4NCIsImtpZCI6InJzYTEiLCJ0eXAiOiJKV1QifQ.eyJzdWIiOiJhbGljZSIsImlhdCI6MTcwMDAwMDAwMCwiZXhwIjoxNzAwMDAzNjAwLCJhdWQiOiJrYWZrYSIsImlzcyI6Imh0dHBzOi8vaWRwLmV4YW1wbGUiLCJzY29wZSI6InByb2R1Y2UifQ.JWtzll4h6nT47N9jYztm412ZhAXQues9jW6Fy0nejGR4nNF-WHs1UGbQ6l46WkNk72pgpLA1212CZdxGOl-b0JUOvwP3HQkjfSB5Mi8G8TGFJ0K6wmn0JRgwOwaa34REoyruMQDBASUmPOYR6FanDDDuU4SUXdmoDj66WJRs_6foZ66f5cfJ318pEMBx03MxbZG8eh6HqbpSj0vCmBL_WF5BccU8aZrPF7H2LuiR40pqD30fwSuOwYTK23HWKzw-D-f3Ecn1U59pTtZ1M4U8_BRK6a9YxetH3y3NUQplGthZUrGIKEw1npKreSo2vq2-PhW22-AGf7JE4tgEMZf6eQ";
const RS512: &str = "eyJhbGciOiJSUzUxMiIsImtpZCI6InJzYTEiLCJ0eXAiOiJKV1QifQ.eyJzdWIiOiJhbGljZSIsImlhdCI6MTcwMDAwMDAwMCwiZXhwIjoxNzAwMDAzNjAwLCJhdWQiOiJrYWZrYSIsImlzcyI6Imh0dHBzOi8vaWRwLmV4YW1wbGUiLCJzY29wZSI6InByb2R1Y2UifQ.qHv-XQqsEUJkpB8C3fvhFTbBVe9AtRLN_SZP7_OxKcDxXay4BwFRiT9FIFuxIEc22ExzJG-yJr6vv9fh4b8OL-a9GlwbLHfcs9u8JJ_11h9pCbxL15tIQWPJd8jk-ZyktHP52CEvMVWhryHflkfBBhH-IwO2M8R3HbDCRGcpQVzZtHhqwyHbYOlN_ThzMb1-8kFdyU4d8EZYO7ONKj48WRyKFyE4Ba_GSn4LaPr3_jeuzS7BkwH1e8mR5WHngUsHkJ0ziTPuYf82DbsYaihN_MwUp4OQAkV2Zo-8J0g-Tj1wEevHS0dhGs5dKEi3Za3-1sK2DpKSAtMQVr03NxQTzg";

fn b64(bytes: &[u8]) -> String {
    base64::engine::general_purpose::URL_SAFE_NO_PAD.encode(bytes)
}

fn unsecured(claims: &str) -> String {
    format!("{}.{}.", b64(br#"{"alg":"none"}"#), b64(claims.as_bytes()))
}

fn options(pairs: &[(&str, &str)]) -> Vec<(String, String)> {
    pairs.iter().map(|(k, v)| ((*k).to_string(), (*v).to_string())).collect()
}

fn reason(result: Result<Validated, Rejection>) -> String {
    result.expect_err("refused").reason
}

#[test]
fn unsecured_tokens_as_kafkas_unsecured_validator() {
    let v = UnsecuredValidator::from_jaas(&[]).expect("defaults");
    let ok = unsecured(r#"{"sub":"alice","iat":1700000000,"exp":1700003600}"#);
    let want = Validated { principal: "alice".into(), expires_ms: 1_700_003_600_000 };
    assert_eq!(v.validate(&ok, NOW_MS), Ok(want));
    let expired = unsecured(r#"{"sub":"alice","exp":1700000000}"#);
    assert!(reason(v.validate(&expired, NOW_MS)).contains("Expiration Time"));
    let future = unsecured(r#"{"sub":"a","iat":1700000200,"exp":1700003600}"#);
    assert!(reason(v.validate(&future, NOW_MS)).contains("Issued At"));
    let skewed = UnsecuredValidator::from_jaas(&options(&[(
        "unsecuredValidatorAllowableClockSkewMs",
        "200000",
    )]))
    .expect("skew");
    assert!(skewed.validate(&expired, NOW_MS).is_ok(), "within the skew");
    assert!(skewed.validate(&future, NOW_MS).is_ok());

    for (token, why) in [
        (unsecured(r#"{"exp":1800000000}"#), "No principal name in JWT claim: sub"),
        (unsecured(r#"{"sub":"  ","exp":1800000000}"#), "No principal name"),
        (unsecured(r#"{"sub":7,"exp":1800000000}"#), "'sub' claim was not of type String"),
        (unsecured(r#"{"sub":"a"}"#), "No expiration time in JWT"),
        (unsecured(r#"{"sub":"a","exp":"soon"}"#), "'exp' claim was not of type Number"),
        (unsecured(r#"{"sub":"a","exp":1800000000,"scope":3}"#), "not of type List"),
        (unsecured(r#"{"sub":"a","iat":1800000000,"exp":1700000000}"#), "Issued At"),
        (format!("{}..", b64(br#"{"alg":"none"}"#)), "contains '..'"),
        ("a.b".to_string(), "3 dot-separated"),
        (format!("{}.{}.sig", b64(br#"{"alg":"none"}"#), b64(b"{}")), "digital signature"),
        (format!("{}.{}.", b64(br#"{"alg":"RS256"}"#), b64(b"{}")), "'none'"),
        (format!("{}.{}.", b64(b"{}"), b64(b"{}")), "Algorithm value"),
        (format!("{}.{}.", b64(b"[1]"), b64(b"{}")), "not a JSON object"),
        (format!("{}.{}.", b64(b"{"), b64(b"{}")), "malformed JSON"),
        (format!("@@.{}.", b64(b"{}")), "malformed Base64"),
    ] {
        let got = reason(v.validate(&token, NOW_MS));
        assert!(got.contains(why), "{token}: {got}");
    }
}

#[test]
fn unsecured_options_principal_claim_and_required_scope() {
    let v = UnsecuredValidator::from_jaas(&options(&[
        ("unsecuredLoginStringClaim_sub", "admin"),
        ("unsecuredValidatorPrincipalClaimName", "user"),
        ("unsecuredValidatorScopeClaimName", "scp"),
        ("unsecuredValidatorRequiredScope", "read  write"),
    ]))
    .expect("options");
    let both = unsecured(r#"{"user":"bob","exp":1800000000,"scp":["read"," write ",""]}"#);
    assert_eq!(v.validate(&both, NOW_MS).map(|t| t.principal), Ok("bob".into()));
    let one = unsecured(r#"{"user":"bob","exp":1800000000,"scp":"read write"}"#);
    let refused = v.validate(&one, NOW_MS).expect_err("a string scope is one element");
    assert_eq!(refused.insufficient_scope.as_deref(), Some("[read, write]"));
    assert_eq!(refused.challenge(), r#"{"status":"insufficient_scope", "scope":"[read, write]"}"#);
    assert!(refused.reason.contains("missing a required scope (read)"), "{}", refused.reason);
    let bad = |k, v| UnsecuredValidator::from_jaas(&options(&[(k, v)])).expect_err(v);
    assert_eq!(bad("unsecuredValidatorRequiredScope", "a\"b"), "Invalid scope value: a\"b");
    assert!(bad("unsecuredValidatorAllowableClockSkewMs", "-1").contains("must not be negative"));
    assert!(bad("unsecuredValidatorAllowableClockSkewMs", "x").contains("x"));
    assert_eq!(Rejection::invalid("x").challenge(), r#"{"status":"invalid_token"}"#);
}

fn signed(jwks: &str) -> (tempfile::TempDir, SignedValidator) {
    let dir = tempfile::tempdir().expect("tempdir");
    let path = dir.path().join("jwks.json");
    std::fs::write(&path, jwks).expect("write");
    let keys = JwksFile::open(&path, NOW_MS).expect("jwks");
    let v = SignedValidator {
        keys,
        expected_audience: vec!["kafka".into()],
        expected_issuer: Some("https://idp.example".into()),
        sub_claim: "sub".into(),
        scope_claim: "scope".into(),
        clock_skew_ms: 30_000,
    };
    (dir, v)
}

#[test]
fn rsa_signatures_and_claims() {
    let (_dir, mut v) = signed(&format!(r#"{{"keys":[{RSA_JWK}]}}"#));
    for token in [RS256, RS384, RS512] {
        assert_eq!(v.validate(token, NOW_MS).map(|t| t.principal), Ok("alice".into()), "{token}");
    }
    // exp is 1700003600: refused 30 s (the skew) after it, accepted just before.
    assert!(v.validate(RS256, 1_700_003_629_000).is_ok());
    assert!(reason(v.validate(RS256, 1_700_003_630_000)).contains("no longer valid"));
    let mut tampered = RS256.to_string();
    tampered.replace_range(tampered.len() - 3.., "AAA");
    assert!(reason(v.validate(&tampered, NOW_MS)).contains("signature is invalid"));
    let (head, rest) = RS256.split_once('.').expect("dot");
    let sig = rest.split_once('.').expect("dot").1;
    let other = b64(br#"{"sub":"mallory","iat":1700000000,"exp":1800000000,"aud":"kafka"}"#);
    let swapped = format!("{head}.{other}.{sig}");
    assert!(reason(v.validate(&swapped, NOW_MS)).contains("signature is invalid"));
    let none = format!("{}.{other}.", b64(br#"{"alg":"none"}"#));
    assert!(reason(v.validate(&none, NOW_MS)).contains("not allowed"));
    let hs = format!("{}.{other}.{sig}", b64(br#"{"alg":"HS256","kid":"rsa1"}"#));
    assert!(reason(v.validate(&hs, NOW_MS)).contains("not allowed"));
    assert!(reason(v.validate("a.b", NOW_MS)).contains("three sections"));

    v.expected_audience = vec!["other".into(), "more".into()];
    assert!(reason(v.validate(RS256, NOW_MS)).contains("doesn't contain an acceptable"));
    v.expected_audience = Vec::new();
    assert!(reason(v.validate(RS256, NOW_MS)).contains("no expected audience"), "as jose4j");
    v.expected_audience = vec!["kafka".into()];
    v.expected_issuer = Some("https://elsewhere".into());
    assert!(reason(v.validate(RS256, NOW_MS)).contains("Issuer (iss)"));
    v.expected_issuer = None;
    v.sub_claim = "client_id".into();
    assert!(reason(v.validate(RS256, NOW_MS)).contains("client_id"));
}

/// A P-256 key `kid` and its JWKS entry.
fn p256(kid: &str) -> (ring::signature::EcdsaKeyPair, String) {
    use ring::signature::{EcdsaKeyPair, KeyPair as _, ECDSA_P256_SHA256_FIXED_SIGNING as ALG};
    let rng = ring::rand::SystemRandom::new();
    let pkcs8 = EcdsaKeyPair::generate_pkcs8(&ALG, &rng).expect("generate");
    let pair = EcdsaKeyPair::from_pkcs8(&ALG, pkcs8.as_ref(), &rng).expect("pair");
    let point = pair.public_key().as_ref().to_vec();
    let jwk = format!(
        r#"{{"kty":"EC","crv":"P-256","kid":"{kid}","alg":"ES256","x":"{}","y":"{}"}}"#,
        b64(&point[1..33]),
        b64(&point[33..])
    );
    (pair, jwk)
}

fn es256(pair: &ring::signature::EcdsaKeyPair, kid: &str, claims: &str) -> String {
    let header = format!(r#"{{"alg":"ES256","kid":"{kid}"}}"#);
    let input = format!("{}.{}", b64(header.as_bytes()), b64(claims.as_bytes()));
    let rng = ring::rand::SystemRandom::new();
    let sig = pair.sign(&rng, input.as_bytes()).expect("sign");
    format!("{input}.{}", b64(sig.as_ref()))
}

#[test]
fn es256_with_required_claims() {
    let (pair, jwk) = p256("ec1");
    let (_dir, v) = signed(&format!(r#"{{"keys":[{RSA_JWK},{jwk}]}}"#));
    let good = r#"{"sub":"bob","iat":1700000000,"exp":1700000500,"aud":["x","kafka"],
        "iss":"https://idp.example","scope":["a","b"]}"#;
    let got = v.validate(&es256(&pair, "ec1", good), NOW_MS).expect("valid");
    assert_eq!(got, Validated { principal: "bob".into(), expires_ms: 1_700_000_500_000 });
    assert!(reason(v.validate(&es256(&pair, "ec9", good), NOW_MS)).contains("no key with kid"));
    assert!(reason(v.validate(&es256(&pair, "rsa1", good), NOW_MS)).contains("not a ES256 key"));
    for (claims, why) in [
        (r#"{"sub":"b","iat":1,"aud":"kafka","iss":"https://idp.example"}"#, "(exp)"),
        (r#"{"sub":"b","exp":1800000000,"aud":"kafka","iss":"https://idp.example"}"#, "(iat)"),
        (r#"{"sub":"b","iat":1,"exp":1800000000,"iss":"https://idp.example"}"#, "No Audience"),
        (r#"{"sub":"b","iat":1,"exp":1800000000,"aud":"kafka"}"#, "No Issuer"),
        (
            r#"{"sub":"b","iat":1,"exp":1800000000,"nbf":1800000000,"aud":"kafka",
               "iss":"https://idp.example"}"#,
            "not yet valid",
        ),
        (r#"{"sub":"","iat":1,"exp":1800000000,"aud":"kafka","iss":"https://idp.example"}"#, "sub"),
    ] {
        let got = reason(v.validate(&es256(&pair, "ec1", claims), NOW_MS));
        assert!(got.contains(why), "{claims}: {got}");
    }
}
