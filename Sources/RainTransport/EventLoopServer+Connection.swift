import RainCore
import RainCrypto
import RainSystem
import RainWire

extension EventLoopServer {
    /// A call that outlived `ServerHandler.handle`: its responder's token, and whether it is a stream.
    final class Call {
        let token: UInt64
        var isStream = false
        init(token: UInt64) { self.token = token }
    }

    /// One connection. Its state is the loop thread's alone (see `EventLoopServer`), so its
    /// properties go without the dynamic exclusivity check: no access to one of them ever
    /// overlaps another on that one thread, and the checks are a large part of a call's cost
    /// (docs/performance.md).
    final class Connection {
        let id: ConnectionID
        let fd: Int32
        let peer: PeerCredentials
        /// What the connection counts against for the per-peer limit; nil for the daemon's own uid.
        let peerKey: PeerKey?
        let acceptedAt: LoopInstant
        /// What epoll reports for it (`EventLoopServer.token(fd:id:)`).
        let epollToken: UInt64
        /// When the last byte of input arrived (the progress of a partial frame).
        @exclusivity(unchecked) var lastInputAt: LoopInstant
        /// True once the TLS handshake is done and a first valid request was decoded.
        @exclusivity(unchecked) var isAdmitted = false
        /// The plaintext of unfinished frames held in `decoder`, as counted in the server's total.
        @exclusivity(unchecked) var bufferedInput = 0
        /// Ciphertext received while the TLS handshake is not done.
        @exclusivity(unchecked) var handshakeInput = 0
        /// A TLS record is partly received (held by OpenSSL, not by the decoder).
        @exclusivity(unchecked) var hasPartialRecord = false
        /// In the server's set of connections with a deadline.
        @exclusivity(unchecked) var isTimed = false
        @exclusivity(unchecked) var decoder: FrameDecoder
        @exclusivity(unchecked) var output: [UInt8] = []
        @exclusivity(unchecked) var outputOffset = 0
        @exclusivity(unchecked) var calls: [UInt64: Call] = [:]
        @exclusivity(unchecked) var wantsWrite = false
        @exclusivity(unchecked) var closeAfterFlush = false
        @exclusivity(unchecked) var isReadClosed = false
        /// Set when the server closed it (it is no longer in `connections`).
        @exclusivity(unchecked) var isClosed = false
        /// The handler's memo for the quick lane (`ServerHandler.quickAnswer`).
        @exclusivity(unchecked) var quickMemo: AnyObject?
        /// The last request the quick lane recognised, after its id (`QuickShape`).
        @exclusivity(unchecked) var quickShape: QuickShape?
        /// The TLS state when the server speaks TLS: frames are encrypted into `output` and input
        /// is decrypted before the decoder sees it.
        @exclusivity(unchecked) var tls: TLSSession?
        /// The TLS exporter value, once the handshake completed.
        @exclusivity(unchecked) var channelBinding: [UInt8]?
        /// The peer's pidfd (Unix connections), closed with the connection.
        @exclusivity(unchecked) var process: ProcessDescriptor?
        /// Unix connections: the pid every read must have been written by (the peer's, held by
        /// `process`); nil on TCP.
        @exclusivity(unchecked) var writer: Int32?
        /// The bytes queued when the peer's executable was read at accept (`SIOCINQ`): a frame
        /// starting before this offset may have been written by the program the peer ran before
        /// an exec, so a sensitive call in it is refused (`RequestContext.wasQueuedBeforeIdentity`).
        @exclusivity(unchecked) var inputQueuedAtAccept = 0
        /// The stream offset of the next frame's first byte.
        @exclusivity(unchecked) var nextFrameOffset = 0
        init(
            id: ConnectionID, fd: Int32, peer: PeerCredentials, peerKey: PeerKey?, maximumFrame: Int,
            now: LoopInstant
        ) {
            self.id = id
            self.fd = fd
            self.peer = peer
            self.peerKey = peerKey
            self.acceptedAt = now
            self.lastInputAt = now
            self.epollToken = EventLoopServer.token(fd: fd, id: id.rawValue)
            self.decoder = FrameDecoder(maximumLength: maximumFrame)
        }
        var pendingOutput: Int { output.count - outputOffset }
        /// True while the connection has a deadline: not admitted yet, or holding a partial frame.
        var needsDeadline: Bool { !isAdmitted || bufferedInput > 0 || hasPartialRecord }
    }
}
