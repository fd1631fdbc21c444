//! Who is on the other end of a TLS connection: the name its client certificate gives and the
//! principal that name maps to. Worked out once per connection, at the handshake, and handed to
//! every request on it as a request extension ([`Peer`]).

use std::io;
use std::net::SocketAddr;
use std::pin::Pin;
use std::sync::Arc;
use std::task::{Context, Poll};

use tokio::io::{AsyncRead, AsyncWrite, ReadBuf};
use tokio::net::TcpStream;
use tokio_rustls::server::TlsStream;
use tonic::transport::server::Connected;
use x509_parser::prelude::{FromDer as _, GeneralName, X509Certificate};

use super::rules::PrincipalRules;

/// A client on a TLS connection, as requests see it (`request.extensions().get::<Peer>()`).
#[derive(Debug, Clone)]
pub struct Peer {
    pub remote: Option<SocketAddr>,
    /// The name the client certificate gives (a SAN URI, else a DNS SAN, else the subject's
    /// CN); `None` without a certificate.
    pub certificate_name: Option<Arc<str>>,
    /// What the name maps to under the principal rules; `None` when no rule matched.
    pub principal: Option<Arc<str>>,
}

impl Peer {
    pub(super) fn of(stream: &TlsStream<TcpStream>, rules: &PrincipalRules) -> Self {
        let (tcp, session) = stream.get_ref();
        let certificate_name = session
            .peer_certificates()
            .and_then(|chain| chain.first())
            .and_then(|leaf| certificate_name(leaf.as_ref()));
        let principal = certificate_name.as_deref().and_then(|name| rules.map(name));
        Self {
            remote: tcp.peer_addr().ok(),
            certificate_name: certificate_name.map(Arc::from),
            principal: principal.map(Arc::from),
        }
    }
}

/// The name a certificate gives its holder: its first SAN URI (a SPIFFE ID, say), else its
/// first DNS SAN, else its subject's common name. `None` for bytes that are no certificate.
pub fn certificate_name(der: &[u8]) -> Option<String> {
    let (_, cert) = X509Certificate::from_der(der).ok()?;
    if let Ok(Some(san)) = cert.subject_alternative_name() {
        let names = &san.value.general_names;
        let uri = names.iter().find_map(|n| match n {
            GeneralName::URI(uri) => Some(*uri),
            _ => None,
        });
        let dns = names.iter().find_map(|n| match n {
            GeneralName::DNSName(dns) => Some(*dns),
            _ => None,
        });
        if let Some(name) = uri.or(dns) {
            return Some(name.to_owned());
        }
    }
    cert.subject()
        .iter_common_name()
        .next()
        .and_then(|cn| cn.as_str().ok())
        .map(str::to_owned)
}

/// A served TLS connection, carrying its [`Peer`] to tonic.
#[derive(Debug)]
pub struct PeerStream {
    pub(super) inner: TlsStream<TcpStream>,
    pub(super) peer: Peer,
}

impl Connected for PeerStream {
    type ConnectInfo = Peer;

    fn connect_info(&self) -> Peer {
        self.peer.clone()
    }
}

impl AsyncRead for PeerStream {
    fn poll_read(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &mut ReadBuf<'_>,
    ) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_read(cx, buf)
    }
}

impl AsyncWrite for PeerStream {
    fn poll_write(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        buf: &[u8],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write(cx, buf)
    }

    fn poll_write_vectored(
        self: Pin<&mut Self>,
        cx: &mut Context<'_>,
        bufs: &[io::IoSlice<'_>],
    ) -> Poll<io::Result<usize>> {
        Pin::new(&mut self.get_mut().inner).poll_write_vectored(cx, bufs)
    }

    fn is_write_vectored(&self) -> bool {
        self.inner.is_write_vectored()
    }

    fn poll_flush(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_flush(cx)
    }

    fn poll_shutdown(self: Pin<&mut Self>, cx: &mut Context<'_>) -> Poll<io::Result<()>> {
        Pin::new(&mut self.get_mut().inner).poll_shutdown(cx)
    }
}
