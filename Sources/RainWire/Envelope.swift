import RainCore

/// One protocol message: a client-chosen request id and what the message is.
public struct Envelope: Sendable, Equatable {
    /// What an envelope carries.
    public enum Kind: Sendable, Equatable {
        /// Client → server: start a call.
        case request(WireRequest)
        /// Server → client: a call's final answer; also ends a stream.
        case response(WireResponse)
        /// Server → client: one message of a server stream.
        case stream(payload: [UInt8])
        /// Client → server: stop the call with this id.
        case cancel
    }

    /// Chosen by the client; unique among its calls in flight on one connection.
    public var requestID: UInt64
    public var kind: Kind

    public init(requestID: UInt64, kind: Kind) {
        self.requestID = requestID
        self.kind = kind
    }
}

/// The metadata key that names the profile of a call.
public let profileMetadataKey = "profile"

/// A call's start.
public struct WireRequest: Sendable, Equatable {
    /// gRPC form, for example `/rain.wallet.v1.Auth/SendLoginCode`.
    public var method: String
    /// The method's request message.
    public var payload: [UInt8]
    /// Relative deadline; 0 means the server's default.
    public var timeoutMilliseconds: UInt32
    /// Key-value metadata in order.
    public var metadata: [MetadataEntry]

    public init(method: String, payload: [UInt8], timeoutMilliseconds: UInt32 = 0, metadata: [MetadataEntry] = []) {
        self.method = method
        self.payload = payload
        self.timeoutMilliseconds = timeoutMilliseconds
        self.metadata = metadata
    }

    /// The profile named in the metadata, or nil.
    public var profile: String? { metadata.last(where: { $0.key == profileMetadataKey })?.value }
}

/// One metadata pair.
public struct MetadataEntry: Sendable, Equatable {
    public var key: String
    public var value: String
    public init(key: String, value: String) {
        self.key = key
        self.value = value
    }
}

/// A call's final answer.
public struct WireResponse: Sendable, Equatable {
    /// Success, or the Rain error.
    public var status: WireStatus
    /// The method's response message (empty on error).
    public var payload: [UInt8]

    public init(status: WireStatus, payload: [UInt8] = []) {
        self.status = status
        self.payload = payload
    }

    /// A successful response.
    public static func ok(_ payload: [UInt8]) -> WireResponse { WireResponse(status: .ok, payload: payload) }
    /// A failed response.
    public static func failure(_ error: RainError) -> WireResponse { WireResponse(status: WireStatus(error)) }
}

/// Code 0 for success, else a Rain error number with a message and typed details.
public struct WireStatus: Sendable, Equatable {
    public var code: UInt32
    public var message: String
    public var details: RainError.Details

    public init(code: UInt32, message: String, details: RainError.Details = .init()) {
        self.code = code
        self.message = message
        self.details = details
    }

    /// Wraps a Rain error.
    public init(_ error: RainError) {
        self.init(code: error.code.rawValue, message: error.message, details: error.details)
    }

    public static let ok = WireStatus(code: 0, message: "")

    public var isOK: Bool { code == 0 }

    /// The Rain error this status carries, or nil for success.
    public var error: RainError? {
        isOK ? nil : RainError(RainError.Code(code), message, details: details)
    }
}
