import Testing

@testable import RainKeyStore

/// The advice of an unreachable TPM names what the configured TCTI needs, never another one's.
@Suite struct TPMReachHintTests {
    @Test func eachTCTIGetsItsOwnAdvice() {
        #expect(TPM2Failure.reachHint(tcti: "device:/dev/tpmrm0").contains("/dev/tpmrm0"))
        #expect(TPM2Failure.reachHint(tcti: "device:/dev/tpm0").contains("/dev/tpm0 exists"))
        #expect(TPM2Failure.reachHint(tcti: "device").contains("/dev/tpmrm0"))
        let swtpm = TPM2Failure.reachHint(tcti: "swtpm:path=/run/user/1000/swtpm/tpm")
        #expect(swtpm.contains("software TPM (swtpm)") && swtpm.contains("path=/run/user/1000/swtpm/tpm"))
        #expect(!swtpm.contains("/dev/tpmrm0") && !swtpm.contains("tss group"))
        #expect(TPM2Failure.reachHint(tcti: "mssim:host=localhost,port=2321").contains("software TPM (mssim)"))
        #expect(TPM2Failure.reachHint(tcti: "tabrmd:bus_type=session").contains("tpm2-abrmd"))
        #expect(TPM2Failure.reachHint(tcti: "libtpms").contains("storage.tcti names (libtpms)"))
    }
}
