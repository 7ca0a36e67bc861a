/// The protocol version reported by GetInfo. Bumped only for incompatible changes (never so far).
public let protocolVersion: UInt32 = 1
