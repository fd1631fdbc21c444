package wal

import (
	"crypto/tls"
	"crypto/x509"
	"fmt"
	"os"

	"google.golang.org/grpc/credentials"
)

// TLSFiles is mTLS from three PEM files.
type TLSFiles struct {
	// CAFile holds the CA that signed the producers' certificates.
	CAFile string
	// CertFile and KeyFile are the client's certificate and key.
	CertFile string
	KeyFile  string
	// ServerName is the name the producers' certificates must carry, for when an address is
	// an IP. Empty: the host of each address.
	ServerName string
}

func (f *TLSFiles) credentials() (credentials.TransportCredentials, error) {
	pem, err := os.ReadFile(f.CAFile)
	if err != nil {
		return nil, fmt.Errorf("wal: TLS CA: %w", err)
	}
	roots := x509.NewCertPool()
	if !roots.AppendCertsFromPEM(pem) {
		return nil, fmt.Errorf("wal: TLS CA: no PEM certificate in %s", f.CAFile)
	}
	cert, err := tls.LoadX509KeyPair(f.CertFile, f.KeyFile)
	if err != nil {
		return nil, fmt.Errorf("wal: TLS client certificate: %w", err)
	}
	return credentials.NewTLS(&tls.Config{
		RootCAs:      roots,
		Certificates: []tls.Certificate{cert},
		ServerName:   f.ServerName,
		MinVersion:   tls.VersionTLS12,
	}), nil
}
