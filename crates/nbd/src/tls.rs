//! TLS for NBD connections, with x509 certificates (rustls, pure Rust).
//!
//! A server given a [`TlsConfig`] requires TLS of every client (the NBD
//! protocol's FORCEDTLS mode): before `NBD_OPT_STARTTLS` every option but
//! `NBD_OPT_ABORT` is answered with `NBD_REP_ERR_TLS_REQD`, and
//! `NBD_OPT_EXPORT_NAME` (which cannot be answered with an error) closes
//! the connection. `NBD_OPT_STARTTLS` is acknowledged, the TLS handshake
//! follows on the same socket and negotiation goes on inside TLS, where a
//! second `NBD_OPT_STARTTLS` gets `NBD_REP_ERR_INVALID`.
//!
//! The handshake is bounded like any message: it must be over within the
//! stall timeout of the acknowledgement (and within the negotiation's own
//! deadline). After it, the stall timeout works as without TLS: a message
//! begun must arrive whole in time, however its records trickle. The
//! session runs TLS without waiting (rustls's `read_tls`/`write_tls` on
//! the non-blocking socket, in the server's `transport` module), so a TLS
//! client holds no thread either.
//!
//! ```no_run
//! use std::sync::Arc;
//! use zns_block::{BlockDevice, MemoryBlockDevice};
//! use zns_nbd::{Export, NbdServer, ServerConfig, TlsConfig};
//! let dev: Arc<dyn BlockDevice> = Arc::new(MemoryBlockDevice::new(4096, 1024));
//! // Clients need a certificate that ca-cert.pem signed; `None` asks none.
//! let ca = std::path::Path::new("ca-cert.pem");
//! let tls = TlsConfig::from_pem_files("server-cert.pem", "server-key.pem", Some(ca)).unwrap();
//! let config = ServerConfig { tls: Some(tls), ..ServerConfig::default() };
//! let server = NbdServer::bind("127.0.0.1:10809", vec![Export::new("disk", dev)], config).unwrap();
//! // qemu-io --object tls-creds-x509,id=tls0,endpoint=client,dir=DIR \
//! //   --image-opts driver=nbd,host=127.0.0.1,port=10809,export=disk,tls-creds=tls0
//! server.stop();
//! ```

use std::io;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rustls::crypto::CryptoProvider;
use rustls::pki_types::pem::PemObject;
use rustls::server::WebPkiClientVerifier;
use rustls::RootCertStore;

pub use rustls::pki_types::{CertificateDer, PrivateKeyDer};

use crate::error::Result;

/// Bytes counted in [`NbdServer::buffered_bytes`](crate::NbdServer::buffered_bytes)
/// for a TLS connection besides its plain buffers: an allowance for
/// rustls's own (at most 64 KiB of encrypted output, 16 KiB of decrypted
/// input, and one record, or a 64 KiB handshake message, being
/// reassembled).
pub const TLS_BUFFER: usize = 160 * 1024;

/// The TLS settings of a server: its certificate chain and private key,
/// and optionally the certificate authority whose client certificates it
/// requires.
///
/// Protocol versions are TLS 1.2 and 1.3, cipher suites rustls's defaults
/// (with the *ring* provider); session resumption is off (NBD clients
/// connect rarely and for long).
///
/// Thread safety: `Send + Sync`; cloning shares the configuration.
#[derive(Clone)]
pub struct TlsConfig {
    config: Arc<rustls::ServerConfig>,
    client_certificates: bool,
}

impl std::fmt::Debug for TlsConfig {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("TlsConfig")
            .field("client_certificates", &self.client_certificates)
            .finish_non_exhaustive()
    }
}

/// Why TLS could not be set up, or a TLS session failed.
///
/// Each message carries the underlying error's (which is therefore not
/// also given as [`std::error::Error::source`], so that a report of the
/// whole chain says it once).
///
/// Thread safety: `Send + Sync`.
#[derive(Debug, thiserror::Error)]
#[non_exhaustive]
pub enum TlsError {
    /// A file could not be read.
    #[error("cannot read {what} {}: {error}", path.display())]
    Read {
        /// What the file should hold ("certificate", "private key", ...).
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// The error reading it.
        error: io::Error,
    },
    /// A file is not valid PEM.
    #[error("cannot parse {what} {}: {error}", path.display())]
    Parse {
        /// What the file should hold.
        what: &'static str,
        /// The file.
        path: PathBuf,
        /// The PEM error.
        error: rustls::pki_types::pem::Error,
    },
    /// A file holds no PEM section of the kind wanted.
    #[error("{} holds no {what} (a PEM section such as \"-----BEGIN {marker}-----\")", path.display())]
    Missing {
        /// What the file should hold.
        what: &'static str,
        /// The PEM marker expected.
        marker: &'static str,
        /// The file.
        path: PathBuf,
    },
    /// The private key is not the key of the server's certificate.
    #[error("the private key does not belong to the certificate")]
    KeyMismatch,
    /// The certificate chain and key do not make a usable server identity
    /// (a key of a kind rustls does not support, say).
    #[error("the server certificate and private key are unusable: {0}")]
    Certificate(rustls::Error),
    /// The client certificate authority is unusable.
    #[error("the client certificate authority is unusable: {0}")]
    ClientCa(String),
    /// The TLS handshake with a client failed: no client certificate, or
    /// one the client CA did not sign, no protocol version or cipher suite
    /// in common, or a peer that does not speak TLS after all.
    #[error("TLS handshake failed: {0}")]
    Handshake(rustls::Error),
    /// The TLS session broke after the handshake (a record that does not
    /// decrypt, an alert from the client).
    #[error("TLS session failed: {0}")]
    Session(rustls::Error),
    /// The client selected an export with `NBD_OPT_EXPORT_NAME` before
    /// starting TLS, which the server requires; the protocol leaves no way
    /// but closing the connection.
    #[error("the client chose an export without starting TLS, which this server requires")]
    NotStarted,
}

/// The crypto provider: *ring*, named explicitly so that another provider
/// linked into the process does not make the choice ambiguous.
fn provider() -> Arc<CryptoProvider> {
    Arc::new(rustls::crypto::ring::default_provider())
}

fn read_file(what: &'static str, path: &Path) -> Result<Vec<u8>, TlsError> {
    std::fs::read(path).map_err(|error| TlsError::Read { what, path: path.into(), error })
}

/// Every certificate of a PEM file, in order; at least one.
fn certificates(what: &'static str, path: &Path) -> Result<Vec<CertificateDer<'static>>, TlsError> {
    let pem = read_file(what, path)?;
    let certs = CertificateDer::pem_slice_iter(&pem)
        .collect::<Result<Vec<_>, _>>()
        .map_err(|error| TlsError::Parse { what, path: path.into(), error })?;
    if certs.is_empty() {
        return Err(TlsError::Missing { what, marker: "CERTIFICATE", path: path.into() });
    }
    Ok(certs)
}

impl TlsConfig {
    /// Reads the server's certificate chain (`cert`: PEM, the server's
    /// certificate first, then any intermediates) and private key (`key`:
    /// PEM, PKCS#8, PKCS#1 or SEC1) and, with `client_ca`, the certificate
    /// authorities (PEM) one of which must have signed every client's
    /// certificate; without it clients are not asked for certificates.
    pub fn from_pem_files(
        cert: impl AsRef<Path>,
        key: impl AsRef<Path>,
        client_ca: Option<&Path>,
    ) -> Result<TlsConfig, TlsError> {
        let chain = certificates("certificate", cert.as_ref())?;
        let key_path = key.as_ref();
        let pem = read_file("private key", key_path)?;
        let key = PrivateKeyDer::from_pem_slice(&pem).map_err(|error| match error {
            rustls::pki_types::pem::Error::NoItemsFound => TlsError::Missing {
                what: "private key",
                marker: "PRIVATE KEY",
                path: key_path.into(),
            },
            error => TlsError::Parse { what: "private key", path: key_path.into(), error },
        })?;
        let roots = match client_ca {
            Some(path) => Some(certificates("client CA certificate", path)?),
            None => None,
        };
        TlsConfig::new(chain, key, roots)
    }

    /// The same from DER values: the chain (server certificate first),
    /// its key, and the client certificate authorities, if clients must
    /// present certificates.
    pub fn new(
        chain: Vec<CertificateDer<'static>>,
        key: PrivateKeyDer<'static>,
        client_ca: Option<Vec<CertificateDer<'static>>>,
    ) -> Result<TlsConfig, TlsError> {
        let provider = provider();
        let builder = rustls::ServerConfig::builder_with_provider(Arc::clone(&provider))
            .with_safe_default_protocol_versions()
            .map_err(TlsError::Certificate)?;
        let client_certificates = client_ca.is_some();
        let builder = match client_ca {
            Some(cas) => {
                let mut roots = RootCertStore::empty();
                for ca in cas {
                    roots.add(ca).map_err(|e| TlsError::ClientCa(e.to_string()))?;
                }
                let verifier =
                    WebPkiClientVerifier::builder_with_provider(Arc::new(roots), provider)
                        .build()
                        .map_err(|e| TlsError::ClientCa(e.to_string()))?;
                builder.with_client_cert_verifier(verifier)
            }
            None => builder.with_no_client_auth(),
        };
        let mut config = builder.with_single_cert(chain, key).map_err(|e| match e {
            rustls::Error::InconsistentKeys(rustls::InconsistentKeys::KeyMismatch) => {
                TlsError::KeyMismatch
            }
            e => TlsError::Certificate(e),
        })?;
        config.send_tls13_tickets = 0;
        config.session_storage = Arc::new(rustls::server::NoServerSessionStorage {});
        Ok(TlsConfig { config: Arc::new(config), client_certificates })
    }

    /// Whether clients must present a certificate signed by the client CA.
    pub fn requires_client_certificates(&self) -> bool {
        self.client_certificates
    }

    /// The rustls configuration a connection's session starts from.
    pub(crate) fn rustls(&self) -> &Arc<rustls::ServerConfig> {
        &self.config
    }
}
