import RainCore
import Testing

@testable import RainAuthority

@Suite("Contact redaction")
struct ContactRedactionTests {
    @Test(
        "contacts in logs are redacted",
        arguments: [
            (RainWalletContact.email("user@example.com"), "u***@example.com"),
            (.email("a@b.co"), "a***@b.co"),
            (.phone("+15551234567"), "+1555***67"),
            (.phone("+4930123456"), "+4930***56"),
            (.phone("+12345678"), "+123***78"),
        ])
    func redaction(_ contact: RainWalletContact, _ expected: String) {
        #expect(ContactRedaction.redacted(contact) == expected)
    }
}
