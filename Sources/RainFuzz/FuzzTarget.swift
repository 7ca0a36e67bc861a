import Foundation
import RainCore

/// One libFuzzer target: what a fuzz executable feeds its inputs to, and what the seeded replay
/// test (`FuzzCorpusReplayTests`) runs every committed corpus file through. Each target calls the
/// project's real decoding code; nothing here re-implements a decoder.
package enum FuzzTarget: String, CaseIterable, Sendable {
    /// `FrameDecoder` fed in input-chosen chunk sizes, then `Envelope.decode` on every frame.
    case frame = "FuzzFrame"
    /// Every device and authority payload decoder (`WireMessage.decode`); the first byte picks the type.
    case requests = "FuzzRequests"
    /// Bounded CBOR, authenticator data, COSE keys, attestation objects, client data, W3C JSON forms.
    case webAuthn = "FuzzWebAuthn"
    /// `DaemonConfig.load` on a file holding the input.
    case config = "FuzzConfig"
    /// What the daemon reads from its state directory: session files, profile state, the outbox,
    /// the device id, key files, and the software authenticator's key file.
    case storage = "FuzzStorage"
    /// What a signature request is (EVM messages, typed-data JSON, RLP transactions, Solana
    /// messages and off-chain messages) through `SigningPreparation.prepare` and `finish`.
    case signing = "FuzzSigning"

    /// Runs one input.
    /// - Parameters:
    ///   - input: the fuzzer's bytes.
    ///   - scratch: where targets that read files write the input first.
    /// - Returns: what became of the input; `.broken` means a bug (an invariant does not hold).
    package func run(_ input: [UInt8], scratch: FuzzScratch) -> FuzzOutcome {
        switch self {
        case .frame: return FrameFuzzing.run(input)
        case .requests: return RequestFuzzing.run(input)
        case .webAuthn: return WebAuthnFuzzing.run(input)
        case .config: return ConfigFuzzing.run(input, scratch: scratch)
        case .storage: return StorageFuzzing.run(input, scratch: scratch)
        case .signing: return SigningFuzzing.run(input)
        }
    }

    /// Meaningful seed inputs, built with the project's own encoders (and the software
    /// authenticator), named for the file each is written to.
    /// - Throws: RAIN_502 when a seed cannot be built.
    package func seeds(scratch: FuzzScratch) throws(RainError) -> [(name: String, bytes: [UInt8])] {
        switch self {
        case .frame: return try FrameFuzzing.seeds()
        case .requests: return try RequestFuzzing.seeds()
        case .webAuthn: return try WebAuthnFuzzing.seeds(scratch: scratch)
        case .config: return ConfigFuzzing.seeds()
        case .storage: return try StorageFuzzing.seeds(scratch: scratch)
        case .signing: return SigningFuzzing.seeds()
        }
    }
}

/// What one input did.
package enum FuzzOutcome: Sendable {
    /// The input decoded and every invariant held.
    case accepted
    /// The input was refused with a Rain error, as hostile input must be.
    case rejected(RainError)
    /// A bug: the input decoded but an invariant does not hold (named in the text).
    case broken(String)

    /// The invariant that broke, or nil.
    package var brokenInvariant: String? {
        if case .broken(let why) = self { return why }
        return nil
    }

    /// Decodes with `decode`, then checks what it returns with `check`: an input `decode` refuses
    /// is `.rejected` with its error.
    static func decoded<Value>(
        by decode: () throws(RainError) -> Value, _ check: (Value) -> FuzzOutcome
    ) -> FuzzOutcome {
        let value: Value
        do {
            value = try decode()
        } catch {
            return .rejected(error)
        }
        return check(value)
    }
}

/// Runs each step and returns the first broken invariant, else the last outcome that was not
/// `.accepted`, else `.accepted`. Targets that try one input several ways use it.
func combine(_ outcomes: [FuzzOutcome]) -> FuzzOutcome {
    if let broken = outcomes.first(where: { $0.brokenInvariant != nil }) { return broken }
    return outcomes.last(where: { if case .rejected = $0 { return true } else { return false } }) ?? .accepted
}
