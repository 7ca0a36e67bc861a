// rainwallet-tpm-probe: a program of the daemon's own user that does what any such program can
// do with a platform passkey, for the attack tests: it unseals the daemon's storage key from the
// TPM (its blob is in the state directory the user owns), opens the platform passkey file with
// the key derived as the daemon derives it, loads each passkey's key blob into the TPM and asks
// it to sign without a PIN. Prints one JSON line: how many passkeys it found, how many it could
// sign with, the errors the TPM gave, and the TPM's count of wrong authorizations afterwards.
// Never packaged; the tests run it as an unprivileged uid.
//
//   rainwallet-tpm-probe STATE_DIRECTORY TCTI
import FoundationEssentials
import Glibc
import RainCore
import RainCrypto
import RainKeyStore

struct PasskeyFile: Decodable {
    struct Credential: Decodable { var keyBlob: String }
    var credentials: [Credential]
}

func fail(_ message: String) -> Never {
    StandardError.write("rainwallet-tpm-probe: \(message)\n")
    exit(1)
}

let arguments = CommandLine.arguments
guard arguments.count == 3 else { fail("usage: rainwallet-tpm-probe STATE_DIRECTORY TCTI") }
let (state, tcti) = (arguments[1], arguments[2])
let provider = TPM2KeyProvider(stateDirectory: state, tcti: tcti)
do throws(RainError) {
    let storageKey = try provider.loadOrCreateSecret(.storage)
    let path = "\(state)/platform/platform-passkeys.sealed"
    guard let data = FileManager.default.contents(atPath: path) else { fail("cannot read \(path)") }
    let bytes = [UInt8](data)
    // The file: a 5-byte header (authenticated), then AES-256-GCM under HKDF(storage key).
    let key = try HKDFSHA256.deriveKey(from: storageKey, salt: [], info: "rain/platform-passkeys/v1")
    let plaintext = try AESGCM.open(
        try AESGCM.SealedBox(combined: Array(bytes.dropFirst(5))), using: key, authenticating: Array(bytes.prefix(5)))
    guard let file = try? JSONDecoder().decode(PasskeyFile.self, from: Data(plaintext)) else {
        fail("the passkey file does not decode")
    }
    var signed = 0
    var errors: [String] = []
    let digest = SHA256.hash(Array("an assertion nobody confirmed".utf8))
    for credential in file.credentials {
        guard let blob = Base64URL.decode(credential.keyBlob) else { fail("a key blob is not base64url") }
        do throws(RainError) {
            let passkey = try TPM2PasskeyKey(blob: blob, path: path)
            _ = try provider.signWithPasskeyKey(digest: digest, key: passkey, authorization: nil, path: path)
            signed += 1
        } catch {
            errors.append("RAIN_\(error.code.rawValue)")
        }
    }
    let failedTries = (try? provider.dictionaryAttackStatus().failedTries).map { Int($0) } ?? -1
    let quoted = errors.map { "\"\($0)\"" }.joined(separator: ",")
    print(#"{"credentials":\#(file.credentials.count),"signed":\#(signed),"errors":[\#(quoted)],"failedTries":\#(failedTries)}"#)
} catch {
    fail("RAIN_\(error.code.rawValue): \(error.message)")
}
