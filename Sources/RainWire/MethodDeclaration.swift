/// One `rpc` of a proto service block, as the generated `Method` and `AuthorityMethod` list it: the
/// full name and the Swift types of the messages it declares. The route tests compare every route
/// with its declaration, so a route cannot take or answer other messages than the .proto says.
public struct MethodDeclaration: Sendable {
    /// The full method name, `/rain.wallet.v1.<Service>/<Rpc>`.
    public let name: String
    /// The Swift type of the request message.
    public let requestType: any WireMessage.Type
    /// The Swift type of the response message (of each stream message for a server stream).
    public let responseType: any WireMessage.Type
    /// Whether the method answers with a server stream.
    public let isServerStream: Bool

    /// A declaration.
    public init(
        _ name: String, _ requestType: any WireMessage.Type, _ responseType: any WireMessage.Type,
        isServerStream: Bool = false
    ) {
        self.name = name
        self.requestType = requestType
        self.responseType = responseType
        self.isServerStream = isServerStream
    }
}
