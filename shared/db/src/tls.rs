//! rustls for connections to RDS Proxy (or RDS). `ring` is named as the provider explicitly: other
//! dependencies enable more than one, and rustls then refuses to guess.

use super::DbError;
use rustls::pki_types::{pem::PemObject, CertificateDer};
use std::sync::Arc;
use tokio_postgres_rustls::MakeRustlsConnect;

pub(crate) fn connector(ca_bundle: Option<&std::path::Path>) -> Result<MakeRustlsConnect, DbError> {
    let mut roots = rustls::RootCertStore::empty();
    roots.extend(webpki_roots::TLS_SERVER_ROOTS.iter().cloned());
    if let Some(path) = ca_bundle {
        let certs = CertificateDer::pem_file_iter(path)
            .map_err(|e| DbError::Tls(format!("cannot read {}: {e}", path.display())))?;
        for cert in certs {
            let cert = cert.map_err(|e| DbError::Tls(format!("{}: {e}", path.display())))?;
            roots
                .add(cert)
                .map_err(|e| DbError::Tls(format!("{}: {e}", path.display())))?;
        }
    }
    let config = rustls::ClientConfig::builder_with_provider(Arc::new(
        rustls::crypto::ring::default_provider(),
    ))
    .with_safe_default_protocol_versions()
    .map_err(|e| DbError::Tls(e.to_string()))?
    .with_root_certificates(roots)
    .with_no_client_auth();
    Ok(MakeRustlsConnect::new(config))
}
