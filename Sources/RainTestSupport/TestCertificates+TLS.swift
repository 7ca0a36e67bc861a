import Foundation
import RainCrypto

extension TestCertificates {
    /// Test certificates in a fresh directory, removed after `body`.
    package static func withTemporaryDirectory(_ body: (TestCertificates) async throws -> Void) async throws {
        let directory = try makeTemporaryDirectory()
        defer { try? FileManager.default.removeItem(atPath: directory) }
        try await body(try await TestCertificates.make(in: directory))
    }

    /// A server context on `c`'s server key, presenting `certificate` (the server's chain by default).
    package static func serverContext(_ c: TestCertificates, certificate: String? = nil) throws -> TLSContext {
        try TLSContext.server(certificateChainFile: certificate ?? c.serverCertificatePath, privateKeyFile: c.serverKeyPath)
    }
}
