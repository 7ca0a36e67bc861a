import Foundation
import RainConfig
import RainCore
import RainKeyStore
import Testing

@testable import RainDevice

@Suite struct StorageConfigTests {
    func parse(_ json: String) throws(RainError) -> DaemonConfig { try DaemonConfig.parse(Data(json.utf8)) }

    @Test func defaultsAreAutoAndTheKernelResourceManager() throws {
        let config = try parse("{}")
        #expect(config.storage.provider == .auto)
        #expect(config.storage.tcti == "device:/dev/tpmrm0")
    }

    @Test func readsTheProviderAndTheTCTI() throws {
        let config = try parse(#"{"storage": {"provider": "tpm2", "tcti": "swtpm:path=/tmp/swtpm.sock"}}"#)
        #expect(config.storage.provider == .provider(.tpm2))
        #expect(config.storage.tcti == "swtpm:path=/tmp/swtpm.sock")
        #expect(try parse(#"{"storage": {"provider": "secret-service"}}"#).storage.provider == .provider(.secretService))
        #expect(try parse(#"{"storage": {"provider": "file"}}"#).storage.provider == .provider(.file))
    }

    @Test(arguments: [
        (#"{"storage": {"provider": "kernel-keyring"}}"#, "storage.provider"),
        (#"{"storage": {"provider": 2}}"#, "storage.provider"),
        (#"{"storage": {"tcti": "libtpms:/x"}}"#, "storage.tcti"),
        (#"{"storage": {"tcti": "device:/dev/tpm0\nswtpm:"}}"#, "storage.tcti"),
        (#"{"storage": {"providr": "file"}}"#, "storage.providr"),
        (#"{"storage": "file"}"#, "storage"),
    ])
    func badValuesAreRefusedNamingTheKey(json: String, field: String) {
        let error = #expect(throws: RainError.self) { try parse(json) }
        #expect(error?.code == .invalidArgument)
        #expect(error?.details.field == field)
    }
}
