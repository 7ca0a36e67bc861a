// The client side of the transport (`ClientConnection`, `UnixSocket`) lives in RainClientTransport,
// which does not link OpenSSL; the daemon's modules keep reaching it through RainTransport.
@_exported import RainClientTransport
