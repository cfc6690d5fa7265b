//! `shardlog certs`: writes a development CA and PEM certificates for a broker and clients,
//! enough to try TLS and mutual TLS on a laptop or in tests (never for production: the CA's
//! key lies next to its certificate).
//!
//! Runs on the main thread of the CLI process. Files written into `--out` (created if
//! missing; existing files are replaced):
//! `ca.pem` (the trust store for brokers and clients), `ca-key.pem`; `broker.pem` (key and
//! certificate in one file: `ssl.keystore.location` with `ssl.keystore.type=PEM`),
//! `broker-cert.pem`, `broker-key.pem`; and per `--client NAME` the same three as
//! `client-NAME.pem`, `client-NAME-cert.pem`, `client-NAME-key.pem` (subject `CN=NAME`,
//! principal `User:CN=NAME` under mutual TLS).

use std::path::{Path, PathBuf};

use anyhow::Context as _;
use rcgen::{
    BasicConstraints, CertificateParams, DistinguishedName, DnType, ExtendedKeyUsagePurpose, IsCa,
    KeyPair, SanType,
};

/// Flags of `shardlog certs`.
#[derive(clap::Args, Debug, Clone)]
pub struct CertsArgs {
    /// Directory to write the PEM files into.
    #[arg(long, value_name = "DIR", default_value = "shardlog-certs")]
    pub out: PathBuf,
    /// Host names and IP addresses the broker certificate is valid for (repeatable).
    #[arg(long = "host", value_name = "NAME", default_values_t = ["localhost".to_string(), "127.0.0.1".to_string()])]
    pub hosts: Vec<String>,
    /// A client certificate to make, with subject CN=NAME (repeatable).
    #[arg(long = "client", value_name = "NAME")]
    pub clients: Vec<String>,
}

pub fn run(args: &CertsArgs) -> anyhow::Result<()> {
    std::fs::create_dir_all(&args.out)
        .with_context(|| format!("cannot create {}", args.out.display()))?;
    let ca_key = KeyPair::generate()?;
    let mut ca_params = CertificateParams::new(Vec::new())?;
    ca_params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
    ca_params.distinguished_name = name("Shardlog development CA");
    let ca = ca_params.self_signed(&ca_key)?;
    write(&args.out, "ca.pem", &ca.pem())?;
    write(&args.out, "ca-key.pem", &ca_key.serialize_pem())?;
    let mut broker = CertificateParams::new(Vec::new())?;
    broker.distinguished_name = name("shardlog-broker");
    broker.subject_alt_names = args
        .hosts
        .iter()
        .map(|h| match h.parse::<std::net::IpAddr>() {
            Ok(ip) => Ok(SanType::IpAddress(ip)),
            Err(_) => Ok(SanType::DnsName(h.clone().try_into()?)),
        })
        .collect::<Result<_, rcgen::Error>>()?;
    // Both: a broker is also a TLS client of the other brokers (replica fetches, markers,
    // the quorum), and a listener with mutual TLS checks that its client may authenticate.
    broker.extended_key_usages =
        vec![ExtendedKeyUsagePurpose::ServerAuth, ExtendedKeyUsagePurpose::ClientAuth];
    leaf(&args.out, "broker", broker, (&ca, &ca_key))?;
    for client in &args.clients {
        let mut params = CertificateParams::new(Vec::new())?;
        params.distinguished_name = name(client);
        params.extended_key_usages = vec![ExtendedKeyUsagePurpose::ClientAuth];
        leaf(&args.out, &format!("client-{client}"), params, (&ca, &ca_key))?;
    }
    println!("wrote a development CA and certificates to {}", args.out.display());
    Ok(())
}

fn name(cn: &str) -> DistinguishedName {
    let mut dn = DistinguishedName::new();
    dn.push(DnType::CommonName, cn);
    dn
}

/// Signs `params` with the CA and writes `<stem>.pem` (key then certificate),
/// `<stem>-cert.pem` and `<stem>-key.pem`.
fn leaf(
    dir: &Path,
    stem: &str,
    params: CertificateParams,
    (ca, ca_key): (&rcgen::Certificate, &KeyPair),
) -> anyhow::Result<()> {
    let key = KeyPair::generate()?;
    let cert = params.signed_by(&key, ca, ca_key)?;
    write(dir, &format!("{stem}.pem"), &format!("{}{}", key.serialize_pem(), cert.pem()))?;
    write(dir, &format!("{stem}-cert.pem"), &cert.pem())?;
    write(dir, &format!("{stem}-key.pem"), &key.serialize_pem())
}

fn write(dir: &Path, file: &str, text: &str) -> anyhow::Result<()> {
    let path = dir.join(file);
    std::fs::write(&path, text).with_context(|| format!("cannot write {}", path.display()))
}
