//! A throwaway certificate authority for mTLS tests: a CA, server certificates for loopback,
//! client certificates named by SAN URI, DNS SAN or CN (expired ones too), and a second CA
//! nobody trusts. Files are written to a temporary folder, as a deployment mounts them.

use std::path::PathBuf;

use rcgen::{
    BasicConstraints, CertificateParams, CertifiedIssuer, DnType, IsCa, KeyPair, KeyUsagePurpose,
    SanType, date_time_ymd,
};
use tonic::transport::{Certificate, Channel, ClientTlsConfig, Identity};

/// A client certificate and its key, in PEM.
#[derive(Debug, Clone)]
pub struct ClientCert {
    pub cert: String,
    pub key: String,
}

/// How a client certificate names its holder.
#[derive(Debug, Clone, Copy)]
pub enum Named<'a> {
    Uri(&'a str),
    Dns(&'a str),
    Cn(&'a str),
}

pub struct Pki {
    pub dir: PathBuf,
    ca: CertifiedIssuer<'static, KeyPair>,
}

impl std::fmt::Debug for Pki {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Pki").field("dir", &self.dir).finish()
    }
}

impl Pki {
    /// A new CA, its certificate written to `ca.pem` in a fresh folder.
    pub fn new(name: &str) -> Self {
        let dir = std::env::temp_dir().join(crate::unique("pki"));
        std::fs::create_dir_all(&dir).unwrap();
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        params.is_ca = IsCa::Ca(BasicConstraints::Unconstrained);
        params.key_usages = vec![KeyUsagePurpose::KeyCertSign, KeyUsagePurpose::CrlSign];
        params.distinguished_name.push(DnType::CommonName, name);
        let ca = CertifiedIssuer::self_signed(params, KeyPair::generate().unwrap()).unwrap();
        std::fs::write(dir.join("ca.pem"), ca.pem()).unwrap();
        Self { dir, ca }
    }

    pub fn ca_path(&self) -> PathBuf {
        self.dir.join("ca.pem")
    }

    pub fn ca_pem(&self) -> String {
        self.ca.pem()
    }

    /// A server certificate for localhost and 127.0.0.1, written as `<file>.pem` and
    /// `<file>.key`; returns both paths.
    pub fn server(&self, file: &str) -> (PathBuf, PathBuf) {
        self.loopback_leaf(file, None)
    }

    /// A pod's certificate, as cert-manager would issue one for a Kubernetes workload: for
    /// localhost and 127.0.0.1 (it serves) and naming the workload by SAN URI (it is a client
    /// too), written as `<file>.pem` and `<file>.key`; returns both paths.
    pub fn workload(&self, file: &str, uri: &str) -> (PathBuf, PathBuf) {
        self.loopback_leaf(file, Some(uri))
    }

    fn loopback_leaf(&self, file: &str, uri: Option<&str>) -> (PathBuf, PathBuf) {
        let mut params =
            CertificateParams::new(vec!["localhost".to_owned(), "127.0.0.1".to_owned()]).unwrap();
        if let Some(uri) = uri {
            params
                .subject_alt_names
                .push(SanType::URI(uri.try_into().unwrap()));
        }
        params
            .distinguished_name
            .push(DnType::CommonName, "localhost");
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.ca).unwrap();
        let (cert_path, key_path) = (
            self.dir.join(format!("{file}.pem")),
            self.dir.join(format!("{file}.key")),
        );
        std::fs::write(&cert_path, cert.pem()).unwrap();
        std::fs::write(&key_path, key.serialize_pem()).unwrap();
        (cert_path, key_path)
    }

    /// A TLS server's flags for a new server certificate (`<file>.pem`), client certificates
    /// from this CA required, principals mapped by `rules`.
    pub fn server_flags(&self, file: &str, rules: &str) -> wal_runtime::tls::TlsFlags {
        let (cert, key) = self.server(file);
        wal_runtime::tls::TlsFlags {
            tls_cert: Some(cert),
            tls_key: Some(key),
            tls_client_ca: Some(self.ca_path()),
            tls_reload_secs: 10,
            principal_rules: rules.to_owned(),
        }
    }

    /// A client certificate naming its holder as `named`.
    pub fn client(&self, named: Named<'_>) -> ClientCert {
        self.issue(named, false)
    }

    /// A client certificate that expired in 2020.
    pub fn expired_client(&self, named: Named<'_>) -> ClientCert {
        self.issue(named, true)
    }

    fn issue(&self, named: Named<'_>, expired: bool) -> ClientCert {
        let mut params = CertificateParams::new(Vec::<String>::new()).unwrap();
        match named {
            Named::Uri(uri) => params
                .subject_alt_names
                .push(SanType::URI(uri.try_into().unwrap())),
            Named::Dns(dns) => params
                .subject_alt_names
                .push(SanType::DnsName(dns.try_into().unwrap())),
            Named::Cn(_) => {}
        }
        // A SAN's certificate gets a CN of its own, so a test shows the SAN is what counts.
        let cn = match named {
            Named::Uri(_) | Named::Dns(_) => "a common name the SAN takes precedence over",
            Named::Cn(n) => n,
        };
        params.distinguished_name.push(DnType::CommonName, cn);
        if expired {
            params.not_before = date_time_ymd(2019, 1, 1);
            params.not_after = date_time_ymd(2020, 1, 1);
        }
        let key = KeyPair::generate().unwrap();
        let cert = params.signed_by(&key, &self.ca).unwrap();
        ClientCert {
            cert: cert.pem(),
            key: key.serialize_pem(),
        }
    }
}

/// A channel to a TLS server on loopback that trusts `ca_pem`, presenting `client` if given.
/// Connects lazily: a refused handshake surfaces on the first call.
pub fn tls_channel(
    address: std::net::SocketAddr,
    ca_pem: &str,
    client: Option<&ClientCert>,
) -> Channel {
    let mut tls = ClientTlsConfig::new()
        .ca_certificate(Certificate::from_pem(ca_pem))
        .domain_name("localhost");
    if let Some(client) = client {
        tls = tls.identity(Identity::from_pem(&client.cert, &client.key));
    }
    Channel::from_shared(format!("https://{address}"))
        .unwrap()
        .tls_config(tls)
        .unwrap()
        .connect_lazy()
}
