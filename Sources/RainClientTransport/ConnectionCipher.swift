import RainCore

/// The TLS session of a `ClientConnection` (`RainTransport` adapts RainCrypto's `TLSSession`): the
/// connection uses it only under its write lock.
package protocol ConnectionCipher: AnyObject {
    /// Encrypts `plaintext` into the pending output.
    func write(_ plaintext: [UInt8]) throws(RainError)
    /// The encrypted bytes waiting to be sent, removed from the session.
    func takeOutput() -> [UInt8]
    /// Bytes waiting in `takeOutput()`.
    var pendingOutputCount: Int { get }
    /// Feeds bytes read from the socket.
    func receive(_ bytes: UnsafeRawBufferPointer)
    /// Decrypts what the received records complete into `buffer`.
    func readPlaintext(into buffer: UnsafeMutableRawBufferPointer) throws(RainError) -> ConnectionCipherRead
}

/// What `ConnectionCipher.readPlaintext(into:)` produced.
package enum ConnectionCipherRead: Equatable, Sendable {
    /// This many plaintext bytes were written to the buffer.
    case bytes(Int)
    /// No complete record is buffered: receive more bytes first.
    case needsMoreInput
    /// The peer sent close_notify: no more plaintext will come.
    case closed
}
